// Package report holds the reports of the openvino family's helper
// scripts, one named type per helper, decoded strictly (steps.ReadReport)
// by the kinds and written by the stand-ins; python/reports/ has a golden
// of each. The decode helper's report is every decode helper's
// (pipelines/shared/report.Decode).
package report

import shared "github.com/edgepipe/edgepipe/pipelines/shared/report"

// IR is what openvino_census.py's describe() reads back from an IR: the
// export's report, and the start of the compression's.
type IR struct {
	Model   string   `json:"model"`
	Files   []string `json:"files"`
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	// Weights are the IR's large constants by element type (f32, u4, u8...).
	Weights map[string]WeightCensus `json:"weights"`
	// LowBitFraction is the share of those elements in 8 bits or fewer.
	LowBitFraction float64 `json:"low_bit_fraction"`
	// Stateful: the KV cache lives in the model's state.
	Stateful bool              `json:"stateful"`
	Versions map[string]string `json:"versions"`
}

// WeightCensus counts an element type's constants.
type WeightCensus struct {
	Constants int   `json:"constants"`
	Elements  int64 `json:"elements"`
	Bytes     int64 `json:"bytes"`
}

// Export is openvino_export.py's report.
type Export struct {
	IR
}

// Quantize is openvino_quantize.py's report: the compressed IR, the
// OVWeightQuantizationConfig settings it was compressed with (less the
// calibration strings) and the calibration pieces it got.
type Quantize struct {
	IR
	Config             map[string]any `json:"config"`
	CalibrationSamples int            `json:"calibration_samples"`
}

// Validate is openvino_validate.py's report: perplexity on OpenVINO's CPU
// plugin in llama-perplexity's scheme, and the logits check.
type Validate struct {
	PPL                float64 `json:"ppl"`
	Chunks             int     `json:"chunks"`
	Ctx                int     `json:"ctx"`
	Scored             int     `json:"scored"`
	Tokens             int     `json:"tokens"`
	Device             string  `json:"device"`
	InferencePrecision string  `json:"inference_precision"`
	OpenVINO           string  `json:"openvino"`
	LogitsCheck
	// KLDivergence and BaselineTop1 compare the model with the
	// baseline's top tokens at every scored position (--baseline-scores;
	// null without it). LogitsCheck's Top1 is the first chunk's against
	// PyTorch.
	KLDivergence *float64 `json:"kl_divergence"`
	BaselineTop1 *float64 `json:"baseline_top1_agreement"`
}

// LogitsCheck is logits_check.py's comparison of a converted model's
// first chunk with PyTorch's; null where no check ran
// (--no-logits-check).
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

// Bench is openvino_bench.py's report: every prompt and decode run's wall
// time in nanoseconds, warm-up runs included.
type Bench struct {
	PromptNS           []float64 `json:"prompt_ns"`
	DecodeNS           []float64 `json:"decode_ns"`
	PromptTokens       int       `json:"prompt_tokens"`
	Threads            int       `json:"threads"`
	Device             string    `json:"device"`
	InferencePrecision string    `json:"inference_precision"`
	OpenVINO           string    `json:"openvino"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"openvino_export.py":   func() any { return &Export{} },
	"openvino_quantize.py": func() any { return &Quantize{} },
	"openvino_validate.py": func() any { return &Validate{} },
	"openvino_bench.py":    func() any { return &Bench{} },
	"openvino_decode.py":   func() any { return &shared.Decode{} },
}
