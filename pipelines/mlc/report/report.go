// Package report holds the reports of the MLC family's helper scripts,
// one named type per helper, decoded strictly (steps.ReadReport) by the
// kinds and written by the stand-ins; python/reports/ has a golden of each.
// mlc_decode.py's is every decode helper's (pipelines/shared/report.Decode).
package report

import shared "github.com/edgepipe/edgepipe/pipelines/shared/report"

// Native is mlc_native.py's report. The script has two subcommands; the
// one that ran fills its field and leaves the other null. (The golden
// fills both, so that both shapes are checked against the writer.)
type Native struct {
	ConvertWeight *NativeConvert   `json:"convert_weight"`
	GenConfig     *NativeGenConfig `json:"gen_config"`
}

// NativeConvert is what mlc_native.py convert-weight wrote: the weights
// of an MLC folder and how they were rounded.
type NativeConvert struct {
	Quantization string `json:"quantization"`
	Scales       string `json:"scales"`
	Rounding     string `json:"rounding"`
	// CalibrationTokens is 0 without --scales imatrix.
	CalibrationTokens int `json:"calibration_tokens"`
	// EmbeddingRounding and LinearRounding say how the embedding and the
	// linear layers were really rounded (gptq or rtn, with why).
	EmbeddingRounding string `json:"embedding_rounding"`
	LinearRounding    string `json:"linear_rounding"`
	// SinkShare is the weight of each calibration window's first token in
	// q/k/v's Hessian (0 without GPTQ).
	SinkShare float64 `json:"sink_share"`
	// AWQ is mlc_awq's summary by layer kind (qkv_proj, o_proj,
	// gate_up_proj, down_proj); null without --awq on.
	AWQ          map[string]AWQKind `json:"awq"`
	Shards       int                `json:"shards"`
	Params       int                `json:"params"`
	ParamBytes   float64            `json:"param_bytes"`
	TotalParams  int64              `json:"total_params"`
	BitsPerParam float64            `json:"bits_per_param"`
	Torch        string             `json:"torch"`
}

// AWQKind is AWQ's outcome on one kind of linear layer, over the layers.
type AWQKind struct {
	MeanAlpha float64 `json:"mean_alpha"`
	// OutputError is the rescaled layers' summed output error on the
	// calibration activations, OutputErrorUnscaled the same without AWQ.
	OutputError         float64 `json:"output_error"`
	OutputErrorUnscaled float64 `json:"output_error_unscaled"`
}

// NativeGenConfig is what mlc_native.py gen-config wrote.
type NativeGenConfig struct {
	ContextWindowSize int      `json:"context_window_size"`
	TokenizerFiles    []string `json:"tokenizer_files"`
	ConvTemplate      string   `json:"conv_template"`
}

// Gate is mlc_gate.py's report: the perplexity of the MLC shards read
// back and dequantized into the unconverted model.
type Gate struct {
	PPL    float64 `json:"ppl"`
	Chunks int     `json:"chunks"`
	Ctx    int     `json:"ctx"`
	Scored int     `json:"scored"`
	// Tensors is how many tensors were decoded; DecodedSHA256 digests
	// their digests (the file the gate writes with --digests).
	Tensors       int    `json:"tensors"`
	DecodedSHA256 string `json:"decoded_sha256"`
	// ParamBytes is tensor-cache.json's metadata, null when it has none.
	ParamBytes *float64 `json:"param_bytes"`
	Compute    string   `json:"compute"`
	// FloatFromCheckpoint lists the parameters a diagnostic run kept from
	// the checkpoint (--float); the gate step passes none.
	FloatFromCheckpoint []string `json:"float_from_checkpoint"`
	Torch               string   `json:"torch"`
	// KLDivergence and Top1Agreement compare the model with the
	// baseline's top tokens at every scored position (--baseline-scores;
	// null without it).
	KLDivergence  *float64 `json:"kl_divergence"`
	Top1Agreement *float64 `json:"top1_agreement"`
}

// Digests is the file mlc_gate.py writes with --digests: the sha256 of
// every tensor decoded to little-endian float32, by name, which the
// WebGPU check's browser must reproduce.
type Digests struct {
	Format  string            `json:"format"`
	Tensors map[string]string `json:"tensors"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"mlc_native.py": func() any { return &Native{} },
	"mlc_gate.py":   func() any { return &Gate{} },
	"mlc_decode.py": func() any { return &shared.Decode{} },
}
