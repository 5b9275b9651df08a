package vision

import (
	"regexp"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

// ExportOptions are onnx-fp32's options (and the export's, under
// onnx-int8).
type ExportOptions struct {
	Opset *int `yaml:"opset" min:"13" doc:"The ONNX opset of the export (default 18; at least 13, which per-channel QuantizeLinear needs)."`
}

// Int8Options are onnx-int8's options.
type Int8Options struct {
	ExportOptions     `yaml:",inline"`
	CalibrationMethod *string `yaml:"calibration_method" enum:"minmax,entropy,percentile" doc:"How ONNX Runtime picks activation ranges from the calibration images: minmax (the default), entropy or percentile."`
	PerChannel        *bool   `yaml:"per_channel" doc:"One int8 scale per output channel of each weight (default true); false: one per tensor."`
	Samples           *int    `yaml:"calibration_samples" min:"1" doc:"Calibrate on the first N images of data.calibration (default: every image)."`
	KeepStem          *bool   `yaml:"keep_stem_float" doc:"Leave the stem (the Conv that reads the image) and its input in float (default true: on the built-in model it turns a 3.9-point top-1 drop into 0.56, README)."`
	KeepFloat         *string `yaml:"keep_float" doc:"A regular expression over the ONNX graph's node names (for example /classifier/): the nodes it matches stay in float too (default: none)."`
}

// TFLiteOptions are tflite-int8's options.
type TFLiteOptions struct {
	PerChannel *bool `yaml:"per_channel" doc:"One int8 scale per output channel of each convolution and fully-connected weight (default true); false: one per tensor."`
	Samples    *int  `yaml:"calibration_samples" min:"1" doc:"Calibrate on the first N images of data.calibration (default: every image)."`
}

// CoreMLOptions are coreml-int8's options.
type CoreMLOptions struct {
	PerChannel *bool `yaml:"per_channel" doc:"One int8 scale per output channel of each convolution and linear weight (default true); false: one per tensor."`
	Samples    *int  `yaml:"calibration_samples" min:"1" doc:"Calibrate the activations on the first N images of data.calibration (default: every image)."`
}

// Defaults of onnx-int8.
const (
	DefaultOpset             = 18
	DefaultCalibrationMethod = "minmax"
)

// CheckOptions refuses a keep_float that is not a regular expression.
func (o *Int8Options) CheckOptions() []recipe.OptionProblem {
	if o.KeepFloat != nil {
		if _, err := regexp.Compile(*o.KeepFloat); err != nil {
			return []recipe.OptionProblem{{Key: "keep_float", Msg: "is not a regular expression: " + err.Error(),
				Hint: "write a Go/Python regular expression over node names, for example /classifier/"}}
		}
	}
	return nil
}

func options(format string) any {
	switch format {
	case FormatInt8:
		return &Int8Options{}
	case FormatTFLiteInt8:
		return &TFLiteOptions{}
	case FormatCoreMLInt8:
		return &CoreMLOptions{}
	case FormatQNNInt8:
		return &QNNOptions{}
	}
	return &ExportOptions{}
}

func exportOptions(t *recipe.Target) *ExportOptions {
	switch o := t.Options.(type) {
	case *ExportOptions:
		return o
	case *Int8Options:
		return &o.ExportOptions
	case *QNNOptions:
		return &o.ExportOptions
	}
	return &ExportOptions{}
}
