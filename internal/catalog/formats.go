package catalog

import (
	"fmt"
	"strings"

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
func (f Format) Label() string { return familyLabels[f.Family] }

var familyLabels = map[string]string{
	"gguf":   "GGUF",
	"coreml": "Core ML",
	"qnn":    "QNN",
	"mlc":    "MLC",
	"onnx":   "ONNX",
	"gptq":   "GPTQ",
	"awq":    "AWQ",
	"trtllm": "TensorRT-LLM",
	"nvfp4":  "NVFP4",
}

// llama3_8BParams converts llama-quantize's file sizes (GiB, measured on
// Llama-3-8B) into bits per weight: 8,030,261,248 parameters.
const llama3_8BParams = 8030261248

// ggufType is one row of llama.cpp's tools/quantize/quantize.cpp QUANT_OPTIONS
// table. That table gives either a Llama-3-8B file size in GiB or a bits per
// weight figure; the size includes the embedding and output tensors llama.cpp
// keeps at higher precision, which is what a size estimate wants.
type ggufType struct {
	name       string
	llama3GiB  float64 // from QUANT_OPTIONS, "4.58G, +0.1754 ppl @ Llama-3-8B"
	bpw        float64 // from QUANT_OPTIONS where it quotes bpw, or exact for float types
	block      int
	needsImat  bool
	recommends string
}

// ggufTypes in llama-quantize's order within each precision, most bits first.
var ggufTypes = []ggufType{
	{name: "F32", bpw: 32},
	{name: "F16", bpw: 16},
	{name: "BF16", bpw: 16},
	{name: "Q8_0", llama3GiB: 7.96, block: 32},
	{name: "Q6_K", llama3GiB: 6.14, block: 256},
	{name: "Q5_K_M", llama3GiB: 5.33, block: 256},
	{name: "Q5_K_S", llama3GiB: 5.21, block: 256},
	{name: "Q5_1", llama3GiB: 5.65, block: 32},
	{name: "Q5_0", llama3GiB: 5.21, block: 32},
	{name: "Q4_K_M", llama3GiB: 4.58, block: 256, recommends: "CPU and Apple Silicon laptops (domain brief)"},
	{name: "Q4_K_S", llama3GiB: 4.37, block: 256},
	{name: "Q4_1", llama3GiB: 4.78, block: 32},
	{name: "Q4_0", llama3GiB: 4.34, block: 32},
	{name: "IQ4_NL", bpw: 4.50, block: 32},
	{name: "IQ4_XS", bpw: 4.25, block: 256},
	{name: "Q3_K_L", llama3GiB: 4.03, block: 256},
	{name: "Q3_K_M", llama3GiB: 3.74, block: 256},
	{name: "Q3_K_S", llama3GiB: 3.41, block: 256},
	{name: "IQ3_M", bpw: 3.66, block: 256},
	{name: "IQ3_S", bpw: 3.44, block: 256},
	{name: "IQ3_XS", bpw: 3.3, block: 256},
	{name: "IQ3_XXS", bpw: 3.06, block: 256},
	{name: "Q2_K", llama3GiB: 2.96, block: 256},
	{name: "Q2_K_S", llama3GiB: 2.96, block: 256, needsImat: true},
	{name: "IQ2_M", bpw: 2.7, block: 256},
	{name: "IQ2_S", bpw: 2.5, block: 256, needsImat: true},
	{name: "IQ2_XS", bpw: 2.31, block: 256, needsImat: true},
	{name: "IQ2_XXS", bpw: 2.06, block: 256, needsImat: true},
	{name: "IQ1_M", bpw: 1.75, block: 256, needsImat: true},
	{name: "IQ1_S", bpw: 1.56, block: 256, needsImat: true},
}

// ggufAliases are llama-quantize's own aliases; a recipe must spell the full
// name so the format string, and with it the cache key, has one spelling.
var ggufAliases = map[string]string{
	"gguf-q3_k": "gguf-q3_k_m",
	"gguf-q4_k": "gguf-q4_k_m",
	"gguf-q5_k": "gguf-q5_k_m",
}

func ggufFormat(t ggufType) Format {
	bpw := t.bpw
	if t.llama3GiB > 0 {
		bpw = t.llama3GiB * (1 << 30) * 8 / llama3_8BParams
	}
	note := "llama.cpp convert + llama-quantize + llama-perplexity all run on the CPU"
	if t.recommends != "" {
		note = "recommended for " + t.recommends + "; " + note
	}
	return Format{
		Name:          "gguf-" + strings.ToLower(t.name),
		Family:        "gguf",
		GGUFType:      t.name,
		BitsPerWeight: round2(bpw),
		BlockSize:     t.block,
		NeedsImatrix:  t.needsImat,
		RunsHere:      "yes",
		Bench:         "llama.cpp",
		Note:          note,
	}
}

// nonGGUF formats. Bits per weight follow from each format's layout:
// b-bit weights plus one fp16 (or fp8) scale per group of g weights is
// b + 16/g (or b + 8/g).
var (
	headFormats = []Format{
		{Name: "coreml-int4", Family: "coreml", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "partly",
			Note: "INT4 weights (per-block, block 32, fp16 scales) with FP16 activations for the ANE; coremltools converts and saves on Linux, but Core ML prediction needs macOS"},
		{Name: "qnn-w8a16", Family: "qnn", BitsPerWeight: 8, RunsHere: "partly",
			Note: "QDQ ONNX, INT8 weights and 16-bit activations; the QDQ model runs on ONNX Runtime's CPU provider here, the Hexagon context binary needs the QNN SDK or Qualcomm AI Hub"},
		{Name: "qnn-w4a16", Family: "qnn", BitsPerWeight: 4, RunsHere: "partly",
			Note: "QDQ ONNX, INT4 weights and 16-bit activations; validated on the CPU provider here, compiled for Hexagon by the QNN SDK or Qualcomm AI Hub"},
		{Name: "mlc-q4f16_1", Family: "mlc", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "partly",
			Note: "MLC weights, int4 with an fp16 scale per 32; the weights convert here, the WebGPU model library needs the MLC TVM toolchain and a WebGPU browser to run"},
	}
	tailFormats = []Format{
		{Name: "onnx-fp32", Family: "onnx", BitsPerWeight: 32, RunsHere: "yes", Bench: "onnxruntime",
			Note: "exported ONNX graph; ONNX Runtime's CPU provider computes perplexity"},
		{Name: "onnx-int4", Family: "onnx", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "yes", Bench: "onnxruntime",
			Note: "MatMulNBits INT4 (onnxruntime-genai builder, block 32); embeddings stay at full precision, so small models come out larger than 4.5 bits per weight suggests"},
		{Name: "gptq-w4a16", Family: "gptq", BitsPerWeight: 4.125, BlockSize: 128, RunsHere: "yes",
			Note: "llmcompressor GPTQ, group 128 (a group must divide every layer's width); runs on the CPU for small models, vLLM serving itself is not exercised here"},
		{Name: "awq-w4a16", Family: "awq", BitsPerWeight: 4.156, BlockSize: 128, RunsHere: "yes",
			Note: "llmcompressor AWQ, group 128 with an fp16 scale and 4-bit zero point per group; runs on the CPU for small models, vLLM serving itself is not exercised here"},
		{Name: "trtllm-int4", Family: "trtllm", BitsPerWeight: 4.125, BlockSize: 128, NeedsNVIDIAGPU: true, RunsHere: "no",
			Note: "TensorRT-LLM INT4 engine; engines are built on, and for, the target NVIDIA GPU"},
		{Name: "nvfp4", Family: "nvfp4", BitsPerWeight: 4.5, BlockSize: 16, NeedsNVIDIAGPU: true, RunsHere: "partly",
			Note: "FP4 (E2M1) weights with an FP8 scale per 16, FP8 KV cache; nvidia-modelopt quantizes and exports a checkpoint, whether its calibration runs without CUDA is unverified, and running it needs Blackwell FP4 tensor cores"},
	}
)

// formats is the registry in FormatNames order.
var formats = func() []Format {
	all := append([]Format(nil), headFormats...)
	for _, t := range ggufTypes {
		all = append(all, ggufFormat(t))
	}
	return append(all, tailFormats...)
}()

var formatIndex = func() map[string]int {
	m := make(map[string]int, len(formats))
	for i, f := range formats {
		m[f.Name] = i
	}
	return m
}()

// FormatNames lists every valid format name in a stable order.
func FormatNames() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return names
}

