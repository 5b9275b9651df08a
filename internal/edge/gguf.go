package edge

import (
	"errors"
	"io/fs"
	"math"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// GGUFSource is what a GGUF source's header says of how it was made: its
// architecture, llama.cpp's file type (general.file_type: "Q4_K_M") and how
// many tensors of each ggml type it really holds, a mix as a rule.
type GGUFSource struct {
	Architecture string         `json:"architecture"`
	FileType     string         `json:"file_type,omitempty"`
	TensorTypes  map[string]int `json:"tensor_types"`
}

// Quantized reports whether the weights were rounded to fewer bits than
// 16 before edgepipe saw them.
func (g *GGUFSource) Quantized() bool {
	for t := range g.TensorTypes {
		if !slices.Contains([]string{"F32", "F16", "BF16", "F64"}, t) {
			return true
		}
	}
	return false
}

// readGGUF learns the shape from a GGUF's header: the layer and head counts
// from its metadata, the parameter count from its tensors' dimensions. A
// file that is not a usable GGUF (cut short, a tarball named .gguf, a
// header whose counts cannot be) is a Problem: no run could convert it.
func (m *Model) readGGUF(path, label string) {
	h, err := gguf.ReadFile(path)
	var notRegular *boundedfile.NotRegularError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.note("%s is not there, so the memory pre-flight was skipped", label)
		m.Missing = true
		return
	case errors.As(err, &notRegular):
		m.problem("%v: a model source is a regular file; point model.source at the GGUF itself", err)
		return
	case err != nil:
		m.problem("%v", err)
		return
	}
	arch := h.Architecture()
	no, count, split := h.Split()
	switch {
	case split:
		m.problem("%s is part %d of a split GGUF of %d parts (its split.no and split.count say so, though its name does not): a part is not the model; give the parts llama.cpp's names (NAME-00001-of-%05d.gguf) and merge them with `llama-gguf-split --merge`, then point model.source at the merged file",
			label, no+1, count, count)
		return
	case len(h.Tensors) == 0:
		m.problem("%s holds no tensors (a vocabulary-only GGUF?): point model.source at the model's GGUF", label)
		return
	case arch == "":
		m.problem("%s has no general.architecture, so no converter can load it: convert the model again with llama.cpp", label)
		return
	}
	modelType, readable := shared.GGUFModelType(arch)
	if !readable {
		m.problem("%s is a %s GGUF (general.architecture), which the GGUF loader of %s, the one edgepipe dequantizes a GGUF source with, cannot read: point model.source at the model's Hugging Face checkpoint instead",
			label, arch, shared.TransformersPinned())
		return
	}
	if experts := ggufUint(h, arch+".expert_count"); experts > 0 && modelType != "qwen2_moe" && modelType != "qwen3_moe" {
		// llama.cpp writes Mixtral as a llama with experts; the loader
		// builds a dense model, skips every expert tensor and leaves the
		// MLP random: a checkpoint that is not the model.
		m.problem("%s is a mixture of experts (%s.expert_count %d), which the GGUF loader of %s reads as a dense %s and drops every expert tensor of, so the dequantized checkpoint would not be this model: point model.source at the model's Hugging Face checkpoint instead",
			label, arch, experts, shared.TransformersPinned(), modelType)
		return
	}
	m.Architecture = modelType
	m.GGUF = &GGUFSource{Architecture: arch, TensorTypes: h.TensorTypes()}
	m.GGUF.FileType, _ = h.FileType()
	cfg := ggufConfig(h, arch)
	m.Shape = cfg.shape()
	m.Shape.Params = h.Params()
	m.MaxContext = deref(cfg.MaxPositions)
	m.From = "the GGUF header of " + label
	if !m.HasKVShape() {
		m.note("%s's metadata lacks %s (as %s.* keys), so the KV cache cannot be sized and the memory pre-flight was skipped",
			label, strings.Join(cfg.missingKVFields(), ", "), arch)
	}
	if m.GGUF.Quantized() {
		what := m.GGUF.FileType
		if what == "" {
			what = "its tensor types"
		}
		m.note("%s is already quantized (%s): every target starts from those rounded weights, so none can be more accurate than the GGUF itself", label, what)
	}
}

// ggufConfig reads llama.cpp's metadata keys (ARCH.block_count, ...) into
// the config.json fields they stand for. A per-layer array (some
// architectures vary the head count by layer) counts its largest entry,
// which sizes the KV cache from above; a value no model has is left out.
func ggufConfig(h *gguf.Header, arch string) hfConfig {
	num := func(key string) *int {
		v, ok := h.Get(arch + "." + key)
		if !ok {
			return nil
		}
		if elems, ok := v.Array(); ok {
			best := -1
			for _, e := range elems {
				if n, ok := e.Uint(); ok && n <= math.MaxInt32 {
					best = max(best, int(n))
				}
			}
			if best < 0 {
				return nil
			}
			return &best
		}
		n, ok := v.Uint()
		if !ok || n > math.MaxInt32 {
			return nil
		}
		i := int(n)
		return &i
	}
	c := hfConfig{
		Layers: num("block_count"), Heads: num("attention.head_count"), KVHeads: num("attention.head_count_kv"),
		Hidden: num("embedding_length"), HeadDim: num("attention.key_length"), Intermediate: num("feed_forward_length"),
		Vocab: num("vocab_size"), MaxPositions: num("context_length"),
	}
	if c.Vocab == nil {
		if v, ok := h.Get("tokenizer.ggml.tokens"); ok && v.Len <= math.MaxInt32 {
			n := int(v.Len)
			c.Vocab = &n
		}
	}
	return c
}

// ggufUint is an unsigned metadata value, 0 when absent or not a number.
func ggufUint(h *gguf.Header, key string) uint64 {
	v, ok := h.Get(key)
	if !ok {
		return 0
	}
	n, _ := v.Uint()
	return n
}
