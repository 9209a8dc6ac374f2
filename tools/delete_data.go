package tools

import (
	"context"
)

// deleteData deletes the rows matching where.
func deleteData(ctx context.Context, req *request, a *changeArgs) (Result, *Error) {
	return changeRowsOn(ctx, req, "delete", a, req.session)
}
