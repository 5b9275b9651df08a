package catalog

import (
	"fmt"
	"strings"
	"sync"

	"github.com/edgepipe/edgepipe/internal/suggest"
)

// Format is one model format a recipe target can ask for.
type Format struct {
	Name   string `json:"name"`
	Family string `json:"family"` // gguf | coreml | qnn | mlc | onnx | gptq | awq | trtllm | nvfp4
	// GGUFType is the type name as llama-quantize spells it (Q4_K_M); empty
	// outside the gguf family.
	GGUFType string `json:"gguf_type,omitempty"`
	// BitsPerWeight is approximate, for size estimates only.
	BitsPerWeight float64 `json:"bits_per_weight"`
	// BlockSize is how many weights share one scale; llama.cpp falls back to
	// another type for tensors whose rows it does not divide (SmolLM2's 576
	// columns are not a multiple of the K-quants' 256).
	BlockSize int `json:"block_size,omitempty"`
	// NeedsImatrix: llama-quantize refuses this type without an importance matrix.
	NeedsImatrix bool `json:"needs_imatrix,omitempty"`
	// NeedsNVIDIAGPU: building or validating the artifact needs an NVIDIA GPU.
	NeedsNVIDIAGPU bool `json:"needs_nvidia_gpu"`
	// TensorCore is the tensor-core type the format's math needs ("fp4"
	// for NVFP4), checked against a device's TensorCores.
	TensorCore string `json:"tensor_core,omitempty"`
	// RunsHere says whether a Linux host without a GPU can convert and
	// validate it: "yes", "partly" (converts here, but part of the
	// validation or the final compile needs other hardware or OS), or "no".
	RunsHere string `json:"runs_here"`
	// Bench names the runtime that times the format on this host token by
	// token (llama.cpp, onnxruntime); empty when none can.
	Bench string `json:"bench,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Label is how messages name the format's family ("GGUF", "Core ML", ...).
func (f Format) Label() string {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	return reg.labels[f.Family]
}

// FormatSet is one format family's rows, as the family registers them.
type FormatSet struct {
	// Labels names each family of the rows in messages (gptq: "GPTQ").
	Labels map[string]string
	// Summary is how the valid-formats list in messages spells these rows;
	// empty lists their names.
	Summary string
	// Aliases map spellings a recipe must not use to the one it must: the
	// format string, and with it the cache key, has one spelling.
	Aliases map[string]string
	Formats []Format
}

// reg holds the formats the families registered, in registration order.
var reg = struct {
	mu        sync.RWMutex
	formats   []Format
	index     map[string]int
	labels    map[string]string
	aliases   map[string]string
	summaries []string
}{index: map[string]int{}, labels: map[string]string{}, aliases: map[string]string{}}

// RegisterFormats adds a family's formats; each family registers its own
// rows once (pipelines registers every built-in family).
func RegisterFormats(set FormatSet) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, f := range set.Formats {
		if _, dup := reg.index[f.Name]; dup {
			panic("catalog: format " + f.Name + " registered twice")
		}
		reg.index[f.Name] = len(reg.formats)
		reg.formats = append(reg.formats, f)
	}
	for k, v := range set.Labels {
		reg.labels[k] = v
	}
	for k, v := range set.Aliases {
		reg.aliases[k] = v
	}
	summary := set.Summary
	if summary == "" {
		var names []string
		for _, f := range set.Formats {
			names = append(names, f.Name)
		}
		summary = strings.Join(names, ", ")
	}
	reg.summaries = append(reg.summaries, summary)
}

// FormatNames lists every valid format name in a stable order.
func FormatNames() []string {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	names := make([]string, len(reg.formats))
	for i, f := range reg.formats {
		names[i] = f.Name
	}
	return names
}

// Formats lists every format in FormatNames order.
func Formats() []Format {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	return append([]Format(nil), reg.formats...)
}

// ParseFormat looks a format up by its exact name.
func ParseFormat(name string) (Format, error) {
	reg.mu.RLock()
	i, ok := reg.index[name]
	var f Format
	if ok {
		f = reg.formats[i]
	}
	reg.mu.RUnlock()
	if ok {
		return f, nil
	}
	return Format{}, fmt.Errorf("%s", unknownFormatMessage(name))
}

func unknownFormatMessage(name string) string {
	msg := fmt.Sprintf("unknown format %q", name)
	reg.mu.RLock()
	hint := reg.aliases[strings.ToLower(name)]
	valid := strings.Join(reg.summaries, ", ")
	reg.mu.RUnlock()
	if hint == "" {
		hint = suggest.Closest(name, FormatNames())
	}
	if hint != "" {
		msg += fmt.Sprintf("; did you mean %q?", hint)
	}
	return msg + " Valid formats: " + valid + "."
}

// EstimateWeightsGB is the size of params weights stored in f.
func EstimateWeightsGB(params int64, f Format) float64 {
	return float64(params) * f.BitsPerWeight / 8 / 1e9
}
