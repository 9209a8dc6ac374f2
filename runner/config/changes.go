package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Change is one setting whose value differs between two configurations.
type Change struct {
	// Key is the setting's key in schemas/config.schema.json, as SchemaKeys names it:
	// "databases.*.policy.read_only".
	Key string
	// Path is where the setting is: "databases.main.policy.read_only", "tokens[1].scopes".
	Path string
}

// Changes lists, sorted by path, every setting whose value differs between was and now, both
// validated (defaults filled, so a key left out and its default written out are the same): every
// key of the schema that holds a value rather than further keys (a list of values and an object
// of free-form values count as one value). A list of objects is compared item by item, a map
// entry by entry, so a token added or a database removed shows as the keys of its item. The
// secret a *_file key names is part of that key's value: a rotated password file changes
// databases.<name>.password_file. No value appears in the result, only keys and paths.
func Changes(was, now *Config) ([]Change, error) {
	root, err := schemaDoc()
	if err != nil {
		return nil, err
	}
	a, err := settingsOf(root, was)
	if err != nil {
		return nil, err
	}
	b, err := settingsOf(root, now)
	if err != nil {
		return nil, err
	}
	var out []Change
	for path, s := range a {
		if t, ok := b[path]; !ok || !reflect.DeepEqual(s.value, t.value) {
			out = append(out, Change{Key: s.key, Path: path})
		}
	}
	for path, t := range b {
		if _, ok := a[path]; !ok {
			out = append(out, Change{Key: t.key, Path: path})
		}
	}
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return out, nil
}

// setting is one value of a configuration and the schema key it is at.
type setting struct {
	key   string
	value any
}

// settingsOf flattens c, as its JSON (the config file's keys), into its settings by path,
// following the schema: keys the schema does not have (where a value came from, what
// check-config adds) are left out.
func settingsOf(root map[string]any, c *Config) (map[string]setting, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("comparing configurations: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("comparing configurations: %w", err)
	}
	secrets := c.fileSecrets()
	out := map[string]setting{}
	var flatten func(node map[string]any, v any, path, key string)
	flatten = func(node map[string]any, v any, path, key string) {
		node = resolveRef(root, node)
		if props, ok := node["properties"].(map[string]any); ok {
			obj, _ := v.(map[string]any)
			for k, sub := range props {
				sub, _ := sub.(map[string]any)
				flatten(sub, obj[k], joinPath(path, k), joinPath(key, k))
			}
			return
		}
		if sub := entrySchema(root, node); sub != nil {
			switch v := v.(type) {
			case map[string]any:
				for k, item := range v {
					flatten(sub, item, joinPath(path, k), joinPath(key, "*"))
				}
				return
			case []any:
				for i, item := range v {
					flatten(sub, item, fmt.Sprintf("%s[%d]", path, i), joinPath(key, "*"))
				}
				return
			case nil:
				return // no entries: none can differ but by being there
			}
		}
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				v = nil // an empty list says what no list says
			}
		case map[string]any:
			if len(x) == 0 {
				v = nil
			}
		}
		if s, ok := secrets[path]; ok {
			v = []any{v, s}
		}
		out[path] = setting{key: key, value: v}
	}
	flatten(root, doc, "", "")
	return out, nil
}

// fileSecrets are the secrets read from the *_file keys whose value the config's JSON does not
// carry, by path, each as a digest.
func (c *Config) fileSecrets() map[string]string {
	out := map[string]string{}
	digest := func(path string, secret []byte) {
		sum := sha256.Sum256(secret)
		out[path] = hex.EncodeToString(sum[:])
	}
	for name, d := range c.Databases {
		if d.PasswordFile != "" {
			digest("databases."+name+".password_file", []byte(d.Password))
		}
	}
	if c.PageTokens.KeyFile != "" {
		digest("page_tokens.key_file", c.PageTokens.Key)
	}
	if c.Fleet.SecretFile != "" {
		digest("fleet.secret_file", c.Fleet.Secret)
	}
	if j := c.JWT; j != nil {
		if j.SecretFile != "" {
			digest("jwt.secret_file", j.Secret)
		}
		if j.JWKSFile != "" {
			digest("jwt.jwks_file", j.JWKS)
		}
	}
	return out
}
