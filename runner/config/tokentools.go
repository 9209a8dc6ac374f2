package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// tokenToolProblems checks every token's tools allow-list (tokens[].tools) against the tools the
// runner will serve: the built-in ones and the operator-defined ones in custom. A name that is
// no tool would hide every tool it was meant to allow, so it is a configuration error, not a
// silent empty list.
func tokenToolProblems(tokens []auth.Token, custom []tools.CustomTool) []string {
	known := schemas.ToolNames()
	for _, t := range custom {
		known = append(known, t.Name)
	}
	var problems []string
	for _, t := range tokens {
		for _, name := range t.Tools {
			if !slices.Contains(known, name) {
				problems = append(problems, fmt.Sprintf("%s: tools names %q, which is no tool (tools: %s)", tokenWhere(t), name, strings.Join(known, ", ")))
			}
		}
	}
	return problems
}