// Formats lists every format in FormatNames order.
func Formats() []Format { return append([]Format(nil), formats...) }

// ParseFormat looks a format up by its exact name.
func ParseFormat(name string) (Format, error) {
	if i, ok := formatIndex[name]; ok {
		return formats[i], nil
	}
	return Format{}, fmt.Errorf("%s", unknownFormatMessage(name))
}

func unknownFormatMessage(name string) string {
	msg := fmt.Sprintf("unknown format %q", name)
	hint := ggufAliases[strings.ToLower(name)]
	if hint == "" {
		hint = suggest.Closest(name, FormatNames())
	}
	if hint != "" {
		msg += fmt.Sprintf("; did you mean %q?", hint)
	}
	return msg + " Valid formats: coreml-int4, qnn-w8a16, qnn-w4a16, mlc-q4f16_1, " +
		"gguf-<llama.cpp type> (gguf-q4_k_m, gguf-q8_0, gguf-f16, ...), onnx-fp32, onnx-int4, " +
		"gptq-w4a16, awq-w4a16, trtllm-int4, nvfp4."
}

// EstimateWeightsGB is the size of params weights stored in f.
func EstimateWeightsGB(params int64, f Format) float64 {
	return float64(params) * f.BitsPerWeight / 8 / 1e9
}

func round2(x float64) float64 {
	return float64(int64(x*100+0.5)) / 100
}
