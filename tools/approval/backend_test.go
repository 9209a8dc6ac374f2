package approval_test

import (
	"testing"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/approval/approvaltest"
)

// TestMemoryBackend runs the behaviour every backend shares over the memory backend.
func TestMemoryBackend(t *testing.T) {
	t.Parallel()
	approvaltest.Run(t, func(t *testing.T, o approval.Options) *approval.Store { return approval.NewStore(o) })
}
