package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pgtools/pgtools/runner/config"
)

// A setting is a flag, an environment variable or both that give one key of the config file
// (schemas/config.schema.json). The flag wins over the variable, which wins over the file. The
// config package validates the key's value with the file's, once, and a problem names the flag
// or variable it came from.
type setting struct {
	flag  string // without "--"; "" when only the environment gives the key
	env   string // "" when only a flag gives it
	key   string // the config key, e.g. "databases.default.policy.read_only"
	kind  kind   // how the text becomes the key's value
	usage string // what --help says; "; key <key>" is added
	// instead is a key beside key that the setting replaces: a URL given by DATABASE_URL
	// replaces the file's url_file, and the other way round.
	instead string
}

// kind is how a setting's text becomes the value of its key.
type kind int

const (
	text    kind = iota // a string; an empty one gives nothing
	list                // comma-separated strings (a repeated flag adds to them)
	boolean             // a flag that is on when given (--x=false turns it off)
	integer             // a whole number
	millis              // a duration such as 10s, given to a *_ms key in milliseconds
)

// The settings of each command. Environment variables are applied in this order, then the flags
// in this order; so DATABASE_URL_FILE comes before DATABASE_URL, which then wins.
var (
	// databaseSettings are what serve, check-config and mcp share: the default database, its
	// policy, logs and the audit log.
	databaseSettings = []setting{
		{env: "DATABASE_URL_FILE", key: "databases.default.url_file", instead: "url"},
		{flag: "database-url", env: "DATABASE_URL", key: "databases.default.url", instead: "url_file",
			usage: "PostgreSQL URL of the \"default\" database; env DATABASE_URL, or DATABASE_URL_FILE naming a file that holds it"},
		{flag: "log-level", env: "PGTOOLS_LOG_LEVEL", key: "log_level", usage: "debug, info (default), warn or error; env PGTOOLS_LOG_LEVEL"},
		{flag: "audit-log", env: "PGTOOLS_AUDIT_LOG", key: "audit_log", usage: "audit log of write attempts: a file (appended) or - for stderr; env PGTOOLS_AUDIT_LOG"},
		{flag: "read-only", key: policyKey + "read_only", kind: boolean, usage: "policy of the default database: refuse every write"},
		{flag: "allow-ddl", key: policyKey + "allow_ddl", kind: boolean, usage: "policy of the default database: let execute_sql write run DDL for tokens with the ddl scope"},
		{flag: "max-affected-rows", key: policyKey + "max_affected_rows", kind: integer, usage: "policy of the default database: most rows one update/delete may change (default 1000)"},
		{flag: "allow-tables", key: policyKey + "allow_tables", kind: list, usage: "policy of the default database: the only tables agents may name, comma-separated (name or schema.name)"},
		{flag: "deny-tables", key: policyKey + "deny_tables", kind: list, usage: "policy of the default database: tables agents may not name, comma-separated"},
		{flag: "table-lists", key: policyKey + "table_lists", usage: "policy of the default database: enforced (default: --allow-tables/--deny-tables must hold as grants, checked at start) or advisory (they check the table argument only)"},
		{flag: "disable-tools", key: policyKey + "disabled_tools", kind: list, usage: "policy of the default database: tools to refuse, comma-separated wire names (e.g. execute_sql)"},
		{flag: "statement-timeout", key: policyKey + "statement_timeout_ms", kind: millis, usage: "policy of the default database: statement timeout (default 30s)"},
		{flag: "lock-timeout", key: policyKey + "lock_timeout_ms", kind: millis, usage: "policy of the default database: lock wait timeout (default 5s)"},
		{flag: "prepared-statements", key: policyKey + "prepared_statements", kind: boolean, usage: "policy of the default database: prepare each read statement once per connection (default true); --prepared-statements=false behind a transaction-mode pooler that cannot track named prepared statements"},
	}
	// serveSettings are serve's and check-config's: the shared ones, where and to whom the HTTP
	// API listens, and the n8n brokers it joins. The API tokens are given apart (tokenSources).
	serveSettings = append(databaseSettings[:len(databaseSettings):len(databaseSettings)],
		setting{flag: "listen", env: "PGTOOLS_LISTEN", key: "listen", usage: "HTTP listen address (default 127.0.0.1:8080); env PGTOOLS_LISTEN"},
		setting{flag: "metrics-listen", env: "PGTOOLS_METRICS_LISTEN", key: "metrics_listen", usage: "separate address for /metrics, /healthz and /readyz only (default: /metrics on --listen); env PGTOOLS_METRICS_LISTEN"},
		setting{flag: "replica-id", env: "PGTOOLS_REPLICA_ID", key: "replica_id", usage: "name of this replica, whose tag starts every session id (default: the host name); env PGTOOLS_REPLICA_ID"},
		setting{flag: "state", env: "PGTOOLS_STATE", key: "state", usage: "configured database whose schema keeps the fleet's shared state: approval requests and the replica registry (default: none, approvals in this runner's memory); env PGTOOLS_STATE"},
		setting{flag: "state-schema", env: "PGTOOLS_STATE_SCHEMA", key: "state_schema", usage: "schema of the state database that pgtools creates and upgrades (default pgtools); env PGTOOLS_STATE_SCHEMA"},
		setting{flag: "advertise-url", env: "PGTOOLS_ADVERTISE_URL", key: "fleet.advertise_url", usage: "base URL other replicas reach this one at, recorded in the replica registry (default: http:// and --listen, a wildcard host as the host name); env PGTOOLS_ADVERTISE_URL"},
		setting{flag: "fleet-peers", env: "PGTOOLS_FLEET_PEERS", kind: list, key: "fleet.peers", usage: "base URLs of the replicas, comma-separated (e.g. http://10.0.0.2:8080): a call in another replica's session is forwarded there; env PGTOOLS_FLEET_PEERS"},
		setting{flag: "fleet-peers-dns", env: "PGTOOLS_FLEET_PEERS_DNS", key: "fleet.peers_dns", usage: "name:port whose addresses are the replicas (a Kubernetes headless Service); env PGTOOLS_FLEET_PEERS_DNS"},
		setting{flag: "fleet-secret-file", env: "PGTOOLS_FLEET_SECRET_FILE", key: "fleet.secret_file", usage: "file holding the secret the replicas sign their internal requests with (≥ 32 bytes, the same on every replica); env PGTOOLS_FLEET_SECRET_FILE"},
		setting{flag: "n8n-broker", env: "PGTOOLS_N8N_BROKERS", key: "n8n.brokers", kind: list, usage: "n8n task broker to join as an external task runner of type pgtools, e.g. http://127.0.0.1:5679 (repeatable: one per n8n process); env PGTOOLS_N8N_BROKERS=\"url1,url2\""},
		setting{env: "N8N_RUNNERS_AUTH_TOKEN", key: "n8n.token", instead: "token_file"},
		setting{flag: "n8n-broker-token-file", key: "n8n.token_file", instead: "token", usage: "file holding the brokers' auth token, the N8N_RUNNERS_AUTH_TOKEN n8n runs with (default: env N8N_RUNNERS_AUTH_TOKEN)"},
		setting{flag: "n8n-principal", key: "n8n.principal", usage: "principal that broker tasks run as, with scopes read,write; it owns the sessions they open (default: the config file's n8n.principal, or n8n-broker)"},
		setting{flag: "n8n-role", key: "n8n.role", usage: "PostgreSQL role broker tasks run as (SET LOCAL ROLE; checked at start like a token's role); default: the config file's n8n.role, or the login role"},
		setting{flag: "n8n-act-as", key: "n8n.act_as", kind: boolean, usage: "let broker tasks name an end user in the \"subject\" setting (the node's \"Act as user\" field): they run as <n8n-principal>:<subject> with request.jwt.claims {\"sub\", \"via\"}"},
	)
	// mcpSettings are pgtools mcp's: the shared ones and the MCP results' shape.
	mcpSettings = append(databaseSettings[:len(databaseSettings):len(databaseSettings)],
		setting{flag: "structured-content", key: "mcp.structured_content", kind: boolean, usage: "also send each result as structuredContent, with an outputSchema per tool (default: once, as text)"},
	)
)

