package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Canonical encodes v as JSON that depends only on its value: object keys
// sorted (struct fields too), no HTML escaping, no trailing newline, and
// numbers exactly as encoding/json prints them.
func Canonical(v any) ([]byte, error) {
	first, err := encodeNoEscape(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	// A round trip through generic values turns structs into maps, which
	// the encoder writes with sorted keys; json.Number keeps each number's
	// text as first printed.
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	out, err := encodeNoEscape(generic)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return out, nil
}

func encodeNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Key is the sha256 (hex) of the canonical JSON array of parts: the cache
// key of whatever the parts describe.
func Key(parts ...any) (string, error) {
	if parts == nil {
		parts = []any{}
	}
	data, err := Canonical(parts)
	if err != nil {
		return "", fmt.Errorf("cache key: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
