package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// runnableBlock is a fenced block whose info string is "sh runnable".
type runnableBlock struct {
	where string // file:line of the opening fence
	code  string
}

// runnableBlocks returns the runnable blocks of README.md, of every page under docs/ and of every
// README.md under examples/.
func runnableBlocks(t *testing.T) []runnableBlock {
	t.Helper()
	files := docFiles(t)
	filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "README.md" {
			files = append(files, path)
		}
		return nil
	})
	var blocks []runnableBlock
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cur *runnableBlock
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur == nil && strings.TrimSpace(line) == "```sh runnable":
				cur = &runnableBlock{where: fmt.Sprintf("%s:%d", strings.TrimPrefix(file, "../../"), n)}
			case cur != nil && strings.TrimSpace(line) == "```":
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				cur.code += line + "\n"
			}
		}
		if cur != nil {
			t.Fatalf("%s: a runnable block is not closed", cur.where)
		}
	}
	return blocks
}

// TestReadmeRunnableBlocks runs the documentation as a new user would: it builds bin/pgtools,
// starts ./bin/pgtools demo from a directory laid out like a clone, and runs with bash, as
// written, every command the demo prints and every block marked runnable in README.md, docs/ and
// examples/. It also checks
// the MCP client configuration the demo prints.
func TestReadmeRunnableBlocks(t *testing.T) {
	if os.Getenv("PG_TEST_DSN") != "" {
		t.Skip("the demo starts its own PostgreSQL; skipped when tests use PG_TEST_DSN")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is needed to run the documentation's examples")
		}
		t.Skip("SKIPPED, curl not installed")
	}
	blocks := runnableBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("found %d runnable blocks in the docs; the marker (```sh runnable) must have been lost", len(blocks))
	}

	// A clone's layout: bin/pgtools built now, examples/ from this checkout.
	root := t.TempDir()
	examples, _ := filepath.Abs(examplesDir)
	if err := os.Symlink(examples, filepath.Join(root, "examples")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(root, "bin", "pgtools"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PGTOOLS_") && !strings.HasPrefix(kv, "DATABASE_URL") {
			env = append(env, kv)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr pgtest.SyncBuffer
	demo := exec.Command("./bin/pgtools", "demo", "--listen", "127.0.0.1:0", "--events", "5000")
	demo.Dir, demo.Env, demo.Stdout, demo.Stderr = root, env, &stdout, &stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- demo.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		demo.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("demo exited with %v:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			demo.Process.Kill()
			t.Errorf("demo did not stop within 30s of Ctrl-C")
		}
	}
	defer stop()

	waitFor(t, &stdout, regexp.MustCompile(`(?s)(`+demoMCPMarker+`.*\n}\n)`))
	printed := stdout.String()
	urlTok := strings.Fields(waitFor(t, &stdout, regexp.MustCompile(`export PGTOOLS_URL=(\S+) PGTOOLS_TOKEN=(\S+)`)))
	dsn := waitFor(t, &stdout, regexp.MustCompile(`export DATABASE_URL='([^']+)'`))
	if !strings.Contains(dsn, "pgtools_demo:") {
		t.Errorf("the printed DATABASE_URL is not the demo role's: %s", dsn)
	}
	env = append(env, "PGTOOLS_URL="+urlTok[0], "PGTOOLS_TOKEN="+urlTok[1], "DATABASE_URL="+dsn)

	bash := func(t *testing.T, script string, env []string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n--- script:\n%s\n--- output:\n%s", err, script, out)
		}
		return string(out)
	}

	// The demo's own examples: the indented lines between its greeting and the MCP snippet.
	t.Run("demo output", func(t *testing.T) {
		start := strings.Index(printed, "In another terminal")
		end := strings.Index(printed, demoMCPMarker)
		if start < 0 || end < start {
			t.Fatalf("demo output:\n%s", printed)
		}
		var script strings.Builder
		for _, line := range strings.Split(printed[start:end], "\n")[1:] {
			if strings.HasPrefix(line, "  ") {
				script.WriteString(line[2:] + "\n")
			}
		}
		// The shell the user types into has neither variable yet: the script's export sets them.
		out := bash(t, script.String(), env[:len(env)-3])
		for _, want := range []string{`"errorType":"read_only_violation"`, `"affectedRows":0`, `"errorType":"invalid_column"`,
			`"truncated":true`, `"rowCount": 3`, `"errorType":"too_many_rows"`, `"name":"Ada"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the demo's examples did not answer %s:\n%s", want, out)
			}
		}
		var cfg struct {
			MCPServers map[string]struct {
				Command string
				Args    []string
				Env     map[string]string
			}
		}
		snippet := printed[end+strings.Index(printed[end:], "\n{"):]
		if err := json.Unmarshal([]byte(snippet), &cfg); err != nil || len(cfg.MCPServers) != 1 {
			t.Fatalf("the MCP client configuration is not JSON with one server: %v\n%s", err, snippet)
		}
		bin, _ := filepath.EvalSymlinks(filepath.Join(root, "bin", "pgtools"))
		for _, s := range cfg.MCPServers {
			if got, _ := filepath.EvalSymlinks(s.Command); got != bin || len(s.Args) == 0 || s.Args[0] != "mcp" || s.Env["DATABASE_URL"] != dsn {
				t.Errorf("MCP client configuration: %+v, want command %s, args mcp …, env DATABASE_URL %s", s, bin, dsn)
			}
		}
	})
	for _, b := range blocks {
		t.Run(b.where, func(t *testing.T) { bash(t, b.code, env) })
	}
	// write.sh ran in the demo's examples and again in a docs block; it exits 1 on any answer
	// other than the one it shows, so a second run that failed on its unique email would fail here.
	stop()
	if !strings.Contains(stdout.String(), "stopping PostgreSQL") {
		t.Errorf("the demo did not clean up:\n%s", stdout.String())
	}
}

// TestReadmeGoVersion: the Go version README.md and docs/ ask for is go.mod's, wherever they name
// one.
func TestReadmeGoVersion(t *testing.T) {
	t.Parallel()
	gomod, _ := os.ReadFile("../../go.mod")
	want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	version := regexp.MustCompile(`Go (1\.\d+(?:\.\d+)?)`)
	var found [][]string
	for _, file := range docFiles(t) {
		text, _ := os.ReadFile(file)
		for _, m := range version.FindAllStringSubmatch(string(text), -1) {
			found = append(found, []string{strings.TrimPrefix(file, "../../"), m[1]})
		}
	}
	if want == nil || len(found) == 0 {
		t.Fatalf("go.mod's go line %q, the docs mention %q", want, found)
	}
	for _, m := range found {
		if m[1] != string(want[1]) {
			t.Errorf("%s says Go %s; go.mod needs %s", m[0], m[1], want[1])
		}
	}
}

// TestMakeHelpListsEveryTarget: every target the Makefile declares .PHONY is in make help's list
// (e2e was missing: the help filter took only letters and dashes).
func TestMakeHelpListsEveryTarget(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindAllSubmatch(mk, -1) {
		targets = append(targets, strings.Fields(string(m[1]))...)
	}
	out, err := exec.Command("make", "-s", "-C", "../..", "help").CombinedOutput()
	if err != nil || len(targets) < 10 {
		t.Fatalf("make help: %v (%d targets)\n%s", err, len(targets), out)
	}
	for _, tg := range targets {
		if !regexp.MustCompile(`(?m)^  make ` + regexp.QuoteMeta(tg) + ` `).Match(out) {
			t.Errorf("make help does not list %s:\n%s", tg, out)
		}
	}
}
