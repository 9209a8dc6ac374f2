package tools

import (
	"encoding/json"
	"strings"

	"github.com/pgtools/pgtools/tools/discovery"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
)

// select_query and operator-defined read tools with order_by hand a truncated answer's next_page
// out as a page token (tools/page): this file says which of their arguments a token fixes and
// carries, and whom it is bound to.

// pageWho names the caller a page token is bound to: the same name, role and claims give the
// same token owner, and claims matter because row-level security reads them.
func pageWho(p Principal) string {
	return p.Name + "\x00" + p.Role + "\x00" + string(p.Claims)
}

// selectPages is select_query's.
var selectPages = &page.Spec{Bound: pageBound, Carried: pageCarried, Short: pageArgKeys, Norm: normalizedArg}

// customPages is an operator-defined read tool's: its parameters fix the rows, as given.
func customPages(t CustomTool) *page.Spec {
	names := make([]string, len(t.Parameters))
	for i, p := range t.Parameters {
		names[i] = p.Name
	}
	return &page.Spec{Bound: names, Carried: []string{"format"}}
}

// describePages is describe_schema's: which tables, or which of a table's columns, match is
// fixed; how many a page holds and in what detail may change. A token continues after the key
// of the last table sent (rank, schema, name) or the attnum of the last column.
var describePages = &page.Spec{Bound: []string{"database", "table", "schema", "search", "kind"}, Carried: []string{"limit", "detail"},
	Short: map[string]string{"database": "d", "table": "t", "schema": "s", "search": "q", "kind": "k", "limit": "l", "detail": "v"},
	Norm: func(k string, v any) (any, bool) {
		switch k {
		case "database", "limit", "table":
			return normalizedArg(k, v)
		}
		s, ok := v.(string)
		if k == "search" && ok { // the words are what a search means
			s = strings.Join(discovery.Words(s), " ")
		}
		if v == nil || (ok && s == "") {
			return nil, true
		}
		return s, ok
	}}

// pageBound lists the arguments a select_query token fixes, because they decide which rows match and in what
// order; a call with page_token may repeat them or leave them out, but not change them. limit
// and format only shape the page, so a call may change them; left out, they are the token's.
var pageBound = []string{"database", "table", "columns", "where", "params", "order_by"}

// pageCarried are the arguments a token also carries, so that page_token alone continues.
var pageCarried = []string{"limit", "format"}

// pageArgKeys are the short names a token gives the arguments it carries: every byte of a token
// is paid for twice, when the model reads it and when it writes it back.
var pageArgKeys = map[string]string{"database": "d", "table": "t", "columns": "c", "where": "w", "params": "p",
	"order_by": "o", "limit": "l", "format": "f"}

// normalizedArg is v as a token holds argument k: nil when it means the default, ok false when
// it has a type the schema will refuse anyway.
func normalizedArg(k string, v any) (any, bool) {
	switch k {
	case "database":
		s, ok := v.(string)
		if v == nil || (ok && (s == "" || s == "default")) {
			return nil, true // the default database, which a token need not name
		}
		return s, ok
	case "columns":
		switch v.(type) {
		case nil, string, []any:
		default:
			return nil, false
		}
		names := ident.List(v)
		if len(names) == 0 || (len(names) == 1 && names[0] == "*") {
			return nil, true
		}
		out := make([]any, len(names))
		for i, n := range names {
			out[i] = n
		}
		return out, true
	case "params":
		list, err := paramList(v)
		if err != nil {
			return nil, false
		}
		if len(list) == 0 {
			return nil, true
		}
		return list, true
	case "where", "order_by", "table", "format":
		if v == nil {
			return nil, true
		}
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		if k == "where" || k == "order_by" {
			s = ident.TrimSpace(s)
		}
		if s == "" {
			return nil, true
		}
		return s, true
	case "limit":
		if v == nil {
			return nil, true
		}
		n, ok := v.(json.Number)
		return n, ok
	}
	return nil, false
}

// nextPage is the token that continues a read of tool, whose arguments a token carries are args
// (pageArgs), after the last row of rs: by that row's order values when keyed, else by offset
// (the rows read before rs, and rs's). It is bound to the caller.
func (req *request) nextPage(tool string, args map[string]any, rs *wire.RowSet, keyed bool, offset int64) string {
	pg := req.pages
	st := &page.State{Tool: tool, Args: pg.spec.Args(args)}
	if keyed {
		st.After = make([]*string, len(rs.LastKey))
		for i, v := range rs.LastKey {
			if v != nil {
				s := string(v)
				st.After[i] = &s
			}
		}
	} else {
		st.Offset = offset + int64(rs.RowCount)
	}
	return pg.signer.Issue(pageWho(req.principal), st)
}

// nextAfter is the token that continues a call of tool, whose arguments a token carries are
// args, after the key after (describe_schema's). It is bound to the caller.
func (req *request) nextAfter(tool string, args map[string]any, after ...string) string {
	pg := req.pages
	st := &page.State{Tool: tool, Args: pg.spec.Args(args), After: make([]*string, len(after))}
	for i := range after {
		st.After[i] = &after[i]
	}
	return pg.signer.Issue(pageWho(req.principal), st)
}

// paged says whether the call's answer can carry next_page: its tool pages, and the registry
// signs tokens.
func (req *request) paged() bool { return req.pages != nil && req.pages.signer != nil }

// pageState is the page token the call continues, opened; nil for a first page.
func (req *request) pageState() *page.State {
	if req.pages == nil {
		return nil
	}
	return req.pages.state
}
