package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// decodeJSON decodes with UseNumber so every number keeps its exact text and is bound as written.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}
