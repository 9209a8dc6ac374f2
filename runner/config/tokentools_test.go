package config

import (
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/tools"
)

// TestTokenToolProblems checks that check-config refuses an allow-list naming no tool, and accepts
// built-in and operator-defined names.
func TestTokenToolProblems(t *testing.T) {
	t.Parallel()
	toks := []auth.Token{
		{Name: "ok", Tools: []string{"select_query", "top_customers"}},
		{Name: "typo", Tools: []string{"select_querry"}, Origin: "config file tokens[1]"},
	}
	got := tokenToolProblems(toks, []tools.CustomTool{{Name: "top_customers"}})
	if len(got) != 1 || !strings.Contains(got[0], `token "typo" (config file tokens[1]): tools names "select_querry", which is no tool`) ||
		!strings.Contains(got[0], "top_customers") {
		t.Fatalf("problems: %q", got)
	}
}
