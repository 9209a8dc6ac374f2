package tools

import "slices"

// ToolsFor lists the tools p can use, in the order of Tools (docs/design.md §12): a caller is shown only
// what it may call, so its model spends no tokens on tools that would answer not_allowed. A tool
// is listed when p holds its scope, p's allow-list (Principal.Tools) names it or is empty, and
// at least one database p may use runs it: the tool's own database for an operator-defined tool,
// else any configured one, where the operator has not disabled it and, for a tool whose every
// call writes, which is not read-only. Calls are still checked one by one (Call): the list only
// hides what would be refused.
func (r *Registry) ToolsFor(p Principal) []ToolInfo {
	out := make([]ToolInfo, 0, len(r.order))
	for _, name := range r.order {
		if t := r.tools[name]; r.visible(p, t) {
			out = append(out, t.info)
		}
	}
	return out
}

func (r *Registry) visible(p Principal, t *toolEntry) bool {
	if !p.Can(t.scope) || !p.allows(t.info.Name) {
		return false
	}
	// insert_data, update_data, delete_data, pg_transaction and operator-defined write tools
	// write on every call; execute_sql and pg_tx also read.
	alwaysWrites := t.gate.access == writesAlways
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
