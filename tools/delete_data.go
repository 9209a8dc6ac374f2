package tools

import (
	"context"
)

// deleteData deletes the rows matching where.
func deleteData(ctx context.Context, req *request) (Result, *Error) {
	return changeRows(ctx, req, "delete")
}
