package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools/words"
)

const configSchemaURL = "mem://config.schema.json"

// validateConfigDoc checks a config document against schemas/config.schema.json and returns one
// line per problem, sorted by path: where it is ("databases.main.policy.max_limit",
// "tokens[1]") and what to write instead. Messages come from the schema itself (allowed keys,
// descriptions, defaults as examples), so they stay in step with it.
func validateConfigDoc(raw []byte) []string {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return []string{syntaxProblem(raw, err)}
	}
	problems := checkConfigDoc(doc)
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.String()
	}
	return lines
}

// syntaxProblem describes why raw is not JSON, with the line and column when it can.
func syntaxProblem(raw []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(raw, se.Offset)
		return fmt.Sprintf("line %d, column %d: not valid JSON: %v", line, col, se)
	}
	return fmt.Sprintf("not valid JSON: %v", err)
}

// problem is one thing wrong with a config document: where (an instance path such as
// "databases.main.policy.max_limit" or "tokens[1]"; "(top level)" for the document) and what.
type problem struct{ path, msg string }

func (p problem) String() string { return p.path + ": " + p.msg }

// checkConfigDoc checks a decoded config document (jsonschema.UnmarshalJSON's values) against
// schemas/config.schema.json: one problem per failing path, sorted.
func checkConfigDoc(doc any) []problem {
	schemaDoc, sch, err := configSchema()
	if err != nil {
		return []problem{{"config schema", err.Error()}}
	}
	verr := sch.Validate(doc)
	if verr == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return []problem{{"(top level)", verr.Error()}}
	}
	d := describer{schema: schemaDoc, printer: message.NewPrinter(language.English), seen: map[string]bool{}}
	d.walk(ve)
	sort.Slice(d.problems, func(i, j int) bool { return d.problems[i].String() < d.problems[j].String() })
	return d.problems
}

// configSchema is schemas/config.schema.json, as a document and compiled.
func configSchema() (map[string]any, *jsonschema.Schema, error) {
	var schemaDoc map[string]any
	if err := json.Unmarshal(schemas.Config(), &schemaDoc); err != nil {
		return nil, nil, err
	}
	c := jsonschema.NewCompiler()
	sdoc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(schemas.Config())))
	if err == nil {
		err = c.AddResource(configSchemaURL, sdoc)
	}
	var sch *jsonschema.Schema
	if err == nil {
		sch, err = c.Compile(configSchemaURL)
	}
	return schemaDoc, sch, err
}

