// Package data ships the built-in evaluation and calibration texts and
// image sets (data/README.md says where they come from and under which
// license), so a recipe's `builtin:eval`, `builtin:calibration`,
// `builtin:digits-test`, `builtin:digits-calibration` (labelled) and
// `builtin:skimage-photos`, `builtin:skimage-photos-calibration`
// (unlabelled: every label -1) work offline and give the same tokens and
// images on every machine; `builtin:tokenizer-corpus` is the text the
// behavioural contract tokenizes; `builtin:chat-prompts` (a JSON file) is
// the chat prompts the decode checks generate from.
package data

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed *.txt *.npz *.json
var texts embed.FS

// Names lists the built-in data sets.
func Names() []string {
	ents, _ := texts.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())))
	}
	sort.Strings(out)
	return out
}

// fileOf is the embedded file of a built-in data set: a text (.txt), an
// image set (.npz) or prompts (.json).
func fileOf(name string) (string, error) {
	for _, ext := range []string{".txt", ".npz", ".json"} {
		if _, err := fs.Stat(texts, name+ext); err == nil {
			return name + ext, nil
		}
	}
	return "", fmt.Errorf("no built-in data set %q: built-in data sets are %s", name, strings.Join(Names(), ", "))
}

// Bytes returns a built-in data set's bytes.
func Bytes(name string) ([]byte, error) {
	f, err := fileOf(name)
	if err != nil {
		return nil, err
	}
	return texts.ReadFile(f)
}

// Materialize writes a built-in text into dir under a name that includes
// its digest (tools read files, not embedded bytes) and returns the path.
// An existing file with that name already holds exactly these bytes.
func Materialize(name, dir string) (string, error) {
	b, err := Bytes(name)
	if err != nil {
		return "", err
	}
	f, _ := fileOf(name)
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8])+filepath.Ext(f))
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
