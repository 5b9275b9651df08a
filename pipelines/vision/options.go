package vision

import (
	"regexp"

	"github.com/edgepipe/edgepipe/internal/plan"
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
	KeepStem          *bool   `yaml:"keep_stem_float" doc:"Leave the stem (the Conv that reads the image) and its input in float (default true: on the built-in model it turns a 3.9-point top-1 drop into 0.56, docs/vision.md)."`
	KeepFloat         *string `yaml:"keep_float" doc:"A regular expression over the ONNX graph's node names (for example /classifier/): the nodes it matches stay in float too (default: none)."`
	ReduceRange       *bool   `yaml:"reduce_range" doc:"7-bit weights (ONNX Runtime's reduce_range), so that the uint8 x int8 multiply-adds of x86 CPUs without VNNI cannot saturate and the score measured on any CPU is the device's (default true for onnx-int8, as openvino-int8's overflow_fix; tensorrt-int8 refuses it: TensorRT computes int8 exactly)."`
}

// TFLiteOptions are tflite-int8's options.
type TFLiteOptions struct {
	PerChannel *bool `yaml:"per_channel" doc:"One int8 scale per output channel of each convolution and fully-connected weight (default true); false: one per tensor."`
	Samples    *int  `yaml:"calibration_samples" min:"1" doc:"Calibrate on the first N images of data.calibration (default: every image)."`
}

// CoreMLOptions are coreml-int8's options.
type CoreMLOptions struct {
	PerChannel  *bool   `yaml:"per_channel" doc:"One int8 scale per output channel of each convolution and linear weight (default true); false: one per tensor."`
	Samples     *int    `yaml:"calibration_samples" min:"1" doc:"Calibrate the activations on the first N images of data.calibration (default: every image)."`
	KeepStem    *bool   `yaml:"keep_stem_float" doc:"Leave the stem (the program's first convolution, which reads the image) and its input in float (default true, as onnx-int8; on the built-in EfficientNet-Lite0 agreement 58.33% against 54.17% with the stem in int8, docs/vision.md)."`
	Activations *string `yaml:"activations" enum:"symmetric,affine" doc:"int8 activations with a zero point (affine, the default: the calibrated [min, max] over all 256 codes; the digits model's drop went from 1.39 to 0.84 points) or without one (symmetric, coremltools' documented default, which leaves half the codes unused after a ReLU)."`
}

// OpenVINOOptions are openvino-int8's options (NNCF's static quantization
// of the fp32 export).
type OpenVINOOptions struct {
	Preset             *string `yaml:"preset" enum:"performance,mixed" doc:"NNCF's quantization preset: mixed (the default: asymmetric activations, symmetric weights) or performance (symmetric both)."`
	FastBiasCorrection *bool   `yaml:"fast_bias_correction" doc:"NNCF's fast bias correction instead of the full one (default false: the full one, which put the built-in digits model within the gate, docs/vision.md)."`
	OverflowFix        *string `yaml:"overflow_fix" enum:"enable,first_layer,disable" doc:"7-bit weights so that the u8 x s8 multiply-adds of CPUs without VNNI cannot saturate: enable (the default: every layer, so the score measured on any CPU is the device's), first_layer (NNCF's default) or disable (for VNNI, AMX and NPU targets only)."`
	Samples            *int    `yaml:"calibration_samples" min:"1" doc:"Calibrate on the first N images of data.calibration (default: every image)."`
	KeepStem           *bool   `yaml:"keep_stem_float" doc:"Leave the stem (the convolution that reads the image) in float (default true, as onnx-int8)."`
}

// TensorRTOptions are tensorrt-int8's options: the QDQ model's (ONNX
// Runtime's static quantizer, with TensorRT's symmetric int8 activations)
// and the engine's batch range.
type TensorRTOptions struct {
	Int8Options `yaml:",inline"`
	OptBatch    *int `yaml:"opt_batch" min:"1" doc:"The batch size TensorRT tunes the engine for (trtexec --optShapes; default 8)."`
	MaxBatch    *int `yaml:"max_batch" min:"1" doc:"The largest batch the engine accepts (trtexec --maxShapes; default 32); the smallest is 1."`
}

// CheckOptions refuses an opt_batch over max_batch, reduce_range, and
// Int8Options' checks.
func (o *TensorRTOptions) CheckOptions() []recipe.OptionProblem {
	out := o.Int8Options.CheckOptions()
	if o.ReduceRange != nil {
		out = append(out, recipe.OptionProblem{Key: "reduce_range", Msg: "does not apply to tensorrt-int8",
			Hint: "remove it: TensorRT's int8 kernels do not saturate, and the gate scores the Q/DQ model exactly (ONNX Runtime's optimizations off)"})
	}
	if plan.Or(o.OptBatch, DefaultOptBatch) > plan.Or(o.MaxBatch, DefaultMaxBatch) {
		out = append(out, recipe.OptionProblem{Key: "opt_batch", Msg: "is larger than max_batch",
			Hint: "TensorRT needs min <= opt <= max: lower opt_batch or raise max_batch"})
	}
	return out
}

// Defaults of openvino-int8 (measured on both built-in models, docs/vision.md)
// and tensorrt-int8's batch range.
const (
	DefaultOVPreset      = "mixed"
	DefaultOVOverflowFix = "enable"
	DefaultOptBatch      = 8
	// coreml-int8's, measured on the digits model (docs/vision.md).
	DefaultCoreMLKeepStem    = true
	DefaultCoreMLActivations = "affine"
	DefaultMaxBatch          = 32
)

// Defaults of onnx-int8.
const (
	DefaultOpset             = 18
	DefaultCalibrationMethod = "minmax"
	DefaultReduceRange       = true
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
	case FormatOpenVINOInt8:
		return &OpenVINOOptions{}
	case FormatTensorRTInt8:
		return &TensorRTOptions{}
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
	case *TensorRTOptions:
		return &o.ExportOptions
	}
	return &ExportOptions{}
}
