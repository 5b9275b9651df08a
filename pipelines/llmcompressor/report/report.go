// Package report holds the reports of the llmcompressor family's helper
// scripts, decoded strictly (steps.ReadReport) by the kinds and written by
// the stand-ins; python/reports/ has a golden of each. llmc_perplexity.py
// is hf_perplexity.py run in this toolchain: its report is the shared
// kinds' (pipelines/shared/report.Perplexity); llmc_decode.py's is every
// decode helper's (pipelines/shared/report.Decode).
package report

import shared "github.com/edgepipe/edgepipe/pipelines/shared/report"

// Quantize is llmc_quantize.py's report: the oneshot run's settings, what
// it calibrated on and what it quantized.
type Quantize struct {
	Scheme    string `json:"scheme"`
	GroupSize int    `json:"group_size"`
	// Samples are the calibration samples used, SeqLen their tokens;
	// CalibrationTokens is the whole text's length.
	Samples           int    `json:"samples"`
	SeqLen            int    `json:"seq_len"`
	CalibrationTokens int    `json:"calibration_tokens"`
	Symmetric         bool   `json:"symmetric"`
	Observer          string `json:"observer"`
	// ActOrder is GPTQ's column order (null when GPTQ does not round);
	// Rounding and NGrid are AWQ's (null for GPTQ).
	ActOrder *string `json:"actorder"`
	Rounding *string `json:"rounding"`
	NGrid    *int    `json:"n_grid"`
	// QuantizedLinears counts the Linear layers quantized (all but
	// lm_head), EightBitLinears those at 8 bits.
	QuantizedLinears int `json:"quantized_linears"`
	EightBitLinears  int `json:"eight_bit_linears"`
	// Format is the saved quantization_config's (pack-quantized); null
	// when it names none.
	Format   *string           `json:"format"`
	Seconds  float64           `json:"seconds"`
	Versions map[string]string `json:"versions"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"llmc_quantize.py": func() any { return &Quantize{} },
	"llmc_decode.py":   func() any { return &shared.Decode{} },
}
