// Package report holds the reports of the Core ML family's helper scripts,
// one named type per helper, decoded strictly (steps.ReadReport) by the
// kinds and written by the stand-ins; python/reports/ has a golden of each.
package report

// Convert is coreml_convert.py's report: the package it saved and how.
type Convert struct {
	// KVCache is stateful or none; KVCacheReason says why (a stateful
	// conversion that failed falls back to none, and says so).
	KVCache       string   `json:"kv_cache"`
	KVCacheReason string   `json:"kv_cache_reason"`
	Context       int      `json:"context"`
	Inputs        []string `json:"inputs"`
	Outputs       []string `json:"outputs"`
	ConvertS      float64  `json:"convert_s"`
	QuantizeS     float64  `json:"quantize_s"`
	Mode          string   `json:"mode"`
	// KeptFP16 names the vocabulary-sized weights left in fp16.
	KeptFP16 []string `json:"kept_fp16"`
	// EightBit counts the v_proj and down_proj weights stored at 8 bits.
	EightBit int `json:"eight_bit"`
	// SlidingWindow is the window of the sliding-attention layers, which
	// read the sliding_mask input; null when the model has none or the
	// context does not reach past it.
	SlidingWindow *int   `json:"sliding_window"`
	CoreMLTools   string `json:"coremltools"`
	Torch         string `json:"torch"`
}

// Check is one of coreml_validate.py's checks.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Validate is coreml_validate.py's report: the package's structural
// checks and the perplexity of its own weights in PyTorch against the
// unconverted model, on the same tokens.
type Validate struct {
	Checks      []Check `json:"checks"`
	PPL         float64 `json:"ppl"`
	BaselinePPL float64 `json:"baseline_ppl"`
	// CoreMLPPL is Core ML's own perplexity, null unless it ran (macOS).
	CoreMLPPL *float64 `json:"coreml_ppl"`
	// KLDivergence and Top1Agreement compare the simulated INT4 model
	// with the unconverted model's top tokens (the helper's own baseline);
	// the CoreML ones Core ML's, null unless it ran.
	KLDivergence        *float64 `json:"kl_divergence"`
	Top1Agreement       *float64 `json:"top1_agreement"`
	CoreMLKLDivergence  *float64 `json:"coreml_kl_divergence"`
	CoreMLTop1Agreement *float64 `json:"coreml_top1_agreement"`
	Chunks              int      `json:"chunks"`
	Ctx                 int      `json:"ctx"`
	Scored              int      `json:"scored"`
	// Compute and Simulated say in words how PPL was computed.
	Compute          string   `json:"compute"`
	Simulated        string   `json:"simulated"`
	QuantizedWeights int      `json:"quantized_weights"`
	EightBitWeights  int      `json:"eight_bit_weights"`
	BlockSize        int      `json:"block_size"`
	Mode             string   `json:"mode"`
	KeptFP16         []string `json:"kept_fp16"`
	PackageBytes     int64    `json:"package_bytes"`
	RanCoreML        bool     `json:"ran_coreml"`
	// CoreMLReason says why Core ML did not run ("" when it did).
	CoreMLReason string `json:"coreml_reason"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"coreml_convert.py":  func() any { return &Convert{} },
	"coreml_validate.py": func() any { return &Validate{} },
}
