package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Overlay is what flags and environment variables give: changes to the config document, each
// naming a key of schemas/config.schema.json ("listen", "databases.default.policy.read_only",
// "n8n.brokers") and where it came from ("--listen", "env PGTOOLS_LISTEN"). Load applies them in
// the order they were made over the config file's document, so a later change of a key wins,
// and validates the result once: a flag is checked exactly as the key it gives, and a problem
// with it names the flag. The zero Overlay (and a nil one) changes nothing. An Overlay is not
// safe for concurrent use while it is being built.
type Overlay struct {
	edits []edit
}

// edit is one change of an Overlay.
type edit struct {
	op     editOp
	path   []string // the key, split at "."
	value  any      // for set: the value; for add: a []any of items
	origin string
}

type editOp int

const (
	opSet editOp = iota
	opRemove
	opAdd
)

// Set gives key the value (a string, bool, number, []string or other JSON-encodable value)
// instead of what the file says, making the objects on its path as needed.
func (o *Overlay) Set(origin, key string, value any) {
	o.edits = append(o.edits, edit{op: opSet, path: strings.Split(key, "."), value: jsonValue(value), origin: origin})
}

// Remove removes key and what lies under it, as if the file did not say it.
func (o *Overlay) Remove(origin, key string) {
	o.edits = append(o.edits, edit{op: opRemove, path: strings.Split(key, "."), origin: origin})
}

// Add appends items (JSON-encodable values) to the list at key, after what the file lists.
func (o *Overlay) Add(origin, key string, items ...any) {
	o.edits = append(o.edits, edit{op: opAdd, path: strings.Split(key, "."), value: jsonValue(items), origin: origin})
}

// jsonValue turns v into what jsonschema.UnmarshalJSON gives for its JSON (map[string]any,
// []any, json.Number, string, bool, nil), the values a config document holds.
func jsonValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		// A programming error (a channel, a func): the schema refuses the string it leaves.
		return fmt.Sprintf("%T cannot be a config value", v)
	}
	out, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return fmt.Sprintf("%T cannot be a config value", v)
	}
	return out
}

// applied records where an Overlay's changes went in one document, for messages.
type applied struct {
	// origins maps the instance path of every value an edit gave ("listen", "tokens[2]") to
	// its origin.
	origins map[string]string
	// made maps the instance path of every object an edit made on its way to its key
	// ("databases.default") to the origin of the first such edit.
	made map[string]string
}

// applyTo applies o's edits to doc in order and records where they went in ap. An edit whose
// path crosses a value of the file that is not an object (or, for Add, whose key holds no
// list) is skipped: the schema reports the file's value.
func (o *Overlay) applyTo(doc map[string]any, ap *applied) {
	if o == nil {
		return
	}
	for _, e := range o.edits {
		m, where := doc, ""
		ok := true
		for _, k := range e.path[:len(e.path)-1] {
			where = joinPath(where, k)
			next, exists := m[k]
			if !exists {
				if e.op == opRemove {
					ok = false
					break
				}
				next = map[string]any{}
				m[k] = next
				if _, seen := ap.made[where]; !seen {
					ap.made[where] = e.origin
				}
			}
			if m, ok = next.(map[string]any); !ok {
				break
			}
		}
		if !ok {
			continue
		}
		last := e.path[len(e.path)-1]
		where = joinPath(where, last)
		switch e.op {
		case opSet:
			m[last] = e.value
			ap.forget(where)
			ap.origins[where] = e.origin
		case opRemove:
			delete(m, last)
			ap.forget(where)
		case opAdd:
			list, exists := m[last].([]any)
			if !exists && m[last] != nil {
				continue
			}
			for _, item := range e.value.([]any) {
				ap.origins[fmt.Sprintf("%s[%d]", where, len(list))] = e.origin
				list = append(list, item)
			}
			m[last] = list
		}
	}
}

// forget drops what was recorded at path and under it: a later edit replaced it.
func (ap *applied) forget(path string) {
	for p := range ap.origins {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			delete(ap.origins, p)
		}
	}
}

// attribute renders a problem at path: when an edit gave the value there, the line starts with
// its origin ("--max-affected-rows: …"; with the path when the problem lies deeper: "--n8n-broker:
// n8n.brokers[1]: …"); when only edits made the object there, it says so ("databases.default
// (given only by --read-only): …"). Other problems are "path: msg".
func (ap *applied) attribute(path, msg string) string {
	if ap == nil {
		return path + ": " + msg
	}
	best := ""
	for p := range ap.origins {
		if (path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")) && len(p) > len(best) {
			best = p
		}
	}
	switch {
	case best == path:
		return ap.origins[best] + ": " + msg
	case best != "":
		return ap.origins[best] + ": " + path + ": " + msg
	case ap.made[path] != "":
		return path + " (given only by " + ap.made[path] + "): " + msg
	}
	return path + ": " + msg
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
