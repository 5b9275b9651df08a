"""Convert an image classifier to a Core ML ML program: FP32, or W8A8 (INT8 weights and activations).

    python coreml_vision_convert.py --model DIR --out OUT.mlpackage --mode fp32|int8
        [--calibration SET.npz] [--samples N] [--per-tensor] [--keep-stem] [--activations symmetric|affine]

--model is an edgepipe image-classifier folder (model.safetensors + config.json, see
vision_data.py). The package takes one image, "image": a Core ML image input (ct.ImageType, RGB,
config.json's input_size square, batch 1, pixel values 0-255 as Core ML feeds them); the
normalization of config.json ((pixel / 255 - mean) / std per channel) is the first ops of the
program, so the app hands Core ML a resized RGB pixel buffer and nothing else. The output is
"logits" (1, num_classes).

--mode fp32: ct.convert of the traced model, compute precision FLOAT32: the package the MIL
interpreter (coreml_mil.py) is proven on, since its logits can be compared with PyTorch's.

--mode int8: ct.convert with compute precision FLOAT16 (what the Neural Engine computes in),
then W8A8 with coremltools 9.0's two passes:
  * coremltools.optimize.coreml.linear_quantize_activations (experimental.linear_quantize_activations
    is its deprecated alias in 9.0): int8 activations, symmetric, scales from the range each
    activation took on the calibration images (--calibration, preprocessed like every vision
    runtime's input but as 0-255 pixels; --samples: the first N). coremltools gets those ranges
    by running the model with Core ML's runtime, which exists only on Apple's systems: here its
    ModelDebugger.predict_intermediate_outputs is replaced by coreml_mil.py's interpreter
    running the same FP16 program (every intermediate value, as Core ML would return it), and
    its record of each range is replaced by a running min/max over every calibration image
    (coremltools 9.0's record_intermediate_output and _update_tensor_range overwrite the range
    with each image's before comparing, so they keep the last image's range only);
  * coremltools.optimize.coreml.linear_quantize_weights: int8 weights, linear_symmetric, one
    scale per output channel (--per-tensor: one per tensor), every weight of 2048 elements or
    more than --min-weight-elements (below).
--keep-stem leaves the stem (the program's first convolution, the one that reads the normalized
image) in float: no quantize/dequantize on its input, an fp16 weight (as onnx-int8 and
openvino-int8 do by default). --activations affine gives activations a zero point
(OpActivationLinearQuantizerConfig mode "linear": int8 codes over the calibrated [min, max]) instead
of coremltools' symmetric default, which spends half the int8 codes on negative values that a
ReLU's output never takes.
The script refuses (exit 2) a package in which a convolution's weight is not int8 codes
(constexpr_affine_dequantize / constexpr_blockwise_shift_scale of int8 data) or that has no
quantize/dequantize op. --min-weight-elements is the smallest weight quantized (default 0: every
conv and linear weight, where coremltools' own default of 2048 would leave small ones fp16).

The package is saved, then normalized to be bit-identical across conversions (coreml_convert.py's
normalize_package: item UUIDs derived from their paths, no conversion date, deterministic
serialization; the script re-executes itself with PYTHONHASHSEED=0, which coremltools' op names
depend on).

Prints one JSON line, report() below (reports/coreml_vision_convert.json): {"model", "mode",
"bytes", "convert_s", "quantize_s", "ops", "quantize_ops", "dequantize_ops", "int8_weights",
"float_weights", "convs", "int8_convs", "calibration_images", "per_channel", "kept_float",
"activations", "compute_precision", "input", "output", "versions"}.
"""

import argparse
import os
import sys
import time

import edgepipe_env
import edgepipe_report


def fail(msg):
    print(f"coreml_vision_convert: {msg}", file=sys.stderr)
    sys.exit(2)


class Normalized:
    """The classifier behind the app's input: pixels 0-255 -> config.json's normalization."""

    def __new__(cls, model, cfg):
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model
                std = torch.tensor(cfg["std"], dtype=torch.float32).view(1, -1, 1, 1)
                self.register_buffer("mean", torch.tensor(cfg["mean"], dtype=torch.float32).view(1, -1, 1, 1) * 255.0)
                self.register_buffer("inv_std", 1.0 / (std * 255.0))

            def forward(self, image):
                return self.m((image - self.mean) * self.inv_std)

        return Wrapper().eval()


def pixels(images, cfg):
    """uint8 images -> float32 (N, 3, S, S) pixel values 0-255: vision_data.preprocess's
    resizing and channels, without its normalization (the program does that)."""
    import numpy as np
    import vision_data

    n = dict(cfg, mean=[0.0] * cfg["in_channels"], std=[1.0 / 255.0] * cfg["in_channels"])
    return vision_data.preprocess(images, n).astype(np.float32)


