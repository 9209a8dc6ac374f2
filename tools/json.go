package tools

import "github.com/pgtools/pgtools/tools/internal/wire"

// decodeJSON decodes with UseNumber so every number keeps its exact text and is bound as written
// (wire.Unmarshal).
func decodeJSON(data []byte, v any) error { return wire.Unmarshal(data, v) }
