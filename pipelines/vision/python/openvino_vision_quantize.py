"""Static INT8 post-training quantization of an fp32 ONNX classifier with NNCF, saved as OpenVINO IR.

    python openvino_vision_quantize.py --in MODEL.onnx --calibration IMAGES.npz --out DIR
        [--preset performance|mixed] [--fast-bias-correction] [--overflow-fix enable|first_layer|disable]
        [--samples N] [--keep-stem]

The input is the vision export (vision_export.py: the fp32 graph already checked against PyTorch,
TensorFlow "same" padding written as constant Pads, a dynamic batch axis); ov.convert_model reads it
with OpenVINO's own ONNX frontend. nncf.quantize inserts FakeQuantize on the activations and the
weights of every Convolution, GroupConvolution and MatMul, with ranges calibrated on the calibration
set's images, preprocessed by the model's config.json exactly as every other runtime preprocesses
them (one image per batch; every image unless --samples caps them). NNCF's knobs:

  --preset               performance: symmetric activations; mixed: asymmetric activations (a zero
                         point, for inputs that are not centred), symmetric weights either way.
  --fast-bias-correction NNCF's fast bias correction (its default) instead of the full one.
  --overflow-fix         enable: 7-bit weights in every layer, so the u8 x s8 multiply-adds of CPUs
                         without VNNI (AVX2, AVX-512 without VNNI) cannot saturate; first_layer (NNCF's
                         default): only the first; disable: none (VNNI, AMX and the NPU do not saturate).
  --keep-stem            the Convolution that reads the image (directly or through a Pad) stays float.

The IR is saved uncompressed (compress_to_fp16=False: a float stem stays fp32), with config.json beside
it. Then it is read back and counted: FakeQuantize nodes, int8 weight constants, and for each
Convolution / GroupConvolution / MatMul whether its weight comes from an int8 constant; and compiled on
the CPU plugin, whose execution graph says the precision each convolution runs in here.

Prints one JSON line, report() below (reports/openvino_vision_quantize.json): {"model", "files",
"fake_quantize", "int8_weight_constants", "weights", "convolutions", "int8_convolutions",
"float_convolutions", "kept_float", "executed", "calibration_images", "preset", "fast_bias_correction",
"overflow_fix", "bytes", "versions"}.
"""

import argparse
import os
import shutil

import numpy as np

import edgepipe_report
import openvino_census
import vision_data

WEIGHTED = ("Convolution", "GroupConvolution", "MatMul")
# Ops between an int8 weight constant and the layer: the dequantization NNCF writes
# (Convert, Subtract the zero point, Multiply by the scale) and shape moves.
DEQUANT_PATH = ("Convert", "Subtract", "Multiply", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "FakeQuantize")
# Ops that only move or pad the image: a convolution behind them still reads it.
PASS_THROUGH = ("Pad", "Convert", "Reshape")


def source(port):
    return port.get_source_output().get_node()


def weight_constant(op):
    """The Constant a layer's weight (input 1) is computed from, through dequantization, or None."""
    node = source(op.input(1))
    for _ in range(8):
        if node.get_type_name() == "Constant":
            return node
        if node.get_type_name() not in DEQUANT_PATH:
            return None
        node = source(node.input(0))
    return None


def stem(model):
    """Friendly names of the convolutions that read the model's input, directly or through a Pad."""
    out = []
    for op in model.get_ordered_ops():
        if op.get_type_name() not in ("Convolution", "GroupConvolution"):
            continue
        node = source(op.input(0))
        while node.get_type_name() in PASS_THROUGH:
            node = source(node.input(0))
        if node.get_type_name() == "Parameter":
            out.append(op.get_friendly_name())
    return out


def census(model):
    """What the IR holds: FakeQuantize nodes, int8 weight constants, and each weighted layer's weight type."""
    fq, layers, int8_layers, float_layers = 0, 0, 0, []
    int8_consts = 0
    for op in model.get_ordered_ops():
        t = op.get_type_name()
        if t == "FakeQuantize":
            fq += 1
        elif t == "Constant" and op.get_element_type().get_type_name() in ("i8", "u8") \
                and int(np.prod(list(op.get_output_shape(0)))) > 1:
            int8_consts += 1
        elif t in WEIGHTED:
            c = weight_constant(op)
            if c is None and t == "MatMul":
                continue  # two activations multiplied (attention): no weight
            layers += 1
            if c is not None and c.get_element_type().get_type_name() in ("i8", "u8"):
                int8_layers += 1
            else:
                float_layers.append(op.get_friendly_name())
    return {"fake_quantize": fq, "int8_weight_constants": int8_consts, "convolutions": layers,
            "int8_convolutions": int8_layers, "float_convolutions": float_layers}


