package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestPageTokensAcrossReplicas: two runners built from one config with one page_tokens.key_file
// continue each other's next_page over HTTP, page after page, reading every row once; a runner
// with a key of its own refuses the token (400, invalid_arguments naming key_file), and a
// runner's own made-at-start key survives a reload.
func TestPageTokensAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE items (id int PRIMARY KEY, label text);
INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 95) i;`)
	dsn := db.RoleDSN(t, "pages")
	dir := t.TempDir()
	keyFile := apitest.WriteFile(t, dir, "page.key", "shared-page-key-0123456789abcdef0123\n")
	const token = "page-token-test-0123456789"
	load := func(withKey bool) func() (*config.Config, error) {
		return func() (*config.Config, error) {
			doc := `{"tokens":[{"name":"agent","token":"` + token + `","scopes":["read"]}],"databases":{"default":{"url":"` + dsn + `"}}`
			if withKey {
				doc += `,"page_tokens":{"key_file":"` + keyFile + `"}`
			}
			path := apitest.WriteFile(t, t.TempDir(), "config.json", doc+"}")
			cfg, err := config.LoadConfigFile(path)
			if err != nil {
				return nil, err
			}
			return cfg, cfg.Validate()
		}
	}
	serve := func(withKey bool) (*runner.Runtime, string) {
		cfg, err := load(withKey)()
		if err != nil {
			t.Fatal(err)
		}
		rt, err := runner.Build(context.Background(), cfg, zerolog.Nop(), runner.BuildOptions{NoSessions: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rt.Close)
		srv := httptest.NewServer(rt.Handler())
		t.Cleanup(srv.Close)
		return rt, srv.URL
	}
	_, a := serve(true)
	_, b := serve(true)
	lone, c := serve(false)
	selectOn := func(url, body string) (int, map[string]any) {
		status, out, _ := apitest.Call(t, http.MethodPost, url+"/v1/tools/select_query", token, body)
		return status, out
	}

	status, out := selectOn(a, `{"table":"items","order_by":"label desc","limit":10}`)
	if status != 200 || out["next_page"] == nil {
		t.Fatalf("first page: %d %v", status, out)
	}
	first := out["next_page"].(string)
	seen := map[string]bool{}
	for _, r := range out["data"].([]any) {
		seen[fmt.Sprint(r.(map[string]any)["id"])] = true
	}
	replicas := []string{b, a}
	for page := 0; out["truncated"] == true; page++ {
		status, out = selectOn(replicas[page%2], `{"page_token":"`+out["next_page"].(string)+`"}`)
		if status != 200 {
			t.Fatalf("page %d on replica %d: %d %v", page+2, page%2, status, out)
		}
		for _, r := range out["data"].([]any) {
			id := fmt.Sprint(r.(map[string]any)["id"])
			if seen[id] {
				t.Fatalf("row %s read twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 95 {
		t.Fatalf("read %d of 95 rows", len(seen))
	}

	status, out = selectOn(c, `{"page_token":"`+first+`"}`)
	if status != 400 || out["errorType"] != "invalid_arguments" || !strings.Contains(fmt.Sprint(out["suggestion"]), "key_file") {
		t.Fatalf("a runner with its own key: %d %v", status, out)
	}

	// The key made at start outlives a reload: tokens handed out before it still work.
	status, out = selectOn(c, `{"table":"items","limit":50}`)
	if status != 200 || out["next_page"] == nil {
		t.Fatalf("first page on the lone runner: %d %v", status, out)
	}
	if err := lone.Reload(context.Background(), load(false)); err != nil {
		t.Fatal(err)
	}
	if n, _ := lone.Generation(); n != 2 {
		t.Fatalf("generation %d after a reload", n)
	}
	if status, again := selectOn(c, `{"page_token":"`+out["next_page"].(string)+`"}`); status != 200 || again["rowCount"] != float64(45) {
		t.Fatalf("after a reload: %d %v", status, again)
	}
}
