package runner

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/config"
)

var updateReloadDoc = flag.Bool("update", false, "rewrite the generated reload table of docs/configuration.md from reloadTable")

// The reload table of docs/configuration.md sits between these markers.
const (
	reloadDocPage  = "../docs/configuration.md"
	reloadDocBegin = "<!-- generated from runner/reloadtable.go: go test ./runner -run TestReloadDocMatchesTable -update; do not edit by hand -->"
	reloadDocEnd   = "<!-- end of the generated reload table -->"
)

// reloadDoc renders reloadTable over the schema's keys as a table with a row per top-level key:
// "all" in the column of its decision when every key in it shares it, else the keys in it by
// decision, a subtree that shares one named once ("require_approval…").
func reloadDoc(t testing.TB) string {
	t.Helper()
	keys, err := config.SchemaKeys()
	if err != nil {
		t.Fatal(err)
	}
	under := func(k, parent string) bool { return strings.HasPrefix(k, parent+".") }
	uniform := func(k string) bool {
		for _, other := range keys {
			if under(other, k) && reloadTable[other] != reloadTable[k] {
				return false
			}
		}
		return true
	}
	parent := func(k string) string {
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			return k[:i]
		}
		return ""
	}
	var b strings.Builder
	b.WriteString("| key | a reload applies it to the calls and n8n tasks after it | needs a restart: the running value stays, the reload logs it |\n|---|---|---|\n")
	for _, top := range keys {
		if strings.Contains(top, ".") || top == "$schema" {
			continue
		}
		cols := map[onReload][]string{}
		if uniform(top) {
			cols[reloadTable[top]] = []string{"all"}
		} else {
			for _, k := range keys {
				if !under(k, top) || !uniform(k) || (parent(k) != top && uniform(parent(k))) {
					continue
				}
				item := "`" + strings.TrimPrefix(k, top+".") + "`"
				if slices.ContainsFunc(keys, func(other string) bool { return under(other, k) }) {
					item = "`" + strings.TrimPrefix(k, top+".") + "…`"
				}
				cols[reloadTable[k]] = append(cols[reloadTable[k]], item)
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", top, strings.Join(cols[appliesLive], ", "), strings.Join(cols[needsRestart], ", "))
	}
	return b.String()
}

// TestReloadDocMatchesTable keeps the reload table of docs/configuration.md equal to
// reloadTable; -update rewrites it.
func TestReloadDocMatchesTable(t *testing.T) {
	raw, err := os.ReadFile(reloadDocPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	i, j := strings.Index(page, reloadDocBegin), strings.Index(page, reloadDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers of its reload table:\n%s\n%s", reloadDocPage, reloadDocBegin, reloadDocEnd)
	}
	want := reloadDoc(t)
	got := page[i+len(reloadDocBegin)+1 : j]
	if got == want {
		return
	}
	if *updateReloadDoc {
		if err := os.WriteFile(reloadDocPage, []byte(page[:i+len(reloadDocBegin)+1]+want+page[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's reload table differs from reloadTable (go test ./runner -run TestReloadDocMatchesTable -update rewrites it):\n%s", reloadDocPage, want)
}
