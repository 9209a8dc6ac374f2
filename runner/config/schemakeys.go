package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/schemas"
)

// SchemaKeys lists every key of schemas/config.schema.json by its path: "." between keys, "*"
// for any entry of a map ("databases.*.url") or any item of a list of objects
// ("tokens.*.scopes"). A list of objects and a map have a key of their own besides their
// items' ("tokens", "tokens.*"). Sorted.
func SchemaKeys() ([]string, error) {
	root, err := schemaDoc()
	if err != nil {
		return nil, err
	}
	var keys []string
	walkSchema(root, root, "", func(key string, _ map[string]any) { keys = append(keys, key) })
	slices.Sort(keys)
	return keys, nil
}

// walkSchema calls visit for every key under node (a schema object of root) with its path and
// its schema, $refs into $defs resolved, parents before children.
func walkSchema(root, node map[string]any, key string, visit func(key string, node map[string]any)) {
	node = resolveRef(root, node)
	if props, ok := node["properties"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(props)) {
			sub, _ := props[k].(map[string]any)
			visit(joinPath(key, k), resolveRef(root, sub))
			walkSchema(root, sub, joinPath(key, k), visit)
		}
	}
	if sub := entrySchema(root, node); sub != nil {
		visit(joinPath(key, "*"), sub)
		walkSchema(root, sub, joinPath(key, "*"), visit)
	}
}

// entrySchema is the schema of the entries of a map (additionalProperties) or of the items of a
// list of objects, resolved; nil when node is neither.
func entrySchema(root, node map[string]any) map[string]any {
	if sub, ok := node["additionalProperties"].(map[string]any); ok {
		return resolveRef(root, sub)
	}
	if sub, ok := node["items"].(map[string]any); ok {
		if sub = resolveRef(root, sub); sub["properties"] != nil {
			return sub
		}
	}
	return nil
}

// resolveRef follows a "$ref" into root's $defs.
func resolveRef(root, node map[string]any) map[string]any {
	if ref, ok := node["$ref"].(string); ok {
		defs, _ := root["$defs"].(map[string]any)
		if target, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any); ok {
			return target
		}
	}
	return node
}

func schemaDoc() (map[string]any, error) {
	var root map[string]any
	if err := json.Unmarshal(schemas.Config(), &root); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	return root, nil
}
