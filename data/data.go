// Package data ships the built-in evaluation and calibration texts
// (data/README.md says where they come from and under which license), so a
// recipe's `builtin:eval` and `builtin:calibration` work offline and give
// the same tokens on every machine.
package data

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed *.txt
var texts embed.FS

// Names lists the built-in texts.
func Names() []string {
	ents, _ := texts.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".txt"))
	}
	sort.Strings(out)
	return out
}

// Bytes returns a built-in text.
func Bytes(name string) ([]byte, error) {
	b, err := texts.ReadFile(name + ".txt")
	if err != nil {
		return nil, fmt.Errorf("no built-in text %q: built-in texts are %s", name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Materialize writes a built-in text into dir under a name that includes
// its digest (tools read files, not embedded bytes) and returns the path.
// An existing file with that name already holds exactly these bytes.
func Materialize(name, dir string) (string, error) {
	b, err := Bytes(name)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8])+".txt")
	if st, err := os.Stat(path); err == nil && st.Size() == int64(len(b)) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}
