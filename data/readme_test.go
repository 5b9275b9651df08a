package data

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The README's facts about the shipped files are checked against the
// files, so a rebuilt or replaced file cannot leave the README behind.

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTextsMatchTheREADME(t *testing.T) {
	// | `eval.txt` | chapters | 120,862 | 25,468 |
	row := regexp.MustCompile("(?m)^\\| `(\\w+)\\.txt` \\| [^|]+ \\| ([0-9,]+) \\|")
	rows := row.FindAllStringSubmatch(readme(t), -1)
	if len(rows) != 2 {
		t.Fatalf("README: %d rows for the texts, want eval and calibration", len(rows))
	}
	paras := map[string]string{}
	for _, r := range rows {
		name := r[1]
		want, _ := strconv.Atoi(strings.ReplaceAll(r[2], ",", ""))
		b, err := Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != want {
			t.Errorf("%s.txt is %d bytes, the README says %d", name, len(b), want)
		}
		// make_text.py's layout: paragraphs of one line each, whitespace
		// collapsed, at least 8 words, a blank line between, one final
		// newline.
		s := string(b)
		if !strings.HasSuffix(s, "\n") || strings.HasSuffix(s, "\n\n") {
			t.Errorf("%s.txt does not end in exactly one newline", name)
		}
		for i, p := range strings.Split(strings.TrimSuffix(s, "\n"), "\n\n") {
			if strings.Join(strings.Fields(p), " ") != p || len(strings.Fields(p)) < 8 {
				t.Errorf("%s.txt paragraph %d is not one clean line of 8 or more words: %.60q", name, i+1, p)
			}
			if other, ok := paras[p]; ok {
				t.Errorf("%s.txt paragraph %d is also in %s.txt: %.60q", name, i+1, other, p)
			}
			paras[p] = name
		}
	}
}

// npy is one array of an image set: its dtype, shape and data.
type npy struct {
	descr string
	shape []int
	data  []byte
}

var (
	npyDescr = regexp.MustCompile(`'descr': '([^']+)'`)
	npyShape = regexp.MustCompile(`'shape': \(([0-9, ]*)\)`)
)

func readNpy(b []byte) (npy, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" || b[6] != 1 {
		return npy{}, fmt.Errorf("not a version 1 .npy")
	}
	n := int(binary.LittleEndian.Uint16(b[8:10]))
	if 10+n > len(b) {
		return npy{}, fmt.Errorf("header runs past the end")
	}
	head := string(b[10 : 10+n])
	d, s := npyDescr.FindStringSubmatch(head), npyShape.FindStringSubmatch(head)
	if d == nil || s == nil || !strings.Contains(head, "'fortran_order': False") {
		return npy{}, fmt.Errorf("header %q", head)
	}
	a := npy{descr: d[1], data: b[10+n:]}
	for _, f := range strings.Split(s[1], ",") {
		if f = strings.TrimSpace(f); f != "" {
			v, err := strconv.Atoi(f)
			if err != nil {
				return npy{}, err
			}
			a.shape = append(a.shape, v)
		}
	}
	return a, nil
}

// readSet reads an image set as edgepipe's readers do: a zip holding
// images.npy and labels.npy.
func readSet(t *testing.T, name string) (images, labels npy) {
	t.Helper()
	b, err := Bytes(name)
	if err != nil {
		t.Fatal(err)
	}
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	arrays := map[string]npy{}
	fixed := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range z.File {
		if !f.Modified.Equal(fixed) {
			t.Errorf("%s/%s is dated %v: the rebuild is byte-identical only with a fixed date", name, f.Name, f.Modified)
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s/%s: %v", name, f.Name, err)
		}
		if arrays[f.Name], err = readNpy(raw); err != nil {
			t.Fatalf("%s/%s: %v", name, f.Name, err)
		}
	}
	if len(arrays) != 2 {
		t.Fatalf("%s holds %d arrays, want images.npy and labels.npy", name, len(arrays))
	}
	images, ok1 := arrays["images.npy"]
	labels, ok2 := arrays["labels.npy"]
	if !ok1 || !ok2 {
		t.Fatalf("%s: want images.npy and labels.npy", name)
	}
	return images, labels
}

