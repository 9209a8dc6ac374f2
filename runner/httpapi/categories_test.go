package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestStatusForEveryCategory walks every error category: each has the HTTP status docs/design.md §4
// gives it (pinned here, so a change is a decision), and one without an entry is 500.
func TestStatusForEveryCategory(t *testing.T) {
	t.Parallel()
	want := map[tools.ErrorType]int{
		tools.ErrInvalidArguments: 400, tools.ErrSyntax: 400, tools.ErrInvalidTable: 400, tools.ErrInvalidColumn: 400,
		tools.ErrWriteIntentRequired: 400, tools.ErrConfirmationRequired: 400,
		tools.ErrPermissionDenied: 403, tools.ErrNotAllowed: 403, tools.ErrReadOnlyViolation: 403, tools.ErrApprovalRequired: 403,
		tools.ErrUnknownTool: 404, tools.ErrSessionNotFound: 404, tools.ErrSessionExpired: 404,
		tools.ErrConstraint: 409, tools.ErrTooManyRows: 409, tools.ErrApprovalMismatch: 409, tools.ErrTooExpensive: 422,
		tools.ErrRateLimited: 429, tools.ErrSessionLimitReached: 429,
		tools.ErrConnection: 503, tools.ErrAuthentication: 503, tools.ErrTimeout: 504,
		tools.ErrCommitOutcomeUnknown: 500, tools.ErrInternal: 500,
	}
	all := tools.AllErrorTypes()
	if len(all) != len(want) {
		t.Errorf("%d categories, %d pinned here", len(all), len(want))
	}
	for _, et := range all {
		w, ok := want[et]
		if !ok {
			t.Errorf("%s: no status pinned here", et)
		}
		if got := httpx.StatusFor(et); got != w {
			t.Errorf("httpx.StatusFor(%s) = %d, want %d", et, got, w)
		}
	}
	if got := httpx.StatusFor("made_up_category"); got != http.StatusInternalServerError {
		t.Errorf("StatusFor of an unknown category = %d, want 500", got)
	}
}

// madeUpCategory fails every call with a category that has no entry in the table.
type madeUpCategory struct{ *tools.Registry }

func (madeUpCategory) Call(context.Context, tools.Principal, string, []byte) (tools.Result, tools.Outcome, *tools.Error) {
	return nil, tools.Outcome{}, &tools.Error{Type: "made_up_category", Message: "m", Suggestion: "s"}
}

// TestUnknownCategoryIsAnInternalError: a call failing with a category the table lacks is
// answered 500 and logged at error level as a category without metadata, not passed silently.
func TestUnknownCategoryIsAnInternalError(t *testing.T) {
	t.Parallel()
	reg, err := tools.NewRegistry(t.Context(), tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &pgtest.SyncBuffer{}
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.New(logs), Caller: madeUpCategory{reg}}))
	t.Cleanup(srv.Close)
	status, _, _ := apitest.Call(t, http.MethodPost, srv.URL+"/v1/tools/select_query", "", `{"table":"t"}`)
	if status != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", status)
	}
	lines := runnertest.JSONLines(t, logs, "level", "error")
	if len(lines) != 1 || lines[0]["error_type"] != "made_up_category" || !strings.Contains(lines[0]["message"].(string), "without status") {
		t.Errorf("error lines %v, want one naming the category", lines)
	}
}

// TestDocsListEveryCategory walks every error category: the error tables users read (docs/tools.md
// and docs/troubleshooting.md) each have a row for it, with its HTTP status, so a new category
// cannot ship undocumented.
func TestDocsListEveryCategory(t *testing.T) {
	t.Parallel()
	for _, page := range []string{"tools.md", "troubleshooting.md"} {
		raw, err := os.ReadFile("../../docs/" + page)
		if err != nil {
			t.Fatal(err)
		}
		rows := map[tools.ErrorType]string{}
		for _, line := range strings.Split(string(raw), "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
				continue
			}
			for _, name := range strings.Split(cells[1], "/") {
				rows[tools.ErrorType(strings.Trim(strings.TrimSpace(name), "`"))] = strings.TrimSpace(cells[2])
			}
		}
		for _, et := range tools.AllErrorTypes() {
			status, ok := rows[et]
			if !ok {
				t.Errorf("docs/%s: no row for errorType %s", page, et)
				continue
			}
			if want := strconv.Itoa(httpx.StatusFor(et)); !strings.Contains(status, want) {
				t.Errorf("docs/%s: %s is documented as HTTP %q, answered %s", page, et, status, want)
			}
		}
	}
}