// policyKey is where the policy flags go: the default database's policy.
const policyKey = "databases.default.policy."

// settings are a command's flags and environment for the config file's keys, and how to load
// the configuration from them, at start and at each reload.
type settings struct {
	configFile string
	table      []setting
	given      map[string]*flagValue // by flag name
	tokens     []string              // --token, in order; nil without the flag
	hasTokens  bool                  // the command takes API tokens (serve, check-config)
	remove     []string              // keys the command leaves out, whoever gives them (mcp: listen, n8n)
	getenv     func(key string) string
}

// register defines the flags of table, --config and, with tokens, --token on fs. getenv is the
// environment (os.Getenv in main).
func register(fs *flag.FlagSet, getenv func(string) string, table []setting, tokens bool) *settings {
	s := &settings{table: table, given: map[string]*flagValue{}, hasTokens: tokens, getenv: getenv}
	fs.StringVar(&s.configFile, "config", getenv("PGTOOLS_CONFIG"), "JSON config file (schemas/config.schema.json); env PGTOOLS_CONFIG")
	for _, st := range table {
		if st.flag == "" {
			continue
		}
		v := &flagValue{kind: st.kind}
		s.given[st.flag] = v
		fs.Var(v, st.flag, st.usage+"; key "+st.key)
	}
	if tokens {
		fs.Func("token", "API token as SECRET:SCOPES[:ROLE], e.g. s3cret-value-0123456:read,write or s3cret-value-0123456:read:tenant_agent to run its calls as PostgreSQL role tenant_agent (repeatable); env PGTOOLS_TOKENS=\"a:read;b:read,write:role\", or PGTOOLS_TOKENS_FILE naming a file with one per line; key tokens[]",
			func(v string) error { s.tokens = append(s.tokens, v); return nil })
	}
	return s
}

