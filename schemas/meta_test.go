package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestMetaFields checks the "x-pgtools" object of every tool schema file: present, no unknown
// keys, every field of its JSON type, and the class consistent (a read-only tool needs only the
// read scope and destroys nothing).
func TestMetaFields(t *testing.T) {
	t.Parallel()
	displayNames := map[string]string{}
	for _, name := range ToolNames() {
		t.Run(name, func(t *testing.T) {
			file := decode(t, mustRead(name+".json"))
			obj, ok := file[metaKey].(map[string]any)
			if !ok {
				t.Fatalf("%s.json has no %s object (got %T)", name, metaKey, file[metaKey])
			}
			strs := []string{"name", "displayName", "operation", "scope"}
			bools := []string{"readOnly", "destructive", "idempotent"}
			for _, k := range strs {
				if s, ok := obj[k].(string); !ok || s == "" {
					t.Errorf("%s.%s = %#v, want a non-empty string", metaKey, k, obj[k])
				}
			}
			for _, k := range bools {
				if _, ok := obj[k].(bool); !ok {
					t.Errorf("%s.%s = %#v, want true or false", metaKey, k, obj[k])
				}
			}
			if n, ok := obj["order"].(float64); !ok || n < 1 || n != float64(int(n)) {
				t.Errorf("%s.order = %#v, want a positive integer", metaKey, obj["order"])
			}
			if list, ok := obj["nodeAlias"].([]any); !ok || len(list) == 0 {
				t.Errorf("%s.nodeAlias = %#v, want a non-empty array of words", metaKey, obj["nodeAlias"])
			} else {
				for _, v := range list {
					if s, ok := v.(string); !ok || s == "" || s == "postgres" || s == "sql" {
						t.Errorf("%s.nodeAlias has %#v, want a non-empty word other than postgres and sql (every node has those)", metaKey, v)
					}
				}
			}
			props, _ := file["properties"].(map[string]any)
			if h, present := obj["hiddenInNodes"]; present {
				list, ok := h.([]any)
				if !ok || len(list) == 0 {
					t.Errorf("%s.hiddenInNodes = %#v, want a non-empty array of property names", metaKey, h)
				}
				for _, v := range list {
					if s, ok := v.(string); !ok || props[s] == nil {
						t.Errorf("%s.hiddenInNodes names %#v, which is not a property", metaKey, v)
					}
				}
			}
			for k := range obj {
				if !slices.Contains(strs, k) && !slices.Contains(bools, k) && !slices.Contains([]string{"order", "nodeAlias", "hiddenInNodes"}, k) {
					t.Errorf("%s has unknown key %q", metaKey, k)
				}
			}

			meta, ok := Meta(name)
			if !ok {
				t.Fatalf("Meta(%q) not found", name)
			}
			if meta.Name != name {
				t.Errorf("name = %q, want the wire name %q", meta.Name, name)
			}
			if meta.Scope != "read" && meta.Scope != "write" {
				t.Errorf("scope = %q, want read or write", meta.Scope)
			}
			if meta.ReadOnly && (meta.Scope != "read" || meta.Destructive) {
				t.Errorf("a read-only tool must need only the read scope and not be destructive: %+v", meta)
			}
			if other, dup := displayNames[meta.DisplayName]; dup {
				t.Errorf("displayName %q is also %s's", meta.DisplayName, other)
			}
			displayNames[meta.DisplayName] = name
		})
	}
	if _, ok := Meta("unknown"); ok {
		t.Error(`Meta("unknown") found a tool`)
	}
}

// TestToolWithoutMeta checks that the schema that validates calls (Validation) is the file
// without the members in unserved (its metadata, identification and description, served as the
// tool's): nothing else removed or changed, and the members in the file's order; and that the
// schema served to clients (Tool) is that without the validation-only keywords, at any depth but
// among property names.
func TestToolWithoutMeta(t *testing.T) {
	t.Parallel()
	for _, name := range ToolNames() {
		raw, _ := Validation(name)
		served, _ := Tool(name)
		if bytes.Contains(served, []byte(`"pattern"`)) || bytes.Contains(served, []byte(`"minLength"`)) || bytes.Contains(served, []byte(`\u003c`)) {
			t.Errorf("Tool(%q) serves a validation-only keyword or escaped text: %s", name, served)
		}
		if s, v := decode(t, served), decode(t, raw); !reflect.DeepEqual(s["properties"] != nil, v["properties"] != nil) || len(s["properties"].(map[string]any)) != len(v["properties"].(map[string]any)) {
			t.Errorf("Tool(%q) lost properties", name)
		}
		if bytes.Contains(raw, []byte(metaKey)) {
			t.Errorf("Tool(%q) contains %s", name, metaKey)
		}
		file := decode(t, mustRead(name+".json"))
		if Description(name) == "" || Description(name) != file["description"] {
			t.Errorf("Description(%q) = %q, not the file's", name, Description(name))
		}
		for _, k := range unserved {
			delete(file, k)
		}
		if served := decode(t, raw); !reflect.DeepEqual(served, file) {
			t.Errorf("Tool(%q) differs from the file beyond %v", name, unserved)
		}
		fileKeys := slices.DeleteFunc(topLevelKeys(t, mustRead(name+".json")), func(k string) bool { return slices.Contains(unserved, k) })
		if got := topLevelKeys(t, raw); !slices.Equal(got, fileKeys) {
			t.Errorf("Tool(%q) members %v, want the file's order %v", name, got, fileKeys)
		}
	}
}

func topLevelKeys(tb testing.TB, raw []byte) []string {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		tb.Fatal(err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			tb.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			tb.Fatal(err)
		}
	}
	return keys
}
