package tools

import (
	"bytes"
	"encoding/json"
	"slices"
)

// ToolsFor lists the tools p can use, in the order of Tools (docs/design.md §12): a caller is shown only
// what it may call, so its model spends no tokens on tools that would answer not_allowed. A tool
// is listed when p holds its scope, p's allow-list (Principal.Tools) names it or is empty, and
// at least one database p may use runs it: the tool's own database for an operator-defined tool,
// else any configured one, where the operator has not disabled it and, for a tool whose every
// call writes, which is not read-only. Calls are still checked one by one (Call): the list only
// hides what would be refused.
func (r *Registry) ToolsFor(p Principal) []ToolInfo {
	out := make([]ToolInfo, 0, len(r.order))
	approvals := r.approvalsApply(p)
	for _, name := range r.order {
		if t := r.tools[name]; r.visible(p, t) {
			info := t.info
			if !approvals && t.plain != nil {
				info.InputSchema = t.plain
			}
			out = append(out, info)
		}
	}
	return out
}

// approvalsApply reports whether approval rules apply to p's calls on a database it may use:
// only then do the write tools it lists show approval_id, which costs every other caller's
// catalog tokens for nothing.
func (r *Registry) approvalsApply(p Principal) bool {
	for name, db := range r.dbs {
		if p.mayUse(name) && len(approvalRules(p, db)) > 0 {
			return true
		}
	}
	return false
}

// withoutApprovalID is schema without its approval_id property, or nil when it has none. The
// rest of the text is kept as it is, so both forms cost the same tokens but for the property.
func withoutApprovalID(schema json.RawMessage) json.RawMessage {
	key := []byte(`"approval_id":`)
	i := bytes.Index(schema, key)
	if i < 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(schema[i+len(key):]))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return nil
	}
	start, end := i, i+len(key)+int(dec.InputOffset())
	if j := bytes.LastIndexByte(schema[:i], ','); j >= 0 && len(bytes.TrimSpace(schema[j+1:i])) == 0 {
		start = j // the member before it keeps no comma
	} else if k := bytes.IndexByte(schema[end:], ','); k >= 0 && len(bytes.TrimSpace(schema[end:end+k])) == 0 {
		end += k + 1 // it was the first member
	}
	out := append(append([]byte{}, schema[:start]...), schema[end:]...)
	if !json.Valid(out) {
		return nil
	}
	return out
}
func (r *Registry) visible(p Principal, t *toolEntry) bool {
	if !p.Can(t.scope) || !p.allows(t.info.Name) {
		return false
	}
	// insert_data, update_data, delete_data, pg_transaction and operator-defined write tools
	// write on every call; execute_sql and pg_tx also read.
	alwaysWrites := t.access == writesAlways
	for name, db := range r.dbs {
		if t.database != "" && name != t.database {
			continue
		}
		if p.mayUse(name) && !slices.Contains(db.Policy.DisabledTools, t.info.Name) && !(alwaysWrites && db.Policy.ReadOnly) {
			return true
		}
	}
	return false
}
