// Package jsonfile is the one encoding of the JSON files edgepipe writes
// for people and other tools to read: manifests, lock files, provenance.
package jsonfile

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v with a two-space indent, no HTML escaping (argv, notes
// and "->" stay readable) and one trailing newline. Map keys come out
// sorted, so the same value always gives the same bytes.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
