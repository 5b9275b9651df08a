package gguf

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A split GGUF is one model in several files, as llama.cpp's
// llama-gguf-split writes it: PREFIX-00001-of-00003.gguf and so on, each
// part's metadata saying which it is (split.no, from 0) and how many there
// are (split.count). No part is the model, and the converters here read
// one file, so a split GGUF given as a model source is always refused:
// with the parts that are missing, or with the command that merges them.

// maxSplitParts bounds the parts a name or header may claim before any is
// looked for.
const maxSplitParts = 4096

var splitName = regexp.MustCompile(`^(.+)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// SplitName parses llama.cpp's name of a split part: the prefix, the part
// (from 1) and the count. ok is false for any other name, and for a
// "part 1 of 1", which is a whole model.
func SplitName(name string) (prefix string, no, count int, ok bool) {
	m := splitName.FindStringSubmatch(name)
	if m == nil {
		return "", 0, 0, false
	}
	no, _ = strconv.Atoi(m[2])
	count, _ = strconv.Atoi(m[3])
	return m[1], no, count, count > 1
}

// SplitPartName is llama.cpp's name of part no (from 1) of count.
func SplitPartName(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no, count)
}

// Split is the header's split.no (from 0) and split.count; ok is false
// for a file that is not a part (no split.count, or one of 1).
func (h *Header) Split() (no, count int, ok bool) {
	c, okCount := h.Uint("split.count")
	n, _ := h.Uint("split.no")
	if !okCount || c < 2 || c > math.MaxInt32 || n > math.MaxInt32 {
		return 0, 0, false
	}
	return int(n), int(c), true
}

// SplitError is a split GGUF where one model file was expected: the set's
// folder, prefix and part count, and which parts are missing or do not
// belong to the set.
type SplitError struct {
	Dir, Prefix  string
	Count        int
	Missing      []string
	Inconsistent []string
}

func (e *SplitError) first() string { return SplitPartName(e.Prefix, 1, e.Count) }

func (e *SplitError) merge() string {
	return fmt.Sprintf("`llama-gguf-split --merge %s %s.gguf`, and point model.source at %s.gguf",
		e.first(), e.Prefix, e.Prefix)
}

func (e *SplitError) Error() string {
	switch {
	case e.Count > maxSplitParts:
		return fmt.Sprintf("%s claims to be one of %d parts, more than a split GGUF has: check the file names", e.first(), e.Count)
	case len(e.Missing) > 0:
		return fmt.Sprintf("it is a split GGUF of %d parts, and %s not here (%s): a part is not the model. Get every part into %s, then merge them into one file with %s",
			e.Count, countParts(len(e.Missing)), clipList(e.Missing), e.Dir, e.merge())
	case len(e.Inconsistent) > 0:
		return fmt.Sprintf("it is a split GGUF of %d parts that are not one set (%s): download the parts again, from one release", e.Count, clipList(e.Inconsistent))
	}
	return fmt.Sprintf("it is a split GGUF of %d parts (all here), and the converter reads one file: merge them first with %s", e.Count, e.merge())
}

func countParts(n int) string {
	if n == 1 {
		return "1 of them is"
	}
	return fmt.Sprintf("%d of them are", n)
}

func clipList(l []string) string {
	if len(l) > 4 {
		return strings.Join(l[:4], ", ") + fmt.Sprintf(" and %d more", len(l)-4)
	}
	return strings.Join(l, ", ")
}

// CheckSplit looks at every part of the split set PREFIX-*-of-COUNT.gguf in
// dir: which are missing, and which do not say (split.no, split.count)
// that they are that part of that set. It always returns an error: a split
// GGUF is not one model file.
func CheckSplit(dir, prefix string, count int) *SplitError {
	e := &SplitError{Dir: dir, Prefix: prefix, Count: count}
	if count > maxSplitParts {
		return e
	}
	for i := 1; i <= count; i++ {
		name := SplitPartName(prefix, i, count)
		h, err := ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			e.Missing = append(e.Missing, name)
			continue
		case err != nil:
			e.Inconsistent = append(e.Inconsistent, err.Error())
			continue
		}
		no, n, ok := h.Split()
		switch {
		case !ok:
			e.Inconsistent = append(e.Inconsistent, name+" has no split.count in its metadata")
		case n != count || no != i-1:
			e.Inconsistent = append(e.Inconsistent, fmt.Sprintf("%s says it is part %d of %d", name, no+1, n))
		}
	}
	return e
}
