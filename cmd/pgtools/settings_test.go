package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/config"
)

// TestSettingsGiveKeysOfTheSchema: every flag and variable of the settings tables gives a key of
// schemas/config.schema.json (the default database's as any database's), so each is validated
// as that key and documented with it.
func TestSettingsGiveKeysOfTheSchema(t *testing.T) {
	t.Parallel()
	keys, err := config.SchemaKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range [][]setting{serveSettings, mcpSettings} {
		for _, s := range table {
			key := strings.Replace(s.key, "databases.default.", "databases.*.", 1)
			if !slices.Contains(keys, key) {
				t.Errorf("--%s / %s gives %s, which is no key of the config schema", s.flag, s.env, s.key)
			}
			if s.instead != "" && !slices.Contains(keys, key[:strings.LastIndexByte(key, '.')+1]+s.instead) {
				t.Errorf("--%s / %s replaces %s, which is no key of the config schema", s.flag, s.env, s.instead)
			}
			if s.flag != "" && s.usage == "" {
				t.Errorf("--%s has no usage", s.flag)
			}
		}
	}
}

// TestFlagsWinOverEnvironmentOverFile: check-config shows, for a key the file, a variable and a
// flag all give, the flag's value; without the flag the variable's; the n8n settings given by
// flags and environment as the config's n8n object, the token redacted.
func TestFlagsWinOverEnvironmentOverFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "pgtools.json")
	doc := `{"listen": "127.0.0.1:7000", "databases": {"default": {"url": "postgres://file@127.0.0.1/app", "policy": {"max_affected_rows": 5}}},
	  "n8n": {"principal": "n8n-file", "task_timeout_ms": 120000}}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	const brokerToken = "n8n-runners-auth-token-from-env-0123"
	env := map[string]string{"PGTOOLS_CONFIG": file, "PGTOOLS_LISTEN": "127.0.0.1:7001", "DATABASE_URL": "postgres://env@127.0.0.1/app",
		"PGTOOLS_N8N_BROKERS": "http://127.0.0.1:5679, http://127.0.0.1:5680", "N8N_RUNNERS_AUTH_TOKEN": brokerToken}
	type effective struct {
		Listen    string
		Databases map[string]struct {
			Source     string
			Connection struct{ User string }
			Policy     struct {
				MaxAffectedRows int  `json:"max_affected_rows"`
				ReadOnly        bool `json:"read_only"`
			}
		}
		N8N struct {
			Brokers       []string
			Token         string
			Principal     string
			ActAs         bool  `json:"act_as"`
			TaskTimeoutMS int64 `json:"task_timeout_ms"`
		} `json:"n8n"`
	}
	check := func(args ...string) effective {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"check-config"}, args...), &out, &errOut, envOf(env)); code != 0 {
			t.Fatalf("check-config %v: exit %d: %s", args, code, errOut.String())
		}
		if strings.Contains(out.String()+errOut.String(), brokerToken) {
			t.Fatalf("check-config printed the broker token")
		}
		var eff effective
		if err := json.Unmarshal(out.Bytes(), &eff); err != nil {
			t.Fatal(err)
		}
		return eff
	}
	eff := check()
	def := eff.Databases["default"]
	if eff.Listen != "127.0.0.1:7001" || def.Source != "env DATABASE_URL" || def.Connection.User != "env" || def.Policy.MaxAffectedRows != 5 ||
		!slices.Equal(eff.N8N.Brokers, []string{"http://127.0.0.1:5679", "http://127.0.0.1:5680"}) || eff.N8N.Token != "[REDACTED]" ||
		eff.N8N.Principal != "n8n-file" || eff.N8N.TaskTimeoutMS != 120000 {
		t.Errorf("environment over the file: %+v", eff)
	}
	eff = check("--listen", "127.0.0.1:7002", "--database-url", "postgres://flag@127.0.0.1/app", "--max-affected-rows", "7", "--read-only",
		"--n8n-broker", "http://127.0.0.1:5681", "--n8n-principal", "n8n-flag", "--n8n-act-as")
	def = eff.Databases["default"]
	if eff.Listen != "127.0.0.1:7002" || def.Source != "--database-url" || def.Connection.User != "flag" || def.Policy.MaxAffectedRows != 7 ||
		!def.Policy.ReadOnly || !slices.Equal(eff.N8N.Brokers, []string{"http://127.0.0.1:5681"}) || eff.N8N.Principal != "n8n-flag" || !eff.N8N.ActAs {
		t.Errorf("flags over the environment: %+v", eff)
	}
}

// TestBadSettingsNameTheirFlagOrVariable: a value a flag or variable gives is checked as the
// config key it sets, and the problem names the flag or the variable.
func TestBadSettingsNameTheirFlagOrVariable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--max-affected-rows", "0"}, "--max-affected-rows: 0 is too small; the minimum is 1"},
		{nil, []string{"--table-lists", "strict"}, `--table-lists: "strict" is not allowed`},
		{nil, []string{"--log-level", "loud"}, `--log-level: "loud" is not allowed`},
		{map[string]string{"PGTOOLS_LOG_LEVEL": "loud"}, nil, `env PGTOOLS_LOG_LEVEL: "loud" is not allowed`},
		{map[string]string{"PGTOOLS_REPLICA_ID": "no spaces please"}, nil, `env PGTOOLS_REPLICA_ID: "no spaces please" is not valid`},
		{map[string]string{"PGTOOLS_LISTEN": "0.0.0.0:8080"}, nil, "env PGTOOLS_LISTEN: refusing to listen on 0.0.0.0:8080 without API tokens"},
		{map[string]string{"DATABASE_URL_FILE": "/nonexistent/url"}, []string{"--database-url", ""}, "env DATABASE_URL_FILE: cannot read /nonexistent/url"},
		{map[string]string{"PGTOOLS_TOKENS_FILE": "/nonexistent/tokens"}, nil, "env PGTOOLS_TOKENS_FILE: cannot read /nonexistent/tokens"},
		{map[string]string{"N8N_RUNNERS_AUTH_TOKEN": "x"}, []string{"--n8n-broker", "ftp://127.0.0.1"}, "--n8n-broker: n8n.brokers[0]: n8n broker URL \"ftp://127.0.0.1\": the scheme must be http or https"},
	} {
		env := map[string]string{"DATABASE_URL": "postgres://u@127.0.0.1/app"}
		if _, ok := c.env["DATABASE_URL_FILE"]; ok {
			delete(env, "DATABASE_URL")
		}
		for k, v := range c.env {
			env[k] = v
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"check-config"}, c.args...), &out, &errOut, envOf(env))
		if code != 1 || !strings.Contains(errOut.String(), "\n  "+c.want) && !strings.Contains(errOut.String(), ": "+c.want) {
			t.Errorf("%v %v: exit %d, stderr %q, want a line %q", c.env, c.args, code, errOut.String(), c.want)
		}
	}
	// A flag whose text is not of its kind is refused as the flag package refuses one.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--statement-timeout", "1500us"}, &out, &errOut, envOf(nil)); code != 2 ||
		!strings.Contains(errOut.String(), `invalid value "1500us" for flag -statement-timeout`) {
		t.Errorf("--statement-timeout 1500us: exit %d, %q", code, errOut.String())
	}
}

// TestMCPLeavesOutServeKeys: pgtools mcp loads a config file written for serve — a listen
// address beyond loopback without tokens, n8n brokers without their token — since it serves
// neither; its --structured-content gives mcp.structured_content.
func TestMCPLeavesOutServeKeys(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pgtools.json")
	doc := `{"listen": "0.0.0.0:8080", "databases": {"default": {"url": "postgres://u@127.0.0.1/app"}}, "n8n": {"brokers": ["http://127.0.0.1:5679"]}}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	s := mcpSettingsFor(fs, envOf(nil))
	if err := fs.Parse([]string{"--config", file, "--structured-content"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != config.DefaultListen || cfg.N8N.Joins() || !cfg.MCP.StructuredContent {
		t.Errorf("mcp's configuration: listen %q, brokers %v, structured content %v", cfg.Listen, cfg.N8N.Brokers, cfg.MCP.StructuredContent)
	}
}
