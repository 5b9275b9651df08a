"""Static INT8 quantization of an fp32 ONNX classifier with ONNX Runtime (QDQ format).

    python vision_quantize.py --in MODEL.onnx --calibration IMAGES.npz --out DIR
        [--method minmax|entropy|percentile] [--per-tensor] [--samples N] [--keep-stem] [--keep-float REGEX]
        [--symmetric-activations] [--reduce-range]

onnxruntime.quantization.quant_pre_process (shape inference, graph optimization) then
quantize_static: QuantFormat.QDQ, int8 weights (symmetric, per output channel by
default), uint8 activations calibrated on the calibration set's images (config.json's
preprocessing, one image per batch: the histogram calibrators need equal batches), every
calibration image unless --samples caps them. --keep-stem leaves the Conv that reads the
image (directly or through a Pad) in float (its input is not quantized either); --keep-float the nodes whose names match.
--symmetric-activations makes activations int8 with a zero point of 0 (ActivationSymmetric), as
TensorRT's explicit quantization requires of every Q/DQ pair (TensorRT builds the tensorrt-int8
engine from this model). --reduce-range quantizes weights to 7 bits (quantize_static's
reduce_range): ONNX Runtime's uint8 x int8 convolutions on x86 CPUs without VNNI add pairs of
products in int16 and saturate with 8-bit weights, so the score measured on such a CPU would
not be the device's.

Writes OUT/model.onnx and OUT/config.json; prints one JSON line, report() below
(reports/vision_quantize.json): {"model", "quantize_linear", "dequantize_linear",
"int8_initializers", "float_conv_gemm", "calibration_images", "method", "per_channel",
"kept_float", "bytes", "symmetric_activations", "reduce_range"}.
"""

import argparse
import os
import shutil

import edgepipe_report
import vision_data


# Nodes that only move or pad the image: a Conv behind them still reads it.
PASS_THROUGH = ("Pad", "Identity", "Cast")


def stem_nodes(graph):
    """The Convs that read the graph's input, directly or through Pad (TensorFlow "same"
    padding, as timm's tf_ models export it), and those Pads: all stay float, so the image
    itself is never quantized."""
    feeds = {graph.input[0].name: []}  # tensor -> the pass-through nodes between it and the input
    out = []
    for n in graph.node:  # ONNX nodes are in topological order
        if not n.input or n.input[0] not in feeds:
            continue
        path = feeds[n.input[0]]
        if n.op_type == "Conv":
            out += [p for p in path if p not in out] + [n.name]
        elif n.op_type in PASS_THROUGH:
            for o in n.output:
                feeds[o] = path + [n.name]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--calibration", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--method", default="minmax", choices=["minmax", "entropy", "percentile"])
    ap.add_argument("--per-tensor", action="store_true")
    ap.add_argument("--samples", type=int, default=0)
    ap.add_argument("--keep-float", default="", help="regular expression: nodes whose names match stay in float")
    ap.add_argument("--keep-stem", action="store_true", help="the stem (the Conv that reads the image) stays in float")
    ap.add_argument("--symmetric-activations", action="store_true", help="int8 activations, zero point 0 (TensorRT)")
    ap.add_argument("--reduce-range", action="store_true", help="7-bit weights: no uint8 x int8 saturation without VNNI")
    args = ap.parse_args()

    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    cfg = vision_data.read_config(os.path.dirname(args.inp))
    images, _ = vision_data.load_set(args.calibration)
    if args.samples > 0:
        images = images[: args.samples]
    x = vision_data.preprocess(images, cfg)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([x[i:i + 1] for i in range(len(x))])

        def get_next(self):
            b = next(self.batches, None)
            return None if b is None else {"pixel_values": b}

    os.makedirs(args.out, exist_ok=True)
    pre = os.path.join(args.out, "prep.onnx")
    quant_pre_process(args.inp, pre, skip_symbolic_shape=True)
    path = os.path.join(args.out, "model.onnx")
    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[args.method]
    import re

    graph = onnx.load(pre).graph
    keep = [n.name for n in graph.node if args.keep_float and re.search(args.keep_float, n.name)]
    if args.keep_stem:
        stem = stem_nodes(graph)
        if not stem:
            raise SystemExit("--keep-stem: no Conv reads the graph's input " + graph.input[0].name)
        keep += [s for s in stem if s not in keep]
    quantize_static(pre, path, Reader(), nodes_to_exclude=keep, quant_format=QuantFormat.QDQ, per_channel=not args.per_tensor,
                    activation_type=QuantType.QInt8 if args.symmetric_activations else QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=method, reduce_range=args.reduce_range,
                    extra_options={"WeightSymmetric": True, "ActivationSymmetric": args.symmetric_activations})
    os.remove(pre)
    shutil.copyfile(os.path.join(os.path.dirname(args.inp), "config.json"), os.path.join(args.out, "config.json"))

    m = onnx.load(path)
    ops = [n.op_type for n in m.graph.node]
    int8 = sum(1 for t in m.graph.initializer if t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8))
    # A Conv or Gemm whose weight input is not dequantized from int8 stayed float.
    producers = {o: n for n in m.graph.node for o in n.output}
    float_ops = 0
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1:
            p = producers.get(n.input[1])
            if p is None or p.op_type != "DequantizeLinear":
                float_ops += 1
    edgepipe_report.emit(report(args, ops, int8, float_ops, len(x), len(keep), os.path.getsize(path)))
    return 0


def report(args, ops, int8, float_ops, calibration_images, kept_float, size):
    return {"model": "model.onnx", "quantize_linear": ops.count("QuantizeLinear"),
            "dequantize_linear": ops.count("DequantizeLinear"), "int8_initializers": int8,
            "float_conv_gemm": float_ops, "calibration_images": int(calibration_images), "method": args.method,
            "per_channel": not args.per_tensor, "kept_float": kept_float, "bytes": size,
            "symmetric_activations": args.symmetric_activations, "reduce_range": args.reduce_range}


if __name__ == "__main__":
    raise SystemExit(main())
