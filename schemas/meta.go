package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// metaKey is the top-level key of a tool schema file that holds the tool's metadata. It is an
// annotation for pgtools itself (the runner and the n8n build) and is never served to clients:
// Tool returns the schema without it.
const metaKey = "x-pgtools"

// ToolMeta is what pgtools knows of a tool beside its arguments, read from the "x-pgtools"
// object of schemas/<tool>.json. The runner and the n8n nodes both read it, so the list of
// tools and their read/write class are written down once.
type ToolMeta struct {
	// Name is the wire name: HTTP path segment, MCP tool name, task settings "tool". It is also
	// the file's name (schemas/<name>.json).
	Name string `json:"name"`
	// Order places the tool in ToolNames: ascending, one value per tool. The files leave gaps
	// (10, 20, …) so a new tool can go between two without renumbering the others.
	Order int `json:"order"`
	// DisplayName is the n8n node's name, e.g. "Select Query"; the node's class and type name
	// are made from it (SelectQuery, selectQuery).
	DisplayName string `json:"displayName"`
	// NodeAlias are the words n8n's node search finds the node by (its codex "alias"), beside
	// "postgres" and "sql", which every tool node has.
	NodeAlias []string `json:"nodeAlias"`
	// Operation is the "operation" field of the tool's answers and errors, e.g. "select".
	Operation string `json:"operation"`
	// Scope is the token scope a caller needs to call the tool at all: "read" or "write".
	Scope string `json:"scope"`
	// ReadOnly, Destructive and Idempotent are the MCP tool annotations (hints to clients).
	ReadOnly    bool `json:"readOnly"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
	// HiddenInNodes lists arguments the n8n nodes do not offer the model (kept for older callers).
	HiddenInNodes []string `json:"hiddenInNodes,omitempty"`
}

// Meta returns the metadata of the tool with the given wire name, and false if no tool has that
// name. The embedded files are checked by the tests, so a malformed object is a build defect
// and panics.
func Meta(name string) (ToolMeta, bool) {
	if !slices.Contains(ToolNames(), name) {
		return ToolMeta{}, false
	}
	return readMeta(name), true
}

// readMeta decodes the metadata of the embedded file <name>.json.
func readMeta(name string) ToolMeta {
	var doc struct {
		Meta *ToolMeta `json:"x-pgtools"`
	}
	dec := json.NewDecoder(bytes.NewReader(mustRead(name + ".json")))
	if err := dec.Decode(&doc); err != nil || doc.Meta == nil {
		panic(fmt.Sprintf("schemas: %s.json has no valid %s object: %v", name, metaKey, err))
	}
	return *doc.Meta
}

// unserved are the top-level members of a tool schema file that Tool leaves out: the metadata,
// and what a model does not need but pays for on every turn (docs/design.md §12). "$schema", "$id" and
// "title" identify the file (the tool's name already names it; the dialect is 2020-12, which the
// runner's validator assumes), and "description" is the tool's description, which clients
// receive beside the schema (Description).
var unserved = []string{metaKey, "$schema", "$id", "title", "description"}

// withoutMeta returns the schema document raw without its top-level members in unserved. The
// other members keep their order and their bytes (descriptions are what a model reads, and the
// served schema should read like the file), so the object is rewritten member by member rather
// than through a map.
func withoutMeta(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("schema is not a JSON object: %v", err)
	}
	var out bytes.Buffer
	out.WriteString("{")
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("reading a key: %w", err)
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("reading %q: %w", key, err)
		}
		if slices.Contains(unserved, key) {
			continue
		}
		if !first {
			out.WriteString(",")
		}
		first = false
		k, _ := json.Marshal(key)
		out.WriteString("\n  ")
		out.Write(k)
		out.WriteString(": ")
		out.Write(value)
	}
	out.WriteString("\n}\n")
	return out.Bytes(), nil
}

// withoutKeywords returns the JSON document raw, compacted, without the object members named by
// drop at any depth, except where they are names of properties (the keys of a "properties"
// object). Members keep their order.
func withoutKeywords(raw []byte, drop ...string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	if err := copyValue(dec, &out, drop, false); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// copyValue copies the next JSON value from dec to out; in an object, members named in drop are
// left out unless names is set (the object is a "properties" map, whose keys are names).
func copyValue(dec *json.Decoder, out *bytes.Buffer, drop []string, names bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		out.WriteByte('{')
		first := true
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if !names && slices.Contains(drop, key) {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return err
				}
				continue
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(key)
			out.Write(k)
			out.WriteByte(':')
			if err := copyValue(dec, out, drop, !names && key == "properties"); err != nil {
				return err
			}
		}
		_, err = dec.Token() // }
		out.WriteByte('}')
		return err
	case json.Delim('['):
		out.WriteByte('[')
		for i := 0; dec.More(); i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := copyValue(dec, out, drop, false); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
		out.WriteByte(']')
		return err
	}
	// Strings keep <, > and & as they are: a model reads them (json.Marshal would escape them).
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tok); err != nil {
		return err
	}
	out.Truncate(out.Len() - 1) // Encode's newline
	return nil
}
