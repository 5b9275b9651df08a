package edge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// Model is what plan time knows about a model source: its shape, where the
// shape came from, and notes saying what could not be learned and why.
type Model struct {
	Source string             `json:"source"`
	Shape  catalog.ModelShape `json:"shape"`
	// From says where the shape came from, for messages and reports.
	From string `json:"from,omitempty"`
	// Architecture is the model's config.json model_type (llama, qwen2,
	// gemma3_text, ...), for a GGUF source the one its general.architecture
	// dequantizes to; "" when plan time cannot read it.
	Architecture string `json:"architecture,omitempty"`
	// MaxContext is the model's max_position_embeddings (0: unknown).
	MaxContext int      `json:"max_context,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	// Problems make the source unusable for any run (a weights file that
	// is a FIFO, an index naming a file outside the folder): plan refuses
	// the recipe at model.source, pick refuses the model.
	Problems []string `json:"problems,omitempty"`
	// GGUF is what a GGUF source's header says of its quantization (nil
	// for any other source).
	GGUF *GGUFSource `json:"gguf,omitempty"`
	// Missing is a local source (folder or .gguf) that is not there. Plan
	// only notes it (a recipe may be planned before its model is copied
	// in); pick and init refuse it, since the recipe they write would
	// fail at its first step.
	Missing bool `json:"missing,omitempty"`
}

// HasKVShape reports whether the KV cache can be sized.
func (m Model) HasKVShape() bool {
	return m.Shape.Layers > 0 && m.Shape.KVHeads > 0 && m.Shape.HeadDim > 0
}

// HasParams reports whether the weights can be sized.
func (m Model) HasParams() bool { return m.Shape.Params > 0 }

// ResolveModel learns a model's shape from its source without the network:
// built-in models are known, a local folder (relative to baseDir) is read,
// a local GGUF's header is read, an hf:// source is read from the local Hugging Face cache when it is
// there. Anything else leaves the shape unknown, with a note.
func ResolveModel(source, baseDir string) Model {
	m := Model{Source: source}
	switch {
	case strings.HasPrefix(source, "builtin:"):
		name := strings.TrimPrefix(source, "builtin:")
		cfg, ok := builtinConfigs[name]
		if !ok {
			m.note("%s is not a built-in model this build knows the shape of (known: %s)", source, strings.Join(builtinNames(), ", "))
			return m
		}
		m.Shape = cfg.shape()
		m.Architecture = cfg.ModelType
		m.MaxContext = deref(cfg.MaxPositions)
		m.Shape.Params = cfg.estimateParams()
		m.From = "the built-in shape of " + source
	case strings.HasPrefix(source, "hf://"):
		dir, err := hfCachedSnapshot(source)
		if err != nil {
			m.note("%v; the memory pre-flight needs the model's config.json and plan time does not use the network, so it was skipped (a run downloads it into the Hugging Face cache, and later plans read it from there)", err)
			return m
		}
		m.readFolder(dir, source)
		if m.From != "" {
			m.From = "the local Hugging Face cache: " + m.From
		}
	case strings.Contains(source, "://") || strings.Contains(source, "::"):
		m.note("%s is downloaded at run time, so its shape is unknown at plan time and the memory pre-flight was skipped; point model.source at a local copy (or hf://) to check it before converting", source)
	case source == "":
		m.note("the recipe names no model source")
	default:
		if path, ok, err := shared.LocalGGUF(source, baseDir); err != nil {
			m.problem("%v", err)
			return m
		} else if ok {
			if !filepath.IsAbs(path) {
				path = filepath.Join(baseDir, path)
			}
			m.readGGUF(path, source)
			return m
		}
		dir := source
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(baseDir, dir)
		}
		m.readFolder(dir, source)
	}
	return m
}

func (m *Model) note(format string, args ...any) {
	m.Notes = append(m.Notes, fmt.Sprintf(format, args...))
}

func (m *Model) problem(format string, args ...any) {
	m.Problems = append(m.Problems, fmt.Sprintf(format, args...))
}

// unusable reports whether err means no run can use the source, rather
// than that its shape is unknown: a file that is not a regular file (a
// FIFO would block every reader), one far over what such a file can be,
// an index naming files outside the folder.
func unusable(err error) bool {
	var notRegular *boundedfile.NotRegularError
	var tooLarge *boundedfile.TooLargeError
	var entry *IndexEntryError
	return errors.As(err, &notRegular) || errors.As(err, &tooLarge) || errors.As(err, &entry)
}

// unusableProblem is err as a problem sentence, with the fix.
func (m *Model) unusableProblem(label string, err error) {
	var notRegular *boundedfile.NotRegularError
	if errors.As(err, &notRegular) {
		m.problem("%s: %v: a model folder holds regular files only; put the real file there, or remove it", label, err)
		return
	}
	m.problem("%s: %v", label, err)
}

// readFolder reads config.json for the layer and head counts and the
// safetensors headers for the parameter count, falling back to an estimate
// from the config's dimensions.
func (m *Model) readFolder(dir, label string) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		m.note("model folder %s is not there, so the memory pre-flight was skipped", label)
		m.Missing = true
		return
	}
	cfg, err := readHFConfig(filepath.Join(dir, "config.json"))
	switch {
	case unusable(err):
		m.unusableProblem(label, err)
	case err != nil:
		m.note("%s: %v", label, err)
	}
	m.Shape = cfg.shape()
	m.Architecture = cfg.ModelType
	m.MaxContext = deref(cfg.MaxPositions)
	var from []string
	if m.HasKVShape() {
		from = append(from, "config.json")
	} else if err == nil {
		m.note("%s/config.json lacks %s, so the KV cache cannot be sized and the memory pre-flight was skipped", label, strings.Join(cfg.missingKVFields(), ", "))
	}

	params, files, stErr := safetensorsParams(dir)
	switch {
	case unusable(stErr):
		m.unusableProblem(label, stErr)
	case stErr == nil && params > 0:
		m.Shape.Params = params
		from = append(from, fmt.Sprintf("%d safetensors header(s)", files))
	default:
		if est := cfg.estimateParams(); est > 0 {
			m.Shape.Params = est
			from = append(from, "parameters estimated from config.json's dimensions")
		}
		if stErr != nil && m.Shape.Params == 0 {
			m.note("%s: parameter count unknown: %v", label, stErr)
		} else if m.Shape.Params == 0 {
			m.note("%s: parameter count unknown: no safetensors weights, and config.json lacks the dimensions to estimate it", label)
		}
	}
	m.From = strings.Join(from, " + ")
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
