package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/tools/page"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Load is the one door of the configuration: it reads the config file at path ("" for none),
// applies o (what flags and environment give; nil for nothing) over its document, validates the
// result once against schemas/config.schema.json, decodes it into a Config, reads the secrets
// its *_file keys name, and validates that (Validate, which fills the defaults). Every problem
// is reported at once as a *ConfigError, each line naming where it is: a key of the file, or the
// flag or environment variable that gave it ("--max-affected-rows: …", "env PGTOOLS_LISTEN: …").
// An error that is not a *ConfigError is a config file that cannot be read at all.
func Load(path string, o *Overlay) (*Config, error) {
	cfg, ap, err := load(path, o)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			for i, line := range ce.Problems {
				if where, msg, ok := strings.Cut(line, ": "); ok && !strings.ContainsAny(where, " \"") {
					ce.Problems[i] = ap.attribute(where, msg)
				}
			}
		}
		return nil, err
	}
	return cfg, nil
}

// LoadConfigFile reads a JSON config file, validates it against the schema and reads the secrets
// its *_file keys name, without the checks and defaults of Validate (Load does both). Every
// problem is reported, one line per path, naming the fix; the error is then a *ConfigError (or
// an I/O error when the file cannot be read at all).
func LoadConfigFile(path string) (*Config, error) {
	cfg, _, err := load(path, nil)
	return cfg, err
}

// load is Load without Validate; it also returns where the overlay's settings went, for
// Validate's messages.
func load(path string, o *Overlay) (*Config, *applied, error) {
	var doc any = map[string]any{}
	source := "the configuration"
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("reading config file: %w", err)
		}
		source = "config file " + path
		if doc, err = jsonschema.UnmarshalJSON(strings.NewReader(string(raw))); err != nil {
			return nil, nil, &ConfigError{Source: source, Problems: []string{syntaxProblem(raw, err)}}
		}
	}
	ap := &applied{origins: map[string]string{}, made: map[string]string{}}
	if m, ok := doc.(map[string]any); ok {
		o.applyTo(m, ap)
		if _, ok := m["databases"]; !ok && path == "" {
			// With neither a file nor a database flag, the schema's minimum of one database
			// says what to set.
			m["databases"] = map[string]any{}
		}
		nameTokens(m, ap)
	}
	fail := func(problems []problem) (*Config, *applied, error) {
		lines := make([]string, len(problems))
		attributed := false
		for i, p := range problems {
			lines[i] = ap.attribute(p.path, p.msg)
			attributed = attributed || lines[i] != p.String()
		}
		if attributed && path != "" {
			source = "the configuration (config file " + path + " with environment and flags)"
		}
		return nil, nil, &ConfigError{Source: source, Problems: lines}
	}
	if problems := checkConfigDoc(doc); len(problems) > 0 {
		return fail(problems)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return fail([]problem{{"(top level)", err.Error()}})
	}
	cfg := &Config{File: path}
	if err := json.Unmarshal(raw, cfg); err != nil {
		// The schema accepted the document, so this is a type the struct cannot hold.
		return fail([]problem{{"(top level)", err.Error()}})
	}
	if problems := readSecrets(cfg, doc.(map[string]any)); len(problems) > 0 {
		return fail(problems)
	}
	for i := range cfg.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		cfg.Tokens[i].Origin = "config file " + where
		if origin, ok := ap.origins[where]; ok {
			cfg.Tokens[i].Origin = origin
		}
	}
	for name, d := range cfg.Databases {
		d.Origin = "config file"
		for _, k := range []string{"url", "url_file"} {
			if origin, ok := ap.origins["databases."+name+"."+k]; ok {
				d.Origin = origin
			}
		}
		cfg.Databases[name] = d
	}
	return cfg, ap, nil
}

// readSecrets reads the secrets the *_file keys of cfg name into the fields beside them. doc is
// the document cfg was decoded from.
func readSecrets(cfg *Config, doc map[string]any) []problem {
	var problems []problem
	add := func(path, format string, args ...any) {
		problems = append(problems, problem{path, fmt.Sprintf(format, args...)})
	}
	for i := range cfg.Tokens {
		t := &cfg.Tokens[i]
		if t.TokenFile == "" {
			continue
		}
		where := fmt.Sprintf("tokens[%d].token_file", i)
		s, err := readSecretFile(t.TokenFile)
		if err != nil {
			add(where, "%v", err)
			continue
		}
		if len(s) < minTokenLen {
			add(where, "the token in %s is %d characters long; use at least %d (openssl rand -hex 24)", t.TokenFile, len(s), minTokenLen)
			continue
		}
		t.Secret = s
	}
	if cfg.JWT != nil {
		for _, line := range readJWTFiles(cfg.JWT) {
			where, msg, _ := strings.Cut(line, ": ")
			add(where, "%s", msg)
		}
	}
	// readInto reads the secret file named at key into *into, if one is named.
	readInto := func(key, file string, into *string) {
		if file == "" {
			return
		}
		s, err := readSecretFile(file)
		if err != nil {
			add(key, "%v", err)
			return
		}
		*into = s
	}
	if n, _ := doc["n8n"].(map[string]any); n["token"] != nil && n["token_file"] != nil {
		add("n8n", "give token or token_file, not both")
	}
	readInto("n8n.token_file", cfg.N8N.TokenFile, &cfg.N8N.Token)
	if f := cfg.PageTokens.KeyFile; f != "" {
		var key string
		readInto("page_tokens.key_file", f, &key)
		if key != "" && len(key) < page.KeyMinBytes {
			add("page_tokens.key_file", "the key in %s is %d bytes long; use at least %d (openssl rand -hex 32)", f, len(key), page.KeyMinBytes)
		}
		cfg.PageTokens.Key = []byte(key)
	}
	if f := cfg.Fleet.SecretFile; f != "" {
		var secret string
		readInto("fleet.secret_file", f, &secret)
		cfg.Fleet.Secret = []byte(secret)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Databases)) {
		d := cfg.Databases[name]
		readInto("databases."+name+".url_file", d.URLFile, &d.URL)
		readInto("databases."+name+".password_file", d.PasswordFile, &d.Password)
		cfg.Databases[name] = d
	}
	return problems
}

// nameTokens names the tokens the overlay added without a name "token-<n>", n their place in
// the list counting from 1, as the file's own tokens count: the file's first, then the flags'
// and the environment's.
func nameTokens(doc map[string]any, ap *applied) {
	list, _ := doc["tokens"].([]any)
	for i, t := range list {
		tok, ok := t.(map[string]any)
		if _, named := tok["name"]; !ok || named {
			continue
		}
		if _, added := ap.origins[fmt.Sprintf("tokens[%d]", i)]; added {
			tok["name"] = fmt.Sprintf("token-%d", i+1)
		}
	}
}

// minTokenLen is the shortest accepted API token.
const minTokenLen = 16

// readSecretFile reads a secret from a file, trimming surrounding whitespace (a trailing newline
// from echo or an editor). The error names the file, never its content.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, unwrapPathError(err))
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// unwrapPathError drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
