package shared

import (
	"bytes"
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// A GGUF file is a model source too: users hold GGUFs far more often than
// checkpoints. The source step dequantizes it into a Hugging Face
// checkpoint with gguf_to_hf.py (the converter the built-in models go
// through), so every family reads the same folder it reads for any other
// source, and the step's result says the weights were quantized before.

// DataGGUF is the data role of a local GGUF source: as a data file its
// content digest is in the source step's cache key, so an edited GGUF at
// the same path is converted again.
const DataGGUF = "gguf"

// Facts the source step records about a GGUF source.
const (
	FactSourceFormat       = "source_format"
	FactSourceQuantization = "source_quantization"
	FactSourceTensorTypes  = "source_tensor_types"
	FactTokenizer          = "tokenizer"
)

// IsGGUFSource reports whether model.source names a GGUF file, local or
// remote (a URL's query, such as ?checksum=, is not part of the name).
func IsGGUFSource(src string) bool {
	name := src
	if strings.Contains(src, "://") || strings.Contains(src, "::") {
		if i := strings.IndexAny(name, "?#"); i >= 0 {
			name = name[:i]
		}
	}
	return strings.HasSuffix(strings.ToLower(name), ".gguf")
}

// LocalGGUF returns the GGUF file a local source names: the file itself,
// or the one .gguf file of a folder that holds no config.json. ok is false
// for a source that is not a local GGUF (a checkpoint folder, a URL). A
// part of a split GGUF (NAME-00001-of-00003.gguf, named directly or the
// only GGUF of a folder) is never taken for the model, nor is a folder of
// every part: the error says which parts are missing, or how to merge them.
func LocalGGUF(src, recipeDir string) (path string, ok bool, err error) {
	if !IsLocalSource(src) {
		return "", false, nil
	}
	p := src
	if !filepath.IsAbs(p) {
		p = filepath.Join(recipeDir, p)
	}
	if IsGGUFSource(src) {
		if prefix, _, count, split := gguf.SplitName(filepath.Base(p)); split {
			return "", true, fmt.Errorf("model.source %s: %w", src, gguf.CheckSplit(filepath.Dir(p), prefix, count))
		}
		return src, true, nil
	}
	st, err := os.Stat(p)
	if err != nil || !st.IsDir() {
		return "", false, nil // the source step says what is wrong
	}
	if _, err := os.Stat(filepath.Join(p, "config.json")); err == nil {
		return "", false, nil
	}
	ggufs, _ := filepath.Glob(filepath.Join(p, "*.gguf"))
	sort.Strings(ggufs)
	if prefix, count, ok := oneSplitSet(ggufs); ok {
		return "", true, fmt.Errorf("model.source %s holds %s: %w", src, strings.Join(baseNames(ggufs), ", "), gguf.CheckSplit(p, prefix, count))
	}
	switch {
	case len(ggufs) == 0:
		return "", false, nil
	case len(ggufs) > 1:
		return "", true, fmt.Errorf("model.source %s holds %d GGUF files (%s): point model.source at one of them; split parts (NAME-00001-of-0000N.gguf) must be merged first, with llama.cpp's `llama-gguf-split --merge FIRST-PART OUT.gguf`",
			src, len(ggufs), strings.Join(baseNames(ggufs), ", "))
	}
	return filepath.Join(src, filepath.Base(ggufs[0])), true, nil
}

// oneSplitSet reports whether the files are all parts of one split set
// (llama.cpp's names, one prefix and count).
func oneSplitSet(paths []string) (prefix string, count int, ok bool) {
	for i, p := range paths {
		pre, _, n, split := gguf.SplitName(filepath.Base(p))
		if !split || i > 0 && (pre != prefix || n != count) {
			return "", 0, false
		}
		prefix, count = pre, n
	}
	return prefix, count, len(paths) > 0
}

// checkSplitURL refuses a download that names one part of a split GGUF:
// it would bring one file of several.
func checkSplitURL(src string) error {
	if !IsGGUFSource(src) {
		return nil
	}
	name := src
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		name = name[:i]
	}
	name = name[strings.LastIndex(name, "/")+1:]
	if _, no, count, split := gguf.SplitName(name); split {
		return fmt.Errorf("%s is part %d of a split GGUF of %d parts, and a download is one file: merge the parts with `llama-gguf-split --merge` and download the merged file", name, no, count)
	}
	return nil
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// fetchGGUF brings a GGUF source (a local file by its data role, or a
// download) and converts it into the step's output.
func fetchGGUF(ctx context.Context, sc *steps.Context, src string) error {
	var ggufPath string
	if IsLocalSource(src) {
		p, err := sc.Data(DataGGUF)
		if err != nil {
			return err
		}
		ggufPath = p
	} else {
		dir := filepath.Join(sc.Scratch, "fetched")
		if _, err := download(ctx, sc, src, dir); err != nil {
			return err
		}
		found, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
		if len(found) != 1 {
			return fmt.Errorf("the download holds %d .gguf files, not one: name a single GGUF file in model.source", len(found))
		}
		ggufPath = found[0]
	}
	// The header is read before a converter parses the file: a download
	// cut short, an HTML error page or a header whose counts cannot be
	// says so plainly, and so does one part of a split GGUF.
	h, err := gguf.ReadFile(ggufPath)
	if err != nil {
		return err
	}
	if no, count, split := h.Split(); split {
		return fmt.Errorf("%s is part %d of a split GGUF of %d parts (its split.no and split.count say so), not the model: merge the parts into one file with `llama-gguf-split --merge FIRST-PART OUT.gguf` and name that file in model.source",
			filepath.Base(ggufPath), no+1, count)
	}
	info := filepath.Join(sc.Scratch, "gguf-info.json")
	if err := sc.RunTool(ctx, toolchain.ToolGGUFToHF, "--gguf", ggufPath, "--out", sc.Out, "--info", info); err != nil {
		return fmt.Errorf("dequantize the GGUF into a checkpoint: %w", err)
	}
	b, err := boundedfile.Read(info, boundedfile.ModelJSONLimit)
	if err != nil {
		return fmt.Errorf("gguf_to_hf.py wrote no %s: %w", filepath.Base(info), err)
	}
	return recordGGUFInfo(sc.Result, b)
}

// recordGGUFInfo keeps what the converter said of the GGUF in the step's
// result, for the manifest: the source was quantized, and how.
func recordGGUFInfo(res *steps.Result, b []byte) error {
	var gi report.GGUFToHF
	if err := steps.DecodeReport(toolchain.ToolGGUFToHF, bytes.TrimSpace(b), &gi); err != nil {
		return err
	}
	res.SetFact(FactSourceFormat, "gguf")
	if gi.FileType != "" {
		res.SetFact(FactSourceQuantization, gi.FileType)
	}
	if len(gi.TensorTypes) > 0 {
		var types []string
		for t, n := range gi.TensorTypes {
			types = append(types, fmt.Sprintf("%s:%d", t, n))
		}
		sort.Strings(types)
		res.SetFact(FactSourceTensorTypes, strings.Join(types, " "))
	}
	if gi.Tokenizer != "" {
		res.SetFact(FactTokenizer, gi.Tokenizer)
	}
	return nil
}
