package config

import (
	"slices"
	"testing"
)

// TestSchemaKeysWalksDefsAndItems: the keys reach into $defs, map entries and list items.
func TestSchemaKeysWalksDefsAndItems(t *testing.T) {
	t.Parallel()
	keys, err := SchemaKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listen", "databases.*", "databases.*.policy.read_only", "tokens.*.require_approval.*.rows",
		"custom_tools.*.parameters.*.items.type", "n8n.task_timeout_ms", "n8n.token"} {
		if !slices.Contains(keys, want) {
			t.Errorf("SchemaKeys lacks %s", want)
		}
	}
}