def convert(model, cfg, precision):
    import coremltools as ct
    import torch

    size = cfg["input_size"]
    wrapper = Normalized(model, cfg)
    example = torch.zeros(1, cfg["in_channels"], size, size)
    with torch.no_grad():
        traced = torch.jit.trace(wrapper, example, check_trace=False)
    if cfg["in_channels"] != 3:
        fail(f"in_channels {cfg['in_channels']}: a Core ML image input here is RGB (3 channels)")
    return ct.convert(
        traced,
        inputs=[ct.ImageType(name="image", shape=(1, 3, size, size), color_layout=ct.colorlayout.RGB)],
        outputs=[ct.TensorType(name="logits")],
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.iOS17,
        compute_precision=ct.precision.FLOAT32 if precision == "fp32" else ct.precision.FLOAT16,
        skip_model_load=True,
    )


def interpreted_calibration():
    """Make coremltools' activation calibration run on coreml_mil.py's interpreter (see the
    module doc) and keep every image's range."""
    import numpy as np
    from coremltools.optimize.coreml.experimental import _model_debugger, _post_training_quantization

    import coreml_mil

    programs = {}

    def predict_intermediate_outputs(self, inputs, intermediate_output_names, compute_units=None):
        key = id(self)
        if key not in programs:
            programs[key] = coreml_mil.Program(self.model_info.spec, self.weights_dir)
        values = programs[key].run({k: np.asarray(v, dtype=np.float32) for k, v in inputs.items()})
        wanted = set(intermediate_output_names) | {o.name for o in self.model_info.spec.description.output}
        return {k: v for k, v in values.items() if k in wanted and isinstance(v, np.ndarray) and v.dtype.kind == "f"}

    def record(value, name, stats):
        lo, hi = float(np.min(value)), float(np.max(value))
        if "rmin" in stats[name]:
            lo, hi = min(lo, stats[name]["rmin"]), max(hi, stats[name]["rmax"])
        stats[name]["rmin"], stats[name]["rmax"] = lo, hi

    _model_debugger.ModelDebugger.predict_intermediate_outputs = predict_intermediate_outputs
    _model_debugger.ModelDebugger.record_intermediate_output = staticmethod(record)
    _post_training_quantization._update_tensor_range = lambda name, value, stats: record(np.asarray(value), name, stats)


def stem_conv(mlmodel):
    """The name of the program's first conv op: the stem, which reads the normalized image
    (ops are in topological order, so nothing before it is a convolution)."""
    for fn in mlmodel._mil_program.functions.values():
        for op in fn.operations:
            if op.op_type == "conv":
                return op.name
    fail("--keep-stem: the program has no conv op")


def census(mlmodel, kept=()):
    """Ops by type, quantize/dequantize counts, and the dtype of every conv and linear weight
    (the ops in kept may stay float)."""
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load
    from coremltools.converters.mil.mil import types

    spec = mlmodel.get_spec()
    prog = milproto_load(spec, specification_version=spec.specificationVersion, file_weights_dir=mlmodel.weights_dir)
    ops, convs, int8_convs, int8_weights, float_weights, bad = {}, 0, 0, 0, 0, []
    for fn in prog.functions.values():
        for op in fn.operations:
            ops[op.op_type] = ops.get(op.op_type, 0) + 1
            if op.op_type not in ("conv", "linear"):
                continue
            w = op.weight.op
            codes = None
            if w.op_type == "constexpr_affine_dequantize":
                codes = w.quantized_data
            elif w.op_type == "constexpr_blockwise_shift_scale":
                codes = w.data
            dtype = types.builtin_to_string(codes.dtype) if codes is not None else types.builtin_to_string(op.weight.dtype)
            if op.op_type == "conv":
                convs += 1
            if dtype == "int8":
                int8_weights += 1
                int8_convs += op.op_type == "conv"
            else:
                float_weights += 1
                if op.op_type == "conv" and op.name not in kept:
                    bad.append(f"{op.name}: {w.op_type} {dtype} {tuple(op.weight.shape)}")
    return {"ops": dict(sorted(ops.items())), "quantize_ops": ops.get("quantize", 0),
            "dequantize_ops": ops.get("dequantize", 0), "int8_weights": int8_weights, "float_weights": float_weights,
            "convs": convs, "int8_convs": int8_convs}, bad