// position turns a byte offset into a 1-based line and column.
func position(raw []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off-1 && i < int64(len(raw)); i++ {
		if raw[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// describer turns a schema validation error tree into one line per problem.
type describer struct {
	schema   map[string]any
	printer  *message.Printer
	problems []problem
	seen     map[string]bool
}

func (d *describer) add(path, msg string) {
	p := problem{path, msg}
	if !d.seen[p.String()] {
		d.seen[p.String()] = true
		d.problems = append(d.problems, p)
	}
}

func (d *describer) walk(e *jsonschema.ValidationError) {
	path := instancePath(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.OneOf:
		// The config's oneOfs are alternatives of required keys (url or url_file; token or
		// token_file): say so in one line instead of one line per branch.
		alts := d.oneOfRequired(e.SchemaURL)
		if len(alts) > 0 && len(k.Subschemas) == 0 && allRequired(e.Causes) {
			d.add(path, fmt.Sprintf("missing %s: give one of them. %s", quoteJoin(alts, " or "), d.propHint(e.SchemaURL, alts[0])))
			return
		}
		if len(alts) > 0 && len(k.Subschemas) > 1 {
			d.add(path, fmt.Sprintf("give only one of %s, not both", quoteJoin(alts, " and ")))
			return
		}
	case *kind.PropertyNames:
		// jsonschema v6.0.3 reports a propertyNames error with the instance location of a later
		// sibling (its slice is reused), so the object's path is taken from the schema location
		// instead: #/properties/databases/propertyNames is at "databases".
		d.add(propertiesPath(e.SchemaURL, path), fmt.Sprintf("%q is not a valid name. %s", k.Property, d.description(e.SchemaURL)))
		return
	}
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			d.walk(c)
		}
		return
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := d.properties(e.SchemaURL)
		for _, p := range k.Properties {
			msg := "unknown key"
			if near := closest(p, allowed); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			d.add(join(path, p), msg+" Allowed here: "+strings.Join(allowed, ", "))
		}
	case *kind.Type:
		msg := fmt.Sprintf("must be %s, not %s", article(strings.Join(k.Want, " or ")), article(k.Got))
		if ex := d.example(e.SchemaURL); ex != "" {
			msg += ", e.g. " + ex
		}
		d.add(path, msg)
	case *kind.Required:
		for _, m := range k.Missing {
			d.add(path, fmt.Sprintf("missing %q. %s", m, d.propHint(e.SchemaURL, m)))
		}
	case *kind.Enum:
		// A schema titles the kind of thing its enum lists ("tool") when the value names one.
		if title, _ := d.node(e.SchemaURL)["title"].(string); title != "" {
			d.add(path, fmt.Sprintf("unknown %s %s; %s", title, display(k.Got), k.LocalizedString(d.printer)))
		} else {
			d.add(path, fmt.Sprintf("%s is not allowed; %s", display(k.Got), k.LocalizedString(d.printer)))
		}
	case *kind.MinLength:
		msg := fmt.Sprintf("is %d characters long, at least %d needed", k.Got, k.Want)
		if strings.HasSuffix(path, ".token") {
			msg += "; use a long random value (openssl rand -hex 24)"
		}
		d.add(path, msg)
	case *kind.Minimum:
		want, _ := k.Want.Float64()
		got, _ := k.Got.Float64()
		d.add(path, fmt.Sprintf("%v is too small; the minimum is %v", got, want))
	case *kind.ExclusiveMinimum:
		want, _ := k.Want.Float64()
		d.add(path, fmt.Sprintf("must be more than %v; remove the key for no limit", want))
	case *kind.MinItems:
		d.add(path, fmt.Sprintf("needs at least %d item(s)", k.Want))
	case *kind.MinProperties:
		d.add(path, fmt.Sprintf("needs at least %d entry: no database configured; set DATABASE_URL, pass --database-url, or give the config file one, e.g. {\"default\": {\"url\": \"postgres://pgtools@localhost:5432/app\"}}", k.Want))
	case *kind.UniqueItems:
		d.add(path, fmt.Sprintf("items %d and %d are the same; list each once", k.Duplicates[0], k.Duplicates[1]))
	case *kind.Pattern:
		if desc := d.description(e.SchemaURL); desc != "" {
			d.add(path, fmt.Sprintf("%q is not valid: %s", k.Got, firstSentence(desc)))
		} else {
			d.add(path, k.LocalizedString(d.printer))
		}
	default:
		d.add(path, e.ErrorKind.LocalizedString(d.printer))
	}
}

func allRequired(causes []*jsonschema.ValidationError) bool {
	for _, c := range causes {
		if _, ok := c.ErrorKind.(*kind.Required); !ok {
			return false
		}
	}
	return len(causes) > 0
}

// instancePath renders an instance location: tokens[0].scopes, databases.main.url.
func instancePath(loc []string) string {
	if len(loc) == 0 {
		return "(top level)"
	}
	var b strings.Builder
	for i, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil {
			// Database names start with a letter, so a number is always an array index.
			b.WriteString("[" + seg + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// propertiesPath turns a schema location made only of properties (#/properties/a/properties/b/…)
// into the instance path "a.b"; any other location gives fallback.
func propertiesPath(schemaURL, fallback string) string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	var parts []string
	for i := 0; i+1 < len(toks); i += 2 {
		if toks[i] != "properties" {
			if i+1 == len(toks)-1 || toks[i] == "propertyNames" {
				break
			}
			return fallback
		}
		parts = append(parts, toks[i+1])
	}
	if len(parts) == 0 {
		return fallback
	}
	return strings.Join(parts, ".")
}

func join(path, key string) string {
	if path == "(top level)" {
		return key
	}
	return path + "." + key
}

// node returns the schema object a validation error's SchemaURL points at
// ("mem://config.schema.json#/$defs/database"), or nil.
func (d *describer) node(schemaURL string) map[string]any {
	_, frag, _ := strings.Cut(schemaURL, "#")
	var cur any = d.schema
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := cur.(type) {
		case map[string]any:
			cur = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(n) {
				return nil
			}
			cur = n[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	if ref, ok := m["$ref"].(string); ok && len(m) <= 2 {
		// {"description": …, "$ref": "#/$defs/policy"}: the referenced object holds the keys.
		if target := d.node(ref); target != nil {
			return target
		}
	}
	return m
}

func (d *describer) properties(schemaURL string) []string {
	props, _ := d.node(schemaURL)["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (d *describer) description(schemaURL string) string {
	s, _ := d.node(schemaURL)["description"].(string)
	return s
}

// propHint is the first sentence of a property's description, which says what to put there.
func (d *describer) propHint(schemaURL, prop string) string {
	props, _ := d.node(schemaURL)["properties"].(map[string]any)
	p, _ := props[prop].(map[string]any)
	desc, _ := p["description"].(string)
	if desc == "" {
		return ""
	}
	return prop + ": " + firstSentence(desc)
}

// oneOfRequired lists the keys the branches of a oneOf require (url, url_file).
func (d *describer) oneOfRequired(schemaURL string) []string {
	branches, _ := d.node(schemaURL)["oneOf"].([]any)
	var out []string
	for _, b := range branches {
		bm, _ := b.(map[string]any)
		req, _ := bm["required"].([]any)
		if len(req) != 1 {
			return nil
		}
		s, _ := req[0].(string)
		out = append(out, s)
	}
	return out
}

// example renders the schema's default for a key as an example value.
func (d *describer) example(schemaURL string) string {
	n := d.node(schemaURL)
	def, ok := n["default"]
	if !ok {
		return ""
	}
	b, _ := json.Marshal(def)
	return string(b)
}

func firstSentence(s string) string {
	// A sentence ends at ". " (descriptions use "e.g." mid-sentence, never followed by a capital).
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '.' && s[i+1] == ' ' && s[i+2] >= 'A' && s[i+2] <= 'Z' && !strings.HasSuffix(s[:i+1], "e.g.") {
			return s[:i+1]
		}
	}
	return s
}

func quoteJoin(items []string, sep string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, sep)
}

func article(t string) string {
	switch t {
	case "integer", "object", "array":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// closest returns the allowed key nearest to key (edit distance at most 2, or one a prefix of
// the other), or "".
func closest(key string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		dist := words.EditDistance(strings.ToLower(key), a)
		if strings.HasPrefix(a, strings.ToLower(key)) || strings.HasPrefix(strings.ToLower(key), a) {
			dist = min(dist, 1)
		}
		if dist < bestD {
			best, bestD = a, dist
		}
	}
	return best
}
