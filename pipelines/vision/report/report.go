// Package report holds the reports of the vision family's helper scripts,
// one named type per helper, decoded strictly (steps.ReadReport) by the
// kinds and written by the stand-ins; python/reports/ has a golden of each.
package report

// Export is vision_export.py's report: the fp32 ONNX graph it wrote and
// its check against PyTorch.
type Export struct {
	Model   string   `json:"model"`
	Opset   int      `json:"opset"`
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	// DynamicBatch: the graph's batch axis is symbolic, as edgepipe
	// exports it.
	DynamicBatch bool `json:"dynamic_batch"`
	// MaxAbsLogitDiff is ONNX Runtime against PyTorch over CheckedImages
	// images, run in batches of each of BatchSizes.
	MaxAbsLogitDiff float64 `json:"max_abs_logit_diff"`
	CheckedImages   int     `json:"checked_images"`
	BatchSizes      []int   `json:"batch_sizes"`
	Bytes           int64   `json:"bytes"`
	// StaticSamePads counts the TensorFlow "same" paddings written as
	// constant Pads.
	StaticSamePads int    `json:"static_same_pads"`
	ONNXRuntime    string `json:"onnxruntime"`
}

// Quantize is vision_quantize.py's report: the census of the QDQ model
// ONNX Runtime's static quantizer wrote.
type Quantize struct {
	Model            string `json:"model"`
	QuantizeLinear   int    `json:"quantize_linear"`
	DequantizeLinear int    `json:"dequantize_linear"`
	Int8Initializers int    `json:"int8_initializers"`
	// FloatConvGemm counts Conv, Gemm and MatMul nodes whose weight is not
	// dequantized from int8; KeptFloat the nodes asked to stay float.
	FloatConvGemm        int    `json:"float_conv_gemm"`
	KeptFloat            int    `json:"kept_float"`
	CalibrationImages    int    `json:"calibration_images"`
	Method               string `json:"method"`
	PerChannel           bool   `json:"per_channel"`
	Bytes                int64  `json:"bytes"`
	SymmetricActivations bool   `json:"symmetric_activations"`
	ReduceRange          bool   `json:"reduce_range"`
}

// Eval is vision_eval.py's report, and the part every other scorer of the
// family shares: top-1 over the images scored and agreement with the
// reference's predictions.
type Eval struct {
	// Top1 is null on an unlabelled set (Labelled false).
	Top1     *float64 `json:"top1"`
	Correct  int      `json:"correct"`
	Images   int      `json:"images"`
	Runtime  string   `json:"runtime"`
	Labelled bool     `json:"labelled"`
	// Agreement is null without --reference (the reference scores itself).
	Agreement *float64 `json:"agreement"`
}

// OpenVINOEval is openvino_vision_eval.py's report.
type OpenVINOEval struct {
	Eval
	MSPerImage float64 `json:"ms_per_image"`
}

// InterpreterProof is coreml_vision_eval.py's check of its MIL
// interpreter: the FP32 package interpreted against PyTorch.
type InterpreterProof struct {
	Images          int     `json:"images"`
	MaxAbsLogitDiff float64 `json:"max_abs_logit_diff"`
	Limit           float64 `json:"limit"`
	Passed          bool    `json:"passed"`
}

// CoreMLEval is coreml_vision_eval.py's report: a package scored by
// interpreting its MIL program (Core ML itself never runs).
type CoreMLEval struct {
	Eval
	RanCoreML        bool             `json:"ran_coreml"`
	InterpreterProof InterpreterProof `json:"interpreter_proof"`
	// Ops counts the scored program's ops by type.
	Ops        map[string]int `json:"ops"`
	MSPerImage float64        `json:"ms_per_image"`
}

// CoreMLInput is a Core ML package's input as its spec declares it.
type CoreMLInput struct {
	Name string `json:"name"`
	// Kind is the spec's feature type (imageType for an image input).
	Kind string `json:"kind"`
}

// CoreMLConvert is coreml_vision_convert.py's report: the ML program it
// wrote and its census.
type CoreMLConvert struct {
	Model     string  `json:"model"`
	Mode      string  `json:"mode"`
	Bytes     int64   `json:"bytes"`
	ConvertS  float64 `json:"convert_s"`
	QuantizeS float64 `json:"quantize_s"`
	// Ops counts the program's ops by type.
	Ops               map[string]int `json:"ops"`
	QuantizeOps       int            `json:"quantize_ops"`
	DequantizeOps     int            `json:"dequantize_ops"`
	Int8Weights       int            `json:"int8_weights"`
	FloatWeights      int            `json:"float_weights"`
	Convs             int            `json:"convs"`
	Int8Convs         int            `json:"int8_convs"`
	CalibrationImages int            `json:"calibration_images"`
	PerChannel        bool           `json:"per_channel"`
	// KeptFloat names the convolutions left float on request (the stem);
	// Activations is symmetric or affine in int8 mode, "" in fp32.
	KeptFloat        []string          `json:"kept_float"`
	Activations      string            `json:"activations"`
	ComputePrecision string            `json:"compute_precision"`
	Input            CoreMLInput       `json:"input"`
	Output           string            `json:"output"`
	Versions         map[string]string `json:"versions"`
}

// WeightCensus is one element type's share of an IR's large constants
// (openvino_census.weight_census).
type WeightCensus struct {
	Constants int   `json:"constants"`
	Elements  int64 `json:"elements"`
	Bytes     int64 `json:"bytes"`
}

