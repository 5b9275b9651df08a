// Package report holds the reports of the onnx family's helper scripts,
// one named type per helper, decoded strictly (steps.ReadReport) by the
// kinds and written by the stand-ins; python/reports/ has a golden of
// each. The decode helper's report is every decode helper's
// (pipelines/shared/report.Decode).
package report

import shared "github.com/edgepipe/edgepipe/pipelines/shared/report"

// Export is onnx_export.py's report: the graph optimum-onnx wrote, read
// back from the file.
type Export struct {
	Model string `json:"model"`
	Opset int    `json:"opset"`
	// Inputs and Outputs leave out the per-layer past_key_values.N and
	// present.N tensors; KVLayers counts the layers that have them.
	Inputs   []string `json:"inputs"`
	Outputs  []string `json:"outputs"`
	KVLayers int      `json:"kv_layers"`
	// KVCache is what was asked for (not --no-past).
	KVCache bool     `json:"kv_cache"`
	Files   []string `json:"files"`
	Bytes   int64    `json:"bytes"`
}

// Quantize is onnx_quantize.py's report: what the MatMulNBits model holds.
type Quantize struct {
	Model       string `json:"model"`
	Method      string `json:"method"`
	BlockSize   int    `json:"block_size"`
	Symmetric   bool   `json:"symmetric"`
	MatMulNBits int    `json:"matmulnbits"`
	// MatMulFloat counts the MatMuls with constant weights left in float.
	MatMulFloat int      `json:"matmul_float"`
	KeptFP32    []string `json:"kept_fp32"`
	// PaddedK are the K widths the block does not divide.
	PaddedK []int `json:"padded_k"`
	Bytes   int64 `json:"bytes"`
	// LMHeadBits is what the output projection became: 4 or 8, 32 for
	// float; null when the graph has none.
	LMHeadBits *int `json:"lm_head_bits"`
	// LMHeadTied: float because its weight is the tied embedding's table,
	// read through a Transpose.
	LMHeadTied bool `json:"lm_head_tied"`
	// EightBitLayers counts the 8-bit MatMulNBits besides the output
	// projection.
	EightBitLayers int `json:"eight_bit_layers"`
}

// LogitsCheck is logits_check.py's comparison of a converted model's
// first chunk with PyTorch's; null where no check ran.
type LogitsCheck struct {
	MaxAbs    *float64 `json:"max_abs_logit_diff"`
	MeanAbs   *float64 `json:"mean_abs_logit_diff"`
	Top1      *float64 `json:"top1_agreement"`
	Positions *int     `json:"logit_positions"`
}

// Ran reports whether the check ran (every field is there).
func (c LogitsCheck) Ran() bool {
	return c.MaxAbs != nil && c.MeanAbs != nil && c.Top1 != nil && c.Positions != nil
}

// Validate is onnx_validate.py's report: perplexity on ONNX Runtime's CPU
// provider in llama-perplexity's scheme, and the logits check.
type Validate struct {
	PPL       float64  `json:"ppl"`
	Chunks    int      `json:"chunks"`
	Ctx       int      `json:"ctx"`
	Scored    int      `json:"scored"`
	Tokens    int      `json:"tokens"`
	Providers []string `json:"providers"`
	LogitsCheck
	// KLDivergence and BaselineTop1 compare the model with the
	// baseline's top tokens at every scored position (--baseline-scores;
	// null without it). LogitsCheck's Top1 is the first chunk's against
	// PyTorch.
	KLDivergence *float64 `json:"kl_divergence"`
	BaselineTop1 *float64 `json:"baseline_top1_agreement"`
}

// Bench is onnx_bench.py's report: every prompt and decode run's wall
// time in nanoseconds, warm-up runs included.
type Bench struct {
	PromptNS     []float64 `json:"prompt_ns"`
	DecodeNS     []float64 `json:"decode_ns"`
	PromptTokens int       `json:"prompt_tokens"`
	Threads      int       `json:"threads"`
	KVLayers     int       `json:"kv_layers"`
	Providers    []string  `json:"providers"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"onnx_export.py":   func() any { return &Export{} },
	"onnx_quantize.py": func() any { return &Quantize{} },
	"onnx_validate.py": func() any { return &Validate{} },
	"onnx_bench.py":    func() any { return &Bench{} },
	"onnx_decode.py":   func() any { return &shared.Decode{} },
}
