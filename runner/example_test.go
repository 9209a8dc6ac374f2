package runner_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/rs/zerolog"
)

// Build assembles pgtools from one Config, as pgtools serve does: here a config file, with one
// setting given as a flag would give it (an Overlay), loaded and validated once by config.Load.
// The runtime's Handler serves the HTTP API, /mcp, health and metrics.
func ExampleBuild() {
	pgtest.Example(func(d *pgtest.DB) {
		tb := pgtest.ExampleTB()
		d.Exec(tb, `CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL);
INSERT INTO orders VALUES (1, 'paid'), (2, 'pending');`)
		dir, err := os.MkdirTemp("", "pgtools-example")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "pgtools.json")
		doc := fmt.Sprintf(`{"databases": {"default": {"url": %q}},
 "tokens": [{"name": "agent", "token": "example-token-0123456789", "scopes": ["read"]}]}`, d.RoleDSN(tb, "agent"))
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			panic(err)
		}
		flags := &config.Overlay{}
		flags.Set("--max-affected-rows", "databases.default.policy.max_affected_rows", 1) // as `pgtools serve --max-affected-rows 1` would
		cfg, err := config.Load(file, flags)
		if err != nil {
			panic(err)
		}

		ctx := context.Background()
		rt, err := runner.Build(ctx, cfg, zerolog.Nop(), runner.BuildOptions{})
		if err != nil {
			panic(err)
		}
		defer rt.Close()
		srv := httptest.NewServer(rt.Handler())
		defer srv.Close()

		req, _ := http.NewRequest("POST", srv.URL+"/v1/tools/select_query", strings.NewReader(`{"table":"orders","order_by":"id"}`))
		req.Header.Set("Authorization", "Bearer example-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, strings.Contains(string(body), `"data":[{"id":1,"status":"paid"},{"id":2,"status":"pending"}]`))
		fmt.Println(cfg.Databases["default"].Policy.MaxAffectedRows)
	})
	// Output:
	// 200 true
	// 1
}