// load reads the configuration: the config file with the environment and the flags over it
// (config.Load). It reads the environment and the files it names each time, so a reload sees
// what they say then.
func (s *settings) load() (*config.Config, error) {
	o, err := s.overlay()
	if err != nil {
		return nil, err
	}
	return config.Load(s.configFile, o)
}

// overlay turns the environment and the flags given into changes of the config document: the
// variables first, then the flags, so a flag wins over its variable; tokens add up after the
// file's: --token, then PGTOOLS_TOKENS, then PGTOOLS_TOKENS_FILE.
func (s *settings) overlay() (*config.Overlay, error) {
	o := &config.Overlay{}
	apply := func(st setting, origin string, value any) {
		o.Set(origin, st.key, value)
		if st.instead != "" {
			o.Remove(origin, st.key[:strings.LastIndexByte(st.key, '.')+1]+st.instead)
		}
	}
	for _, st := range s.table {
		if st.env == "" {
			continue
		}
		// Variables are text or lists, so an empty one (or a list of blanks) gives nothing.
		if v, ok := fromText(st.kind, s.getenv(st.env)); ok {
			apply(st, "env "+st.env, v)
		}
	}
	for _, st := range s.table {
		if st.flag == "" {
			continue
		}
		if v, ok := s.given[st.flag].value(); ok {
			apply(st, "--"+st.flag, v)
		}
	}
	if s.hasTokens {
		if err := s.addTokens(o); err != nil {
			return nil, err
		}
	}
	for _, key := range s.remove {
		o.Remove("this command", key)
	}
	return o, nil
}

// addTokens adds the API tokens of --token, PGTOOLS_TOKENS and PGTOOLS_TOKENS_FILE to o, named
// by their place among all tokens (config.Load).
func (s *settings) addTokens(o *config.Overlay) error {
	type source struct{ origin, spec string }
	var sources []source
	for _, spec := range s.tokens {
		sources = append(sources, source{"--token", spec})
	}
	if env := s.getenv("PGTOOLS_TOKENS"); env != "" {
		sources = append(sources, source{"env PGTOOLS_TOKENS", env})
	}
	if file := s.getenv("PGTOOLS_TOKENS_FILE"); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("env PGTOOLS_TOKENS_FILE: cannot read %s: %w", file, errors.Unwrap(err))
		}
		// One token per line or separated by ";", as in PGTOOLS_TOKENS.
		sources = append(sources, source{"env PGTOOLS_TOKENS_FILE", strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ";")})
	}
	n := 0
	for _, src := range sources {
		toks, err := config.ParseTokens([]string{src.spec}, n)
		if err != nil {
			return fmt.Errorf("%s: %w", src.origin, err)
		}
		n += len(toks)
		for _, t := range toks {
			item := map[string]any{"token": t.Secret, "scopes": t.Scopes}
			if t.Role != "" {
				item["role"] = t.Role
			}
			o.Add(src.origin, "tokens", item)
		}
	}
	return nil
}

// flagValue is a setting's flag: its text as given, checked for its kind when it is parsed.
type flagValue struct {
	kind  kind
	set   bool
	texts []string // each time it was given
}

func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	return strings.Join(v.texts, ",")
}

func (v *flagValue) Set(s string) error {
	if _, ok := fromText(v.kind, s); !ok && (v.kind != text && v.kind != list) {
		return fmt.Errorf("%q is not %s", s, v.kind)
	}
	if v.kind != list {
		v.texts = v.texts[:0]
	}
	v.set, v.texts = true, append(v.texts, s)
	return nil
}

// IsBoolFlag lets a boolean setting's flag stand alone (--read-only).
func (v *flagValue) IsBoolFlag() bool { return v.kind == boolean }

// value is the key's value the flag gives, if it was given. A text flag given empty gives
// nothing (its variable or the file then does); a list flag given empty gives an empty list.
func (v *flagValue) value() (any, bool) {
	if !v.set {
		return nil, false
	}
	if v.kind == list {
		out := []string{}
		for _, t := range v.texts {
			out = append(out, splitList(t)...)
		}
		return out, true
	}
	return fromText(v.kind, v.texts[len(v.texts)-1])
}

// fromText is the value text gives a key of kind k; not ok for text that gives nothing (empty)
// or is not of the kind.
func fromText(k kind, text string) (any, bool) {
	switch k {
	case list:
		items := splitList(text)
		return items, len(items) > 0
	case boolean:
		b, err := strconv.ParseBool(text)
		return b, err == nil
	case integer:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		return n, err == nil
	case millis:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil || d < time.Millisecond || d%time.Millisecond != 0 {
			return nil, false
		}
		return d.Milliseconds(), true
	}
	return text, text != ""
}

func (k kind) String() string {
	switch k {
	case list:
		return "a comma-separated list"
	case boolean:
		return "true or false"
	case integer:
		return "a whole number"
	case millis:
		return "a duration of whole milliseconds, at least 1ms, e.g. 10s or 1500ms"
	}
	return "text"
}

// splitList splits a comma-separated list, dropping blanks around and between items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