def executed(compiled):
    """Convolution layers of the CPU plugin's execution graph, by the precision they run in."""
    out = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        if layer not in ("Convolution", "GroupConvolution", "FullyConnected", "MatMul"):
            continue
        prec = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else "unknown"
        key = f"{layer}:{prec}"
        out[key] = out.get(key, 0) + 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="inp", required=True, help="the fp32 ONNX export (config.json beside it)")
    ap.add_argument("--calibration", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", default="performance", choices=["performance", "mixed"])
    ap.add_argument("--fast-bias-correction", action="store_true")
    ap.add_argument("--overflow-fix", default="first_layer", choices=["enable", "first_layer", "disable"])
    ap.add_argument("--samples", type=int, default=0)
    ap.add_argument("--keep-stem", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    import nncf
    import openvino as ov
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

    cfg = vision_data.read_config(os.path.dirname(args.inp))
    images, _ = vision_data.load_set(args.calibration)
    if args.samples > 0:
        images = images[: args.samples]
    if len(images) == 0:
        raise SystemExit(f"{args.calibration}: no calibration images")
    x = vision_data.preprocess(images, cfg)

    model = ov.convert_model(args.inp)
    if len(model.inputs) != 1 or not model.inputs[0].get_partial_shape()[0].is_dynamic:
        raise SystemExit(f"{args.inp}: want one input with a dynamic batch axis, got "
                         f"{[str(i.get_partial_shape()) for i in model.inputs]}")
    keep = stem(model) if args.keep_stem else []
    if args.keep_stem and not keep:
        raise SystemExit("--keep-stem: no convolution reads the model's input")
    overflow = {"enable": OverflowFix.ENABLE, "first_layer": OverflowFix.FIRST_LAYER, "disable": OverflowFix.DISABLE}
    preset = {"performance": nncf.QuantizationPreset.PERFORMANCE, "mixed": nncf.QuantizationPreset.MIXED}
    quantized = nncf.quantize(
        model, nncf.Dataset([x[i:i + 1] for i in range(len(x))]), preset=preset[args.preset],
        subset_size=len(x), fast_bias_correction=args.fast_bias_correction,
        ignored_scope=nncf.IgnoredScope(names=keep) if keep else None,
        advanced_parameters=AdvancedQuantizationParameters(overflow_fix=overflow[args.overflow_fix]))

    os.makedirs(args.out, exist_ok=True)
    xml = os.path.join(args.out, "model.xml")
    ov.save_model(quantized, xml, compress_to_fp16=False)
    shutil.copyfile(os.path.join(os.path.dirname(args.inp), "config.json"), os.path.join(args.out, "config.json"))

    core = ov.Core()
    back = core.read_model(xml)
    props = {"INFERENCE_PRECISION_HINT": "f32"}
    if args.threads > 0:
        props["INFERENCE_NUM_THREADS"] = args.threads
    edgepipe_report.emit(report(args, census(back), executed(core.compile_model(back, "CPU", props)),
                                openvino_census.weight_census(back), keep, len(x),
                                os.path.getsize(xml) + os.path.getsize(xml[:-4] + ".bin")))
    return 0


def report(args, c, layers, weights, keep, calibration_images, size):
    """c: census() of the IR read back; layers: executed(), what the CPU plugin compiled of it."""
    return {"model": "model.xml", "files": sorted(os.listdir(args.out)),
            "fake_quantize": c["fake_quantize"], "int8_weight_constants": c["int8_weight_constants"],
            "convolutions": c["convolutions"], "int8_convolutions": c["int8_convolutions"],
            "float_convolutions": c["float_convolutions"], "executed": layers,
            "weights": weights, "kept_float": keep,
            "calibration_images": int(calibration_images), "preset": args.preset,
            "fast_bias_correction": args.fast_bias_correction, "overflow_fix": args.overflow_fix,
            "bytes": size,
            "versions": {k: v for k, v in openvino_census.versions().items() if k in ("openvino", "nncf", "torch")}}


if __name__ == "__main__":
    raise SystemExit(main())
