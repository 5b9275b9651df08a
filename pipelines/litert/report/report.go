// Package report holds the reports of the LiteRT helper scripts, one named
// type per helper, decoded strictly (steps.ReadReport) by the kinds that
// run them (the vision family's) and written by their stand-ins;
// python/reports/ has a golden of each. litert_bench.py prints the vision
// bench's protocol line instead (pipelines/vision).
package report

// Tensor is a model input's or output's tensor as the LiteRT interpreter
// describes it: a quantized one has a scale and zero point (0 and 0 when
// it is float).
type Tensor struct {
	Dtype     string  `json:"dtype"`
	Shape     []int   `json:"shape"`
	Scale     float64 `json:"scale"`
	ZeroPoint int     `json:"zero_point"`
}

// NamedTensor is a Tensor with the name the converter gave it.
type NamedTensor struct {
	Name string `json:"name"`
	Tensor
}

// Convert is litert_convert.py's report: the .tflite it wrote, checked by
// loading it with the interpreter.
type Convert struct {
	Model    string      `json:"model"`
	Mode     string      `json:"mode"`
	Bytes    int64       `json:"bytes"`
	ConvertS float64     `json:"convert_s"`
	Input    NamedTensor `json:"input"`
	Output   NamedTensor `json:"output"`
	// Tensors counts the model's tensors by dtype, Ops its operators by
	// name, Weights the weight operands of its convolutions and
	// fully-connected layers by dtype.
	Tensors map[string]int `json:"tensors"`
	Ops     map[string]int `json:"ops"`
	Weights map[string]int `json:"weights"`
	// CalibrationSamples is 0 for fp32.
	CalibrationSamples int  `json:"calibration_samples"`
	PerChannel         bool `json:"per_channel"`
	// Versions of litert-torch, ai-edge-litert, torch and torchvision.
	Versions map[string]string `json:"versions"`
}

// Validate is litert_validate.py's report: the .tflite scored with the
// interpreter on a set of images.
type Validate struct {
	Model   string `json:"model"`
	Samples int    `json:"samples"`
	Input   Tensor `json:"input"`
	Output  Tensor `json:"output"`
	// Top1 and Correct are null when the set has no labels.
	Top1     *float64 `json:"top1"`
	Correct  *int     `json:"correct"`
	Labelled bool     `json:"labelled"`
	// Reference is null without --reference.
	Reference  *Reference `json:"reference"`
	Seconds    float64    `json:"seconds"`
	MSPerImage float64    `json:"ms_per_image"`
	// AIEdgeLiteRT is the interpreter's version.
	AIEdgeLiteRT string `json:"ai_edge_litert"`
}

// Reference compares the model with the reference's outputs on the same
// images: how often their top-1 agree, and with labels the reference's
// top-1 and the drop from it; MaxAbsLogitDiff only when the reference
// gave logits, not classes.
type Reference struct {
	Agreement       float64  `json:"agreement"`
	Top1            *float64 `json:"top1"`
	Drop            *float64 `json:"drop"`
	MaxAbsLogitDiff *float64 `json:"max_abs_logit_diff"`
}

// Types maps each helper to a new value of its report type.
var Types = map[string]func() any{
	"litert_convert.py":  func() any { return &Convert{} },
	"litert_validate.py": func() any { return &Validate{} },
}
