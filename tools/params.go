package tools

import (
	"fmt"
	"strings"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// paramList normalises the params argument: a JSON array, or a string holding a JSON array
// (n8n's $fromAI sends json parameters as strings). It refuses more values than one statement
// can bind, and, in the string form, values with a NUL character (Registry.Call checks the
// array form with the other arguments).
func paramList(v any) ([]any, *Error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return p, checkParamCount(len(p), "params")
	case string:
		if strings.TrimSpace(p) == "" {
			return nil, nil
		}
		var out []any
		if err := wire.Unmarshal([]byte(p), &out); err != nil {
			return nil, errorf(ErrInvalidArguments, `Pass params as a JSON array, e.g. [42, "shipped"]; element 1 binds to $1.`,
				"Invalid arguments: params is a string but not a JSON array")
		}
		if e := checkParamCount(len(out), "params"); e != nil {
			return nil, e
		}
		if e := nulError(out, "params"); e != nil {
			return nil, e
		}
		return out, nil
	}
	return nil, errorf(ErrInvalidArguments, `Pass params as a JSON array, e.g. [42, "shipped"].`, "Invalid arguments: params must be an array")
}

// checkParamCount refuses n bound values when they exceed what the protocol carries in one
// statement (maxBindParams): pgx would fail before sending, with an error that reads like a
// broken connection. what names the values for the message, e.g. "params".
func checkParamCount(n int, what string) *Error {
	if n <= maxBindParams {
		return nil
	}
	return errorf(ErrInvalidArguments,
		fmt.Sprintf("Bind a list as one array value instead, e.g. where id = ANY($1) with params [[1, 2, 3]], or split the work into calls of at most %d values.", maxBindParams),
		"Invalid arguments: %s has %d values, more than the %d parameters PostgreSQL accepts in one statement", what, n, maxBindParams)
}

// maxBindParams is the protocol's limit on parameters in one statement.
const maxBindParams = 65535
