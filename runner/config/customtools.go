package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// customToolDefaults fills what a custom tool leaves out: database "default", mode "read".
func customToolDefaults(list []tools.CustomTool) []tools.CustomTool {
	out := slices.Clone(list)
	for i := range out {
		out[i].Database = cmp.Or(out[i].Database, "default")
		out[i].Mode = cmp.Or(out[i].Mode, "read")
	}
	return out
}

// customToolProblems checks what the schema cannot: unique names that are not a built-in tool's,
// a configured database that allows the tool's mode, parameter keys that fit the parameter's
// type, and defaults and enums a call could pass. The statements themselves are checked against
// their databases when the registry is built (tools.Options.CustomTools).
func (c *Config) customToolProblems() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	builtin := schemas.ToolNames()
	reserved := tools.CustomReservedArgs()
	seen := map[string]int{}
	for i, t := range c.CustomTools {
		at := fmt.Sprintf("custom_tools[%d]", i)
		if slices.Contains(builtin, t.Name) {
			add("%s.name: %q is a built-in tool; choose another name, e.g. %q", at, t.Name, t.Name+"_custom")
		} else if j, dup := seen[t.Name]; dup {
			add("%s.name: %q is also the name of custom_tools[%d]; tool names must be unique", at, t.Name, j)
		} else {
			seen[t.Name] = i
		}
		if db, ok := c.Databases[t.Database]; !ok {
			add("%s.database: %q is not configured (configured: %s); name one of them", at, t.Database, strings.Join(slices.Sorted(maps.Keys(c.Databases)), ", "))
		} else if t.Mode == "write" && db.Policy.ReadOnly {
			add("%s.mode: a write tool on database %q, whose policy is read_only, could never run; set mode to \"read\" or lift read_only", at, t.Database)
		}
		if t.Mode == "write" && strings.TrimSpace(t.OrderBy) != "" {
			add("%s.order_by: pages the rows of a read tool; remove it from this write tool", at)
		}
		names := map[string]int{}
		for j, p := range t.Parameters {
			pat := fmt.Sprintf("%s.parameters[%d]", at, j)
			if slices.Contains(reserved, p.Name) {
				add("%s.name: %q is an argument pgtools adds to every custom tool (%s); rename the parameter", pat, p.Name, strings.Join(reserved, ", "))
			} else if k, dup := names[p.Name]; dup {
				add("%s.name: %q is also parameters[%d]; parameter names must be unique", pat, p.Name, k)
			} else {
				names[p.Name] = j
			}
			problems = append(problems, paramProblems(pat, p)...)
		}
	}
	return problems
}

// paramProblems checks one parameter's keys against its type, and its default and enum values
// against the schema a call's argument must meet.
func paramProblems(at string, p tools.CustomParam) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	numeric := p.Type == "integer" || p.Type == "number"
	if p.Items != "" && p.Type != "array" {
		add("%s.items: only an array parameter has items; remove items or set type to \"array\"", at)
	}
	if !numeric && (p.Minimum != nil || p.Maximum != nil) {
		add("%s: minimum and maximum bound an integer or number parameter, not %s; remove them or change type", at, article(p.Type))
	}
	if p.MaxLength > 0 && p.Type != "string" {
		add("%s.maxLength: bounds a string parameter, not %s; remove it or change type", at, article(p.Type))
	}
	if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
		add("%s: minimum %v is above maximum %v; swap them", at, *p.Minimum, *p.Maximum)
	}
	if p.Required && p.Default != nil {
		add("%s.default: a required parameter never uses its default; remove default or set required to false", at)
	}
	if len(problems) > 0 {
		return problems // the schema below would repeat them
	}
	if p.Default != nil {
		bare := p
		bare.Default = nil
		if msg := valueProblem(bare, p.Default); msg != "" {
			add("%s.default: %s does not fit the parameter: %s", at, display(p.Default), msg)
		}
	}
	bare := p
	bare.Default, bare.Enum = nil, nil
	for k, v := range p.Enum {
		if msg := valueProblem(bare, v); msg != "" {
			add("%s.enum[%d]: %s does not fit the parameter: %s", at, k, display(v), msg)
		}
	}
	return problems
}

// valueProblem validates v against the JSON Schema a call's argument for p must meet (the one
// CustomTool.Schema serves) and returns what is wrong, or "".
func valueProblem(p tools.CustomParam, v any) string {
	var doc map[string]any
	if err := json.Unmarshal(tools.CustomTool{Parameters: []tools.CustomParam{p}}.Schema(), &doc); err != nil {
		return err.Error()
	}
	props, _ := doc["properties"].(map[string]any)
	raw, _ := json.Marshal(props[p.Name])
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err.Error()
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://param.json", sdoc); err != nil {
		return err.Error()
	}
	sch, err := c.Compile("mem://param.json")
	if err != nil {
		return err.Error()
	}
	verr := sch.Validate(v)
	if verr == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return verr.Error()
	}
	pr := message.NewPrinter(language.English)
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := e.ErrorKind.LocalizedString(pr)
			if len(e.InstanceLocation) > 0 {
				msg = "[" + strings.Join(e.InstanceLocation, "][") + "]: " + msg
			}
			leaves = append(leaves, msg)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}

// customToolJSON is a custom tool as check-config prints it: the config's keys with their
// defaults, and the JSON Schema of its arguments as every transport serves it.
type customToolJSON struct {
	tools.CustomTool
	InputSchema json.RawMessage `json:"input_schema"`
}

func effectiveCustomTools(list []tools.CustomTool) []customToolJSON {
	out := make([]customToolJSON, 0, len(list))
	for _, t := range list {
		out = append(out, customToolJSON{CustomTool: t, InputSchema: t.Schema()})
	}
	return out
}

// CustomToolsNote is check-config's line about the custom tools: how many, and that their
// statements are checked against their databases only when serve or mcp starts; "" for none.
func (c *Config) CustomToolsNote() string {
	list := c.CustomTools
	if len(list) == 0 {
		return ""
	}
	names := make([]string, len(list))
	for i, t := range list {
		names[i] = t.Name + " (" + t.Mode + ")"
	}
	return strconv.Itoa(len(list)) + " custom tool(s): " + strings.Join(names, ", ") +
		"; their statements are checked against their databases when pgtools serve or pgtools mcp starts, which check-config does not connect to"
}