def package_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # coremltools names ops from Python's hash of its objects: a fixed seed makes the names,
        # and so the package's bytes, the same on every run.
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=("fp32", "int8"), required=True)
    ap.add_argument("--calibration")
    ap.add_argument("--samples", type=int, default=0)
    ap.add_argument("--per-tensor", action="store_true")
    ap.add_argument("--keep-stem", action="store_true", help="int8: the first convolution stays float")
    ap.add_argument("--activations", choices=("symmetric", "affine"), default="symmetric",
                    help="int8: activations without (symmetric) or with (affine) a zero point")
    ap.add_argument("--min-weight-elements", type=int, default=0,
                    help="int8: quantize weights of at least this many elements (coremltools' default is 2048)")
    args = ap.parse_args()
    if args.mode == "int8" and not args.calibration:
        fail("--mode int8 needs --calibration SET.npz (the activations' ranges are calibrated)")
    if args.mode == "fp32" and (args.calibration or args.per_tensor or args.keep_stem or args.activations != "symmetric"):
        fail("--calibration, --per-tensor, --keep-stem and --activations are for --mode int8")

    import numpy as np
    import torch

    import vision_data
    from coreml_convert import normalize_package

    torch.set_num_threads(edgepipe_env.threads())
    model, cfg = vision_data.load_model(args.model)

    import coremltools as ct
    import coremltools.optimize.coreml as cto

    start = time.monotonic()
    mlmodel = convert(model, cfg, args.mode)
    convert_s = time.monotonic() - start
    quantize_s, n_cal, kept = 0.0, 0, []
    if args.mode == "int8":
        images, _ = vision_data.load_set(args.calibration)
        if args.samples:
            images = images[: args.samples]
        if len(images) == 0:
            fail(f"--calibration {args.calibration}: no images")
        x = pixels(images, cfg)
        n_cal = len(x)
        interpreted_calibration()
        start = time.monotonic()
        kept = [stem_conv(mlmodel)] if args.keep_stem else []
        skip = {name: None for name in kept}
        act = cto.OptimizationConfig(global_config=cto.experimental.OpActivationLinearQuantizerConfig(
            mode="linear" if args.activations == "affine" else "linear_symmetric"), op_name_configs=skip)
        mlmodel = cto.linear_quantize_activations(mlmodel, act, [{"image": x[i:i + 1]} for i in range(len(x))])
        wcfg = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(
            mode="linear_symmetric", dtype="int8", granularity="per_tensor" if args.per_tensor else "per_channel",
            weight_threshold=args.min_weight_elements), op_name_configs=skip)
        mlmodel = cto.linear_quantize_weights(mlmodel, wcfg)
        quantize_s = time.monotonic() - start

    info, bad = census(mlmodel, kept)
    if args.mode == "int8":
        if bad or not info["int8_convs"]:
            fail(f"{len(bad)} of {info['convs']} convolutions kept a float weight (e.g. {'; '.join(bad[:3])}): "
                 "not a W8A8 package")
        if not info["quantize_ops"] or not info["dequantize_ops"]:
            fail(f"no quantize/dequantize ops ({info['ops']}): the activations were not quantized")
    if os.path.exists(args.out):
        import shutil

        shutil.rmtree(args.out)
    mlmodel.save(args.out)
    normalize_package(args.out)
    spec = mlmodel.get_spec()
    edgepipe_report.emit(report(args, convert_s, quantize_s, info, n_cal, kept, spec,
                                (ct.__version__, torch.__version__, np.__version__)))
    return 0


def report(args, convert_s, quantize_s, info, n_cal, kept, spec, versions):
    coremltools_version, torch_version, numpy_version = versions
    return {
        "model": args.out, "mode": args.mode, "bytes": package_bytes(args.out),
        "convert_s": round(convert_s, 2), "quantize_s": round(quantize_s, 2),
        "ops": info["ops"], "quantize_ops": info["quantize_ops"], "dequantize_ops": info["dequantize_ops"],
        "int8_weights": info["int8_weights"], "float_weights": info["float_weights"], "convs": info["convs"],
        "int8_convs": info["int8_convs"],
        "calibration_images": n_cal, "per_channel": args.mode == "int8" and not args.per_tensor,
        "kept_float": kept, "activations": args.activations if args.mode == "int8" else "",
        "compute_precision": "fp32" if args.mode == "fp32" else "fp16",
        "input": {"name": spec.description.input[0].name, "kind": spec.description.input[0].type.WhichOneof("Type")},
        "output": spec.description.output[0].name,
        "versions": {"coremltools": coremltools_version, "torch": torch_version.split("+")[0], "numpy": numpy_version},
    }


if __name__ == "__main__":
    sys.exit(main())
