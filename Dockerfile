# syntax=docker/dockerfile:1
#
# pgtools as a container: a static binary (CGO_ENABLED=0) on a distroless base that has no shell,
# running as the unprivileged user "nonroot" (uid 65532).
#
#   docker build -t pgtools:local --build-arg VERSION="$(git describe --tags --always --dirty)" .
#   docker run --rm -p 8080:8080 -e DATABASE_URL=postgres://… -e PGTOOLS_TOKENS="$(openssl rand -hex 24):read" pgtools:local
#
# examples/docker-compose.yml runs it beside PostgreSQL and n8n.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY runner ./runner
COPY schemas ./schemas
COPY tools ./tools
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/pgtools/pgtools/runner/version.Version=${VERSION}" \
      -o /out/pgtools ./cmd/pgtools

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pgtools /usr/local/bin/pgtools
USER nonroot:nonroot
# Inside a container the API must listen beyond loopback, which pgtools only allows with tokens.
ENV PGTOOLS_LISTEN=0.0.0.0:8080
EXPOSE 8080
# Liveness only (/healthz): a database that is down makes /readyz fail, which must not get the
# container restarted. Orchestrators should probe /readyz for readiness (pgtools healthcheck --ready).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/usr/local/bin/pgtools", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pgtools"]
CMD ["serve"]
