// Package report holds the reports of the QNN family's helper scripts,
// one named type per helper, decoded strictly (steps.ReadReport) by the
// kinds and written by the stand-ins; python/reports/ has a golden of each.
package report

// QDQ is qnn_qdq.py's report: what the quantized graph holds.
type QDQ struct {
	Model          string `json:"model"`
	SeqLen         int    `json:"seq_len"`
	Samples        int    `json:"samples"`
	WeightType     string `json:"weight_type"`
	ActivationType string `json:"activation_type"`
	QuantizeLinear int    `json:"quantize_linear"`
	// DequantizeLinear counts the graph's DequantizeLinear nodes: none
	// means nothing was quantized.
	DequantizeLinear int `json:"dequantize_linear"`
	// Preprocessed: qnn_preprocess_model rewrote the graph.
	Preprocessed bool `json:"preprocessed"`
	// MaskConstants counts the -inf constants set to the mask value.
	MaskConstants int `json:"mask_constants"`
	// FloatNodes counts the RMSNorm statistics nodes left in float.
	FloatNodes int `json:"float_nodes"`
	// StaticInputs are the inputs folded into constants.
	StaticInputs    []string `json:"static_inputs"`
	PerChannelConvs int      `json:"per_channel_convs"`
	RMSNorms        int      `json:"rms_norms"`
	Bytes           int64    `json:"bytes"`
}

// AIHub is qnn_ai_hub.py's report: the Qualcomm AI Hub compile job that
// made the context binary.
type AIHub struct {
	JobID         string `json:"job_id"`
	TargetRuntime string `json:"target_runtime"`
	Device        string `json:"device"`
	Status        string `json:"status"`
}

// HTP is qnn_htp.py's report: the EPContext model and context binary QNN's
// HTP backend compiled, and the gate on its simulator (null when run with
// --compile-only).
type HTP struct {
	Model         string  `json:"model"`
	ContextBinary string  `json:"context_binary"`
	CompileS      float64 `json:"compile_s"`
	QNNVersion    string  `json:"qnn_version"`
	ORTQNN        string  `json:"onnxruntime_qnn"`
	ORT           string  `json:"onnxruntime"`
	SoCModel      int     `json:"soc_model"`
	HTPArch       int     `json:"htp_arch"`
	Gate          *Gate   `json:"gate"`
}

// Gate is what the HTP simulator measured: perplexity in llama-perplexity's
// scheme and the logits check on the first chunk.
type Gate struct {
	PPL             float64  `json:"ppl"`
	Chunks          int      `json:"chunks"`
	Ctx             int      `json:"ctx"`
	Scored          int      `json:"scored"`
	Tokens          int      `json:"tokens"`
	LoadS           float64  `json:"load_s"`
	SecondsPerChunk float64  `json:"seconds_per_chunk"`
	RanOn           string   `json:"ran_on"`
	Providers       []string `json:"providers"`
	LogitsCheck
	// KLDivergence and BaselineTop1 compare the model with the
	// baseline's top tokens at every scored position (--baseline-scores;
	// null without it). LogitsCheck's Top1 is the first chunk's against
	// PyTorch.
	KLDivergence *float64 `json:"kl_divergence"`
	BaselineTop1 *float64 `json:"baseline_top1_agreement"`
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

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"qnn_qdq.py":    func() any { return &QDQ{} },
	"qnn_ai_hub.py": func() any { return &AIHub{} },
	"qnn_htp.py":    func() any { return &HTP{} },
}