func TestImageSetsMatchTheREADME(t *testing.T) {
	// `digits-calibration.npz` (`builtin:digits-calibration`, 359 images)
	count := regexp.MustCompile("\\(`builtin:([\\w-]+)`, ([0-9,]+) images\\)")
	counts := map[string]int{}
	for _, m := range count.FindAllStringSubmatch(readme(t), -1) {
		counts[m[1]], _ = strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
	}
	for _, name := range Names() {
		if !strings.HasSuffix(mustFile(t, name), ".npz") {
			continue
		}
		want, ok := counts[name]
		if !ok {
			t.Errorf("README gives no image count for builtin:%s", name)
			continue
		}
		images, labels := readSet(t, name)
		digits := strings.HasPrefix(name, "digits")
		wantShape := []int{want, 224, 224, 3}
		if digits {
			wantShape = []int{want, 8, 8}
		}
		if images.descr != "|u1" || fmt.Sprint(images.shape) != fmt.Sprint(wantShape) {
			t.Errorf("%s images: %s %v, want uint8 %v", name, images.descr, images.shape, wantShape)
		}
		if labels.descr != "<i8" || fmt.Sprint(labels.shape) != fmt.Sprint([]int{want}) {
			t.Errorf("%s labels: %s %v, want int64 [%d]", name, labels.descr, labels.shape, want)
		}
		size := 1
		for _, d := range images.shape {
			size *= d
		}
		if len(images.data) != size || len(labels.data) != 8*want {
			t.Fatalf("%s: %d image bytes and %d label bytes for shapes %v, %v", name, len(images.data), len(labels.data), images.shape, labels.shape)
		}
		seen := map[int64]bool{}
		for i := 0; i < want; i++ {
			seen[int64(binary.LittleEndian.Uint64(labels.data[8*i:]))] = true
		}
		if digits {
			// Ten classes, each present.
			for l := range seen {
				if l < 0 || l > 9 {
					t.Errorf("%s: label %d is not a digit", name, l)
				}
			}
			if len(seen) != 10 {
				t.Errorf("%s: %d distinct labels, want all 10 digits", name, len(seen))
			}
			// The 0-16 values scaled to 0-255 and rounded.
			ok := map[byte]bool{}
			for v := 0; v <= 16; v++ {
				ok[byte(math.RoundToEven(float64(v)*255/16))] = true
			}
			for i, p := range images.data {
				if !ok[p] {
					t.Fatalf("%s: pixel %d is %d, not a 0-16 value scaled to 0-255", name, i, p)
				}
			}
		} else if len(seen) != 1 || !seen[-1] {
			t.Errorf("%s: labels %v, want every label -1 (an unlabelled set)", name, seen)
		}
	}
	if len(counts) != 4 {
		t.Errorf("README gives counts for %v, want the four image sets", counts)
	}
}

func mustFile(t *testing.T, name string) string {
	t.Helper()
	f, err := fileOf(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The corpus the behavioural contract tokenizes holds what the README
// says it holds: a text of each script and kind named there, in the
// layout the contract reads (items a line, one final newline).
func TestTokenizerCorpusMatchesTheREADME(t *testing.T) {
	m := regexp.MustCompile("`tokenizer-corpus.txt` \\(`builtin:tokenizer-corpus`, (\\d+) lines, ([0-9,]+) bytes\\)").FindStringSubmatch(readme(t))
	if m == nil {
		t.Fatal("README: no line count and size for tokenizer-corpus.txt")
	}
	b, err := Bytes("tokenizer-corpus")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if want, _ := strconv.Atoi(m[1]); len(lines) != want {
		t.Errorf("tokenizer-corpus.txt has %d lines, the README says %d", len(lines), want)
	}
	if want, _ := strconv.Atoi(strings.ReplaceAll(m[2], ",", "")); len(b) != want {
		t.Errorf("tokenizer-corpus.txt is %d bytes, the README says %d", len(b), want)
	}
	if !strings.HasSuffix(s, "\n") || strings.HasSuffix(s, "\n\n") || strings.Contains(s, "\r") {
		t.Error("tokenizer-corpus.txt must end in one newline and hold no carriage return")
	}
	for what, sample := range map[string]string{
		"Latin with accents": "brûlée", "Cyrillic": "Съешь", "Greek": "ψυχοφθόρα", "Arabic": "حكيم",
		"Hebrew": "סקרן", "Devanagari": "राक्षसों", "Chinese": "玻璃", "Japanese": "いろは", "Korean": "다람쥐",
		"Thai": "มนุษย์", "skin tones": "👍🏽", "a ZWJ sequence": "👩\u200d👩\u200d👧\u200d👦", "a flag": "🇯🇵",
		"tabs in code": "def f(x):\treturn", "a run of spaces": "a          ", "a long digit run": "3.14159265358979323846",
		"a run of blank lines": "\n\n\n\n", "ChatML's tokens": "<|im_start|>", "Gemma's tokens": "<start_of_turn>",
		"Llama 3's tokens": "<|eot_id|>", "a combining mark": "e\u0301",
	} {
		if !strings.Contains(s, sample) {
			t.Errorf("tokenizer-corpus.txt has no %s (%q)", what, sample)
		}
	}
}