// OpenVINOQuantize is openvino_vision_quantize.py's report: the census of
// the IR NNCF wrote and what the CPU plugin compiled of it.
type OpenVINOQuantize struct {
	Model               string   `json:"model"`
	Files               []string `json:"files"`
	FakeQuantize        int      `json:"fake_quantize"`
	Int8WeightConstants int      `json:"int8_weight_constants"`
	// Convolutions counts the weighted layers (Convolution,
	// GroupConvolution, MatMul with a weight); FloatConvolutions names
	// those whose weight is not int8, KeptFloat those asked to stay float.
	Convolutions      int      `json:"convolutions"`
	Int8Convolutions  int      `json:"int8_convolutions"`
	FloatConvolutions []string `json:"float_convolutions"`
	KeptFloat         []string `json:"kept_float"`
	// Executed counts the CPU plugin's weighted layers by
	// "LAYER:PRECISION", the precision each runs in on this host.
	Executed           map[string]int          `json:"executed"`
	CalibrationImages  int                     `json:"calibration_images"`
	Preset             string                  `json:"preset"`
	FastBiasCorrection bool                    `json:"fast_bias_correction"`
	OverflowFix        string                  `json:"overflow_fix"`
	Bytes              int64                   `json:"bytes"`
	Weights            map[string]WeightCensus `json:"weights"`
	Versions           map[string]string       `json:"versions"`
}

// Bench is the bench protocol's report (vision_benchlib.py, printed by
// every bench runtime's script: vision_bench.py, openvino_vision_bench.py,
// litert_bench.py): W+R single inferences timed, and the memory figures.
type Bench struct {
	// LatencyNS has the warm-up runs first.
	LatencyNS      []float64 `json:"latency_ns"`
	Batch          int       `json:"batch"`
	Threads        int       `json:"threads"`
	InputShape     []int     `json:"input_shape"`
	InputDtype     string    `json:"input_dtype"`
	RuntimeVersion string    `json:"runtime_version"`
	// PeakRSS is VmHWM; RSSBeforeLoad is read once the runtime is
	// imported, RSSAfterRuns after the last run.
	PeakRSS       int64 `json:"peak_rss_bytes"`
	RSSBeforeLoad int64 `json:"rss_before_load_bytes"`
	RSSAfterRuns  int64 `json:"rss_after_runs_bytes"`
}

// QNN is vision_qnn.py's report: its subcommand's result under the
// subcommand's name, the other two null. (The golden fills all three, so
// that each shape is checked.)
type QNN struct {
	Quantize *QNNQuantize `json:"quantize"`
	Compile  *QNNCompile  `json:"compile"`
	Eval     *QNNEval     `json:"eval"`
}

// QNNQuantize is vision_qnn.py quantize's result: the QDQ model for QNN,
// its batch fixed.
type QNNQuantize struct {
	Model string `json:"model"`
	Input string `json:"input"`
	// Shape is the input's, with FixedDims (the symbolic axes) set to 1.
	Shape             []int    `json:"shape"`
	FixedDims         []string `json:"fixed_dims"`
	QuantizeLinear    int      `json:"quantize_linear"`
	DequantizeLinear  int      `json:"dequantize_linear"`
	Int8Initializers  int      `json:"int8_initializers"`
	FloatConvGemm     int      `json:"float_conv_gemm"`
	PerChannelWeights int      `json:"per_channel_weights"`
	CalibrationImages int      `json:"calibration_images"`
	WeightType        string   `json:"weight_type"`
	ActivationType    string   `json:"activation_type"`
	PerChannel        bool     `json:"per_channel"`
	Bytes             int64    `json:"bytes"`
}

// QNNVersions are what vision_qnn.py's compile and eval ran with.
type QNNVersions struct {
	QNNVersion     string `json:"qnn_version"`
	ONNXRuntimeQNN string `json:"onnxruntime_qnn"`
	ONNXRuntime    string `json:"onnxruntime"`
	SoCModel       int    `json:"soc_model"`
	HTPArch        int    `json:"htp_arch"`
}

// QNNCompile is vision_qnn.py compile's result: the EPContext model and
// its context binary.
type QNNCompile struct {
	Model              string  `json:"model"`
	ContextBinary      string  `json:"context_binary"`
	CompileS           float64 `json:"compile_s"`
	ContextBinaryBytes int64   `json:"context_binary_bytes"`
	EPContextNodes     int     `json:"epcontext_nodes"`
	QNNVersions
}

// QNNEval is vision_qnn.py eval's result: top-1 on the HTP simulator over
// Images of the set's SetImages.
type QNNEval struct {
	Eval
	SetImages int `json:"set_images"`
	// ReferenceTop1 is the reference predictions' top-1 on the images
	// scored; null without --reference or on an unlabelled set.
	ReferenceTop1 *float64 `json:"reference_top1"`
	Providers     []string `json:"providers"`
	LoadS         float64  `json:"load_s"`
	Seconds       float64  `json:"seconds"`
	// MSPerImage is the simulator's on this host, not a device latency.
	MSPerImage float64 `json:"ms_per_image"`
	QNNVersions
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"vision_export.py":            func() any { return &Export{} },
	"vision_quantize.py":          func() any { return &Quantize{} },
	"vision_eval.py":              func() any { return &Eval{} },
	"vision_benchlib.py":          func() any { return &Bench{} },
	"vision_qnn.py":               func() any { return &QNN{} },
	"openvino_vision_quantize.py": func() any { return &OpenVINOQuantize{} },
	"openvino_vision_eval.py":     func() any { return &OpenVINOEval{} },
	"coreml_vision_convert.py":    func() any { return &CoreMLConvert{} },
	"coreml_vision_eval.py":       func() any { return &CoreMLEval{} },
}
