package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const reloadToken = "reload-test-token-0123456789"

// reloadConfig is a config file for the notes database: one token with scopes, and the custom
// tools given (a JSON array, "" for none).
func reloadConfig(dsn, scopes, role, custom string) string {
	tok := fmt.Sprintf(`{"name": "agent", "token": %q, "scopes": [%s]`, reloadToken, scopes)
	if role != "" {
		tok += fmt.Sprintf(`, "role": %q`, role)
	}
	tok += "}"
	cfg := fmt.Sprintf(`{"listen": "127.0.0.1:0", "tokens": [%s], "databases": {"default": {"url": %q}}`, tok, dsn)
	if custom != "" {
		cfg += `, "custom_tools": ` + custom
	}
	return cfg + "}"
}

const noteCountTool = `[{"name": "note_count", "description": "Counts the notes.", "sql": "SELECT count(*) AS n FROM notes"}]`

// reloadServer is serve running in-process from a config file, reloaded through its trigger.
type reloadServer struct {
	file    string
	base    string
	logs    *lockedBuffer
	trigger chan struct{}
}

func startReloadServer(t *testing.T, cfgText string) *reloadServer {
	t.Helper()
	s := &reloadServer{file: filepath.Join(t.TempDir(), "pgtools.json"), logs: &lockedBuffer{}, trigger: make(chan struct{})}
	s.write(t, cfgText)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	settings := register(fs, envOf(nil), serveSettings, true)
	if err := fs.Parse([]string{"--config", s.file}); err != nil {
		t.Fatal(err)
	}
	cfg, err := settings.load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, cfg, newLogger(s.logs, "info"), ready, reloader{trigger: s.trigger, load: settings.load})
	}()
	select {
	case addr := <-ready:
		s.base = "http://" + addr
	case err := <-errc:
		t.Fatalf("serve: %v\n%s", err, s.logs.String())
	case <-time.After(90 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

func (s *reloadServer) write(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(s.file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload writes text as the config file, triggers a reload and waits for its outcome line:
// "configuration reloaded" or "configuration reload refused". It returns that line.
func (s *reloadServer) reload(t *testing.T, text string) string {
	t.Helper()
	s.write(t, text)
	before := s.outcomes()
	s.trigger <- struct{}{}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if lines := s.outcomes(); len(lines) > len(before) {
			return lines[len(lines)-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no reload outcome logged:\n%s", s.logs.String())
	return ""
}

func (s *reloadServer) outcomes() []string {
	var out []string
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, `"configuration reloaded"`) || strings.Contains(l, `"configuration reload refused`) {
			out = append(out, l)
		}
	}
	return out
}

// httpGet fetches path with the token and returns the status and body.
func httpGet(t *testing.T, base, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+reloadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func httpCall(t *testing.T, base, tool, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+reloadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out
}

// readyGeneration is /readyz's config_generation.
func readyGeneration(t *testing.T, base string) float64 {
	t.Helper()
	status, body := httpGet(t, base, "/readyz")
	var r struct {
		Status     string  `json:"status"`
		Generation float64 `json:"config_generation"`
		Loaded     string  `json:"config_loaded_at"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || status != http.StatusOK || r.Loaded == "" {
		t.Fatalf("/readyz: %d %s", status, body)
	}
	return r.Generation
}

// metricValue is the value of the sample named series (with its labels) on /metrics.
func metricValue(t *testing.T, base, series string) string {
	t.Helper()
	_, body := httpGet(t, base, "/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("%s not on /metrics", series)
	}
	return m[1]
}

// TestReloadAppliesToNewCallsOnly: a reload through serve's trigger turns a read-write token
// read-only and adds a custom tool. A session begun before it commits after it; the token's next
// write is refused; the new tool is listed and answers. A config that is not JSON and one whose
// role check fails are refused: the previous config keeps serving, /readyz's generation stays,
// and the metrics count every outcome.
func TestReloadAppliesToNewCallsOnly(t *testing.T) {
	t.Parallel()
	db, dsn := notesDB(t, "reload")
	s := startReloadServer(t, reloadConfig(dsn, `"read", "write"`, "", ""))
	if g := readyGeneration(t, s.base); g != 1 {
		t.Fatalf("generation at start: %v, want 1", g)
	}
	begun := httpCall(t, s.base, "pg_tx", `{"action":"begin"}`)
	id, _ := begun["session_id"].(string)
	if id == "" {
		t.Fatalf("begin: %v", begun)
	}
	if out := httpCall(t, s.base, "insert_data", fmt.Sprintf(`{"table":"notes","row":{"id":1,"body":"in session"},"session_id":%q}`, id)); out["success"] != true {
		t.Fatalf("insert in session: %v", out)
	}

	if line := s.reload(t, reloadConfig(dsn, `"read"`, "", noteCountTool)); !strings.Contains(line, `"configuration reloaded"`) {
		t.Fatalf("reload: %s", line)
	}
	if g := readyGeneration(t, s.base); g != 2 {
		t.Fatalf("generation after the reload: %v, want 2", g)
	}
	if out := httpCall(t, s.base, "insert_data", `{"table":"notes","row":{"id":2,"body":"after"}}`); out["errorType"] != "not_allowed" {
		t.Fatalf("write of a token made read-only: %v, want not_allowed", out)
	}
	if out := httpCall(t, s.base, "insert_data", fmt.Sprintf(`{"table":"notes","row":{"id":4,"body":"more"},"session_id":%q}`, id)); out["errorType"] != "not_allowed" {
		t.Fatalf("write in the session after its token was made read-only: %v, want not_allowed", out)
	}
	if out := httpCall(t, s.base, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id)); out["success"] != true {
		t.Fatalf("commit of the session begun before the reload: %v", out)
	}
	if n := db.QueryInt(t, "select count(*) from notes"); n != 1 {
		t.Fatalf("%d notes after the commit, want 1", n)
	}
	if _, list := httpGet(t, s.base, "/v1/tools"); !strings.Contains(list, `"note_count"`) {
		t.Fatalf("/v1/tools after the reload lacks note_count: %s", list)
	}
	countNotes := func() {
		t.Helper()
		out := httpCall(t, s.base, "note_count", `{}`)
		if rows, _ := out["data"].([]any); out["success"] != true || len(rows) != 1 || fmt.Sprint(rows[0].(map[string]any)["n"]) != "1" {
			t.Fatalf("note_count: %v", out)
		}
	}
	countNotes()

	role := db.RoleName("no_such_role")
	for _, c := range []struct{ name, cfg, why string }{
		{"not JSON", `{"listen": `, "JSON"},
		{"role check fails", reloadConfig(dsn, `"read", "write"`, role, ""), role},
	} {
		line := s.reload(t, c.cfg)
		if !strings.Contains(line, "configuration reload refused") || !strings.Contains(line, c.why) {
			t.Errorf("%s: outcome %s, want a refusal naming %q", c.name, line, c.why)
		}
		if g := readyGeneration(t, s.base); g != 2 {
			t.Errorf("%s: generation %v after a refused reload, want 2", c.name, g)
		}
		countNotes() // the previous config still serves, custom tool and all
		if out := httpCall(t, s.base, "insert_data", `{"table":"notes","row":{"id":3,"body":"x"}}`); out["errorType"] != "not_allowed" {
			t.Errorf("%s: the refused config's write scope took effect: %v", c.name, out)
		}
	}
	for series, want := range map[string]string{
		`pgtools_config_generation`:                     "2",
		`pgtools_config_reload_total{result="ok"}`:      "1",
		`pgtools_config_reload_total{result="refused"}`: "2",
		// The tool the reload added is counted like a built-in one.
		`pgtools_tool_calls_total{database="default",outcome="success",tool="note_count"}`: "3",
	} {
		if got := metricValue(t, s.base, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
	if strings.Contains(s.logs.String(), reloadToken) {
		t.Error("a log line holds the token")
	}
}

// TestSIGHUPReloadsServe sends a real SIGHUP to a pgtools serve process: the config file's new
// custom tool then answers and /readyz shows generation 2.
func TestSIGHUPReloadsServe(t *testing.T) {
	t.Parallel()
	bin := buildPgtools(t)
	_, dsn := notesDB(t, "hup")
	file := filepath.Join(t.TempDir(), "pgtools.json")
	if err := os.WriteFile(file, []byte(reloadConfig(dsn, `"read"`, "", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", file)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, base, call := startServe(t, cmd, reloadToken)
	if out := call("note_count", `{}`); out["errorType"] != "unknown_tool" {
		t.Fatalf("note_count before the reload: %v", out)
	}
	if err := os.WriteFile(file, []byte(reloadConfig(dsn, `"read"`, "", noteCountTool)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, regexp.MustCompile(`"configuration reloaded"`))
	if out := call("note_count", `{}`); out["success"] != true {
		t.Fatalf("note_count after SIGHUP: %v", out)
	}
	if g := readyGeneration(t, base); g != 2 {
		t.Fatalf("generation after SIGHUP: %v, want 2", g)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, stderr)
}
