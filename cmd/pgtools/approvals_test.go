package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestCheckConfigApprovals: check-config prints nothing new for a configuration with approval
// rules and an approver (the effective config shows the approvals defaults), notes a database
// whose rules no token may approve, and refuses a rule on a tool that does not write, naming its
// path.
func TestCheckConfigApprovals(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, tokens, rules string) (int, string, string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "pgtools.json")
		doc := `{"tokens": [` + tokens + `], "databases": {"default": {"url": "postgres://app@db.internal/app", "policy": {"require_approval": ` + rules + `}}}}`
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"check-config", "--config", f}, &out, &errOut, envOf(nil))
		return code, out.String(), errOut.String()
	}
	const agent = `{"name": "agent", "token": "agent-token-0123456789", "scopes": ["read", "write"]}`
	const boss = `{"name": "boss", "token": "boss-token-0123456789ab", "scopes": ["approve"]}`
	code, out, errOut := check(t, agent+", "+boss, `[{"when": "rows_over", "rows": 100}]`)
	if code != 0 || strings.Contains(errOut, "note:") || !strings.Contains(out, `"ttl_seconds": 900`) || !strings.Contains(out, `"max_pending": 20`) {
		t.Fatalf("rules with an approver: exit %d\n%s\n%s", code, errOut, out)
	}
	code, _, errOut = check(t, agent, `[{"when": "ddl"}]`)
	if code != 0 || !strings.Contains(errOut, "note: require_approval rules apply on databases default, but no token with the approve scope") {
		t.Fatalf("rules without an approver: exit %d\n%s", code, errOut)
	}
	code, _, errOut = check(t, agent+", "+boss, `[{"when": "tool", "tool": "select_query"}]`)
	if code != 1 || !strings.Contains(errOut, `databases.default.policy.require_approval[0]: tool "select_query" is no tool that writes`) {
		t.Fatalf("a rule on a read tool: exit %d\n%s", code, errOut)
	}
}

// TestMCPStdioWarnsOfApprovalRules: pgtools mcp serves no approvals API, so it says at start that
// calls approval rules match can never be approved there.
func TestMCPStdioWarnsOfApprovalRules(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	f := filepath.Join(t.TempDir(), "pgtools.json")
	doc := `{"databases": {"default": {"url": "` + db.RoleDSN(t, "aprmcp") + `", "policy": {"require_approval": [{"when": "ddl"}]}}}}`
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"mcp", "--config", f}, &stdout, &stderr, envOf(nil)) }()
	waitFor(t, &stderr, regexp.MustCompile(`(require_approval rules apply, but pgtools mcp serves no approvals API)`))
	stopRun(t, cancel, done, "mcp", &stderr, 15*time.Second)
}
