package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

// Defaults of Approvals.
const (
	// DefaultApprovalTTL is Approvals.TTLSeconds when unset: 15 minutes.
	DefaultApprovalTTL = 15 * time.Minute
	// DefaultApprovalMaxPending is Approvals.MaxPending when unset.
	DefaultApprovalMaxPending = 20
)

// Approvals is the config file's "approvals": the store that holds the approval requests of
// require_approval rules (approval.NewStore), one per runner process, in its memory.
type Approvals struct {
	// TTLSeconds is how long a request waits for a decision, and how long an approval may then
	// be used, in seconds (default 900).
	TTLSeconds float64 `json:"ttl_seconds"`
	// MaxPending bounds the requests of one credential waiting for a decision (default 20).
	MaxPending int `json:"max_pending"`
}

// TTL is TTLSeconds as a duration.
func (a Approvals) TTL() time.Duration { return seconds(a.TTLSeconds) }

// withDefaults fills the unset fields of a.
func (a Approvals) withDefaults() Approvals {
	if a.TTLSeconds <= 0 {
		a.TTLSeconds = DefaultApprovalTTL.Seconds()
	}
	if a.MaxPending <= 0 {
		a.MaxPending = DefaultApprovalMaxPending
	}
	return a
}

// approvalProblems checks every approval rule, the databases' and the tokens': each must be a
// valid rule (approval.Rule.Validate), and a tool rule must name a tool whose calls approval
// rules judge (tools.ApprovableTools: the tools package decides which tools write), since a rule
// on a tool that never writes, or on no tool at all, would never ask for approval and read as
// protection that is not there.
func (c *Config) approvalProblems() []string {
	writers := tools.ApprovableTools(c.CustomTools)
	var problems []string
	check := func(where string, rules []approval.Rule) {
		for i, r := range rules {
			at := fmt.Sprintf("%s[%d]", where, i)
			if err := r.Validate(); err != nil {
				problems = append(problems, at+": "+strings.TrimPrefix(err.Error(), "require_approval: "))
				continue
			}
			if r.When == approval.WhenTool && !slices.Contains(writers, r.Tool) {
				problems = append(problems, fmt.Sprintf("%s: tool %q is no tool that writes, so the rule would never ask for approval; name one of %s", at, r.Tool, strings.Join(writers, ", ")))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Databases)) {
		check("databases."+name+".policy.require_approval", c.Databases[name].Policy.RequireApproval)
	}
	for _, t := range c.Tokens {
		check(tokenWhere(t)+": require_approval", t.RequireApproval)
	}
	return problems
}

// ApprovalsNote warns when approval rules apply to a database that no configured token may
// approve on: its requests could only expire. With a JWT issuer the approve scope may come in a
// token's claims, so nothing is said. serve logs the note as a warning, check-config prints it;
// "" when there is nothing to say.
func (c *Config) ApprovalsNote() string {
	if c.JWT != nil {
		return ""
	}
	var orphan []string
	for _, name := range slices.Sorted(maps.Keys(c.Databases)) {
		ruled := len(c.Databases[name].Policy.RequireApproval) > 0
		for _, t := range c.Tokens {
			ruled = ruled || len(t.RequireApproval) > 0 && (len(t.Databases) == 0 || slices.Contains(t.Databases, name))
		}
		if !ruled {
			continue
		}
		approvable := slices.ContainsFunc(c.Tokens, func(t auth.Token) bool {
			return slices.Contains(t.Scopes, "approve") && (len(t.Databases) == 0 || slices.Contains(t.Databases, name))
		})
		if !approvable {
			orphan = append(orphan, name)
		}
	}
	if len(orphan) == 0 {
		return ""
	}
	return fmt.Sprintf("require_approval rules apply on databases %s, but no token with the approve scope may use them: their approval requests can only expire. "+
		"Give an approver a token of their own with scopes [\"approve\"] (docs/approvals.md)", strings.Join(orphan, ", "))
}

// HasApprovalRules reports whether any database or token has approval rules.
func (c *Config) HasApprovalRules() bool {
	for _, d := range c.Databases {
		if len(d.Policy.RequireApproval) > 0 {
			return true
		}
	}
	return slices.ContainsFunc(c.Tokens, func(t auth.Token) bool { return len(t.RequireApproval) > 0 })
}

// UnapprovableOnStdio names the databases whose approval rules no one can satisfy under pgtools
// mcp (stdio serves no approvals API): those with rules and without policy.approval_by_client,
// which lets the client's user decide. Sorted.
func (c *Config) UnapprovableOnStdio() []string {
	var out []string
	for name, d := range c.Databases {
		if len(d.Policy.RequireApproval) > 0 && !d.Policy.ApprovalByClient {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
