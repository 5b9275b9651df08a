"""QNN INT8 for image classifiers: a QDQ model for Qualcomm's HTP, its Hexagon context binary, and
top-1 on the HTP simulator.

    python vision_qnn.py quantize --in MODEL.onnx --calibration IMAGES.npz --out DIR
        [--per-tensor] [--samples N]
    python vision_qnn.py compile --qdq DIR/model.onnx --out DIR --soc-model 57 --htp-arch 75
    python vision_qnn.py eval --model DIR/model_ctx.onnx --set IMAGES.npz --config DIR
        --predictions OUT.npy [--reference REF.npy] [--images N] --soc-model 57 --htp-arch 75

quantize: the vision export (fp32, dynamic batch) with its batch fixed to 1 (HTP graphs have static
shapes; onnxruntime.tools.onnx_model_utils, as qnn_qdq.py fixes an LLM's), qnn_preprocess_model,
then ONNX Runtime's QNN quantization config (get_qnn_qdq_config: uint8 activations, int8 symmetric
weights per output channel for Conv and Gemm; the config keeps a MatMul's per tensor, QNN has no
per-channel MatMul) calibrated with MinMax on the calibration images, preprocessed by the model's
config.json as every vision runtime does. Every node is quantized: a float node would run in fp16 on the HTP or not at
all. Writes OUT/model.onnx and OUT/config.json.

compile: QNN's HTP backend (onnxruntime-qnn, as qnn_htp.py) compiles the QDQ model for the SoC into
OUT/model_ctx.onnx (the EPContext wrapper) + OUT/model_ctx_qnn.bin (the context binary), CPU fallback
disabled; the wrapper must hold EPContext nodes only (a node left beside them would run on the CPU).

eval: loads the wrapper and its binary as a phone does and scores the evaluation images one by one
(batch 1) on the HTP simulator the backend runs on x86-64, CPU fallback disabled; --images N scores
the first N only (the simulator is slow). Prints vision_eval.py's fields (top1 over the images
scored, correct, images, runtime, labelled, agreement with --reference on the same images) plus
"reference_top1" (the reference predictions' top-1 on those images), "ms_per_image" (the simulator
on this host, not a phone) and the QNN versions.

Each subcommand prints one JSON line, report() below (reports/vision_qnn.json): its result under
its own name ("quantize", "compile" or "eval"), the other two null.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import edgepipe_report
import qnn_htp
import vision_data

EP = qnn_htp.EP


def quantize(args):
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantType, quantize as ort_quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config, qnn_preprocess_model
    from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_dim_param_fixed

    cfg = vision_data.read_config(os.path.dirname(args.inp))
    images, _ = vision_data.load_set(args.calibration)
    if args.samples > 0:
        images = images[: args.samples]
    x = vision_data.preprocess(images, cfg)

    model = onnx.load(args.inp)
    fixed_dims = []
    for inp in model.graph.input:
        for i, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.dim_param:
                if i != 0:
                    raise SystemExit(f"vision_qnn: input {inp.name} has a symbolic dimension {d.dim_param!r} at axis {i}: "
                                     f"only the batch axis may be dynamic")
                fixed_dims.append(d.dim_param)
    for name in sorted(set(fixed_dims)):
        make_dim_param_fixed(model.graph, name, 1)
    fix_output_shapes(model)
    input_name = model.graph.input[0].name
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([x[i:i + 1] for i in range(len(x))])

        def get_next(self):
            b = next(self.batches, None)
            return None if b is None else {input_name: b}

    work = tempfile.mkdtemp(prefix="vision_qnn-")
    try:
        fixed = os.path.join(work, "fixed.onnx")
        onnx.save_model(model, fixed)
        prep = os.path.join(work, "preprocessed.onnx")
        src = prep if qnn_preprocess_model(fixed, prep) else fixed
        config = get_qnn_qdq_config(src, Reader(), calibrate_method=CalibrationMethod.MinMax,
                                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                    per_channel=not args.per_tensor)
        os.makedirs(args.out, exist_ok=True)
        out_model = os.path.join(args.out, "model.onnx")
        ort_quantize(src, out_model, config)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    shutil.copyfile(os.path.join(os.path.dirname(args.inp), "config.json"), os.path.join(args.out, "config.json"))

    q = onnx.load(out_model)
    ops = [n.op_type for n in q.graph.node]
    inits = {t.name: t for t in q.graph.initializer}
    producers = {o: n for n in q.graph.node for o in n.output}
    # A Conv/Gemm/MatMul whose weight does not come out of a DequantizeLinear stayed float; one whose
    # DequantizeLinear has a scale per output channel is per-channel.
    float_ops, per_channel = 0, 0
    for n in q.graph.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or len(n.input) < 2:
            continue
        p = producers.get(n.input[1])
        if p is None or p.op_type != "DequantizeLinear":
            float_ops += 1
        elif p.input[1] in inits and len(inits[p.input[1]].dims) == 1 and inits[p.input[1]].dims[0] > 1:
            per_channel += 1
    int8 = sum(1 for t in q.graph.initializer if t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8))
    edgepipe_report.emit(report("quantize", input_name=input_name, shape=shape, fixed_dims=sorted(set(fixed_dims)),
                                quantize_linear=ops.count("QuantizeLinear"), dequantize_linear=ops.count("DequantizeLinear"),
                                int8_initializers=int8, float_conv_gemm=float_ops, per_channel_weights=per_channel,
                                calibration_images=int(len(x)), per_channel=not args.per_tensor,
                                size=os.path.getsize(out_model)))
    return 0


def versions(ort, qnn, args):
    return {"qnn_version": qnn.build_and_package_info.qnn_version, "onnxruntime_qnn": qnn.__version__,
            "onnxruntime": ort.__version__, "soc_model": args.soc_model, "htp_arch": args.htp_arch}


def load_qnn():
    import onnxruntime as ort
    import onnxruntime_qnn as qnn

    ort.register_execution_provider_library(EP, qnn.get_library_path())
    return ort, qnn


def epcontext_nodes(path):
    """An EPContext wrapper's EPContext node count, and its other nodes: each of those would run on the
    CPU."""
    import onnx

    nodes = onnx.load(path, load_external_data=False).graph.node
    return sum(n.op_type == "EPContext" for n in nodes), [f"{n.op_type} {n.name}" for n in nodes if n.op_type != "EPContext"]


def compile_ctx(args):
    ort, qnn = load_qnn()
    os.makedirs(args.out, exist_ok=True)
    ctx_model = os.path.join(args.out, "model_ctx.onnx")
    # From bytes, not the path: ONNX Runtime names the compiled graph (inside the binary) with a hash
    # of the model's path when it has one, and of its contents otherwise, so only bytes make the
    # binary independent of where the cache keeps the QDQ model (edgepipe reproduce).
    with open(args.qdq, "rb") as f:
        qdq = f.read()
    t0 = time.monotonic()
    s, _ = qnn_htp.with_captured_stderr(
        lambda: qnn_htp.qnn_session(ort, qnn, qdq, args.soc_model, args.htp_arch, context_out=ctx_model))
    if isinstance(s, Exception):
        print(f"vision_qnn: the QNN HTP backend refused the graph (CPU fallback is disabled, so no node may run on "
              f"the CPU): {s}", file=sys.stderr)
        _, logged = qnn_htp.with_captured_stderr(
            lambda: qnn_htp.qnn_session(ort, qnn, qdq, args.soc_model, args.htp_arch, verbose=True))
        lines = qnn_htp.refused_lines(logged)
        # The prefix Go's refusedNodes reads.
        for line in lines[:40]:
            print(f"qnn_htp: refused: {line}", file=sys.stderr)
        if not lines:
            print("vision_qnn: the verbose log names no refused node", file=sys.stderr)
        return 3
    compile_s = time.monotonic() - t0
    del s
    bins = sorted(f for f in os.listdir(args.out) if f.endswith(".bin"))
    if not os.path.isfile(ctx_model) or len(bins) != 1:
        print(f"vision_qnn: the session compiled but wrote no EPContext model and one context binary in {args.out} "
              f"(binaries: {bins})", file=sys.stderr)
        return 1
    n_ctx, left = epcontext_nodes(ctx_model)
    if left or not n_ctx:
        print(f"vision_qnn: the EPContext model holds {n_ctx} EPContext nodes and {len(left)} nodes outside the context "
              f"binary, which would run on the CPU: {', '.join(left[:10])}", file=sys.stderr)
        return 3
    shutil.copyfile(os.path.join(os.path.dirname(args.qdq), "config.json"), os.path.join(args.out, "config.json"))
    print(f"compiled on the QNN HTP backend in {compile_s:.1f} s: model_ctx.onnx + {bins[0]}", file=sys.stderr, flush=True)
    edgepipe_report.emit(report("compile", context_binary=bins[0], compile_s=round(compile_s, 2),
                                context_binary_bytes=os.path.getsize(os.path.join(args.out, bins[0])),
                                epcontext_nodes=n_ctx, versions=versions(ort, qnn, args)))
    return 0


def evaluate(args):
    images, labels = vision_data.load_set(args.set)
    set_images = len(labels)
    if args.images > 0:
        images, labels = images[: args.images], labels[: args.images]
    cfg = vision_data.read_config(args.config)
    x = vision_data.preprocess(images, cfg)
    labelled = not vision_data.is_unlabelled(labels)
    n_classes = cfg["num_classes"]
    if labelled and (labels.min() < 0 or labels.max() >= n_classes):
        raise SystemExit(f"{args.set}: labels run {labels.min()}..{labels.max()}, but the model has {n_classes} classes")
    ref = None
    if args.reference:
        ref = np.load(args.reference, allow_pickle=False)
        if ref.ndim != 1 or len(ref) != set_images:
            raise SystemExit(f"{args.reference}: {ref.shape} reference predictions for the set's {set_images} images")
        ref = ref[: len(x)]

    n_ctx, left = epcontext_nodes(args.model)
    if left or not n_ctx:
        raise SystemExit(f"vision_qnn: {args.model} holds {n_ctx} EPContext nodes and {len(left)} nodes outside the "
                         f"context binary (they would run on the CPU): {', '.join(left[:10])}")
    ort, qnn = load_qnn()
    t0 = time.monotonic()
    session = qnn_htp.qnn_session(ort, qnn, args.model, args.soc_model, args.htp_arch)
    load_s = time.monotonic() - t0
    providers = session.get_providers()
    if providers[0] != EP:
        # ONNX Runtime always lists its CPU provider last; what keeps nodes off it is CPU fallback
        # disabled and a wrapper of EPContext nodes only (checked above), which only QNN runs.
        raise SystemExit(f"vision_qnn: the session's providers are {providers}: {EP} is not first")
    inp = session.get_inputs()[0]
    if list(inp.shape) != [1] + list(x.shape[1:]):
        raise SystemExit(f"vision_qnn: the compiled model takes {inp.shape}, the preprocessed images are "
                         f"(1, {', '.join(map(str, x.shape[1:]))})")
    pred = np.empty(len(x), dtype=np.int64)
    t0 = time.monotonic()
    for i in range(len(x)):
        pred[i] = int(session.run(None, {inp.name: x[i:i + 1]})[0].argmax())
        if (i + 1) % 50 == 0:
            print(f"{i + 1}/{len(x)} images on the HTP simulator, {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    seconds = time.monotonic() - t0
    np.save(args.predictions, pred)
    correct = int((pred == labels).sum()) if labelled else 0
    v = versions(ort, qnn, args)
    edgepipe_report.emit(report(
        "eval", top1=correct / len(x) if labelled else None, correct=correct, images=int(len(x)), labelled=labelled,
        set_images=set_images,
        runtime=f"QNN {v['qnn_version']} HTP backend on the HTP simulator (x86-64), "
                f"onnxruntime-qnn {v['onnxruntime_qnn']}, onnxruntime {v['onnxruntime']}, CPU fallback disabled",
        providers=providers, load_s=round(load_s, 2), seconds=round(seconds, 2), ms_per_image=round(1000 * seconds / len(x), 2),
        agreement=None if ref is None else float((ref == pred).mean()),
        reference_top1=float((ref == labels).mean()) if ref is not None and labelled else None, versions=v))
    return 0


def report(cmd, *, input_name=None, shape=None, fixed_dims=None, quantize_linear=None, dequantize_linear=None,
           int8_initializers=None, float_conv_gemm=None, per_channel_weights=None, calibration_images=None,
           per_channel=None, size=None,
           context_binary=None, compile_s=None, context_binary_bytes=None, epcontext_nodes=None,
           top1=None, correct=None, images=None, labelled=None, set_images=None, runtime=None, providers=None,
           load_s=None, seconds=None, ms_per_image=None, agreement=None, reference_top1=None,
           versions=None):
    """The subcommand cmd's result under its name, the other two null; versions is versions()."""
    if cmd == "quantize":
        return {"quantize": {"model": "model.onnx", "input": input_name, "shape": shape, "fixed_dims": fixed_dims,
                             "quantize_linear": quantize_linear, "dequantize_linear": dequantize_linear,
                             "int8_initializers": int8_initializers, "float_conv_gemm": float_conv_gemm,
                             "per_channel_weights": per_channel_weights, "calibration_images": calibration_images,
                             "weight_type": "int8", "activation_type": "uint8", "per_channel": per_channel, "bytes": size},
                "compile": None, "eval": None}
    v = versions
    if cmd == "compile":
        return {"quantize": None,
                "compile": {"model": "model_ctx.onnx", "context_binary": context_binary, "compile_s": compile_s,
                            "context_binary_bytes": context_binary_bytes, "epcontext_nodes": epcontext_nodes,
                            "qnn_version": v["qnn_version"], "onnxruntime_qnn": v["onnxruntime_qnn"],
                            "onnxruntime": v["onnxruntime"], "soc_model": v["soc_model"], "htp_arch": v["htp_arch"]},
                "eval": None}
    return {"quantize": None, "compile": None,
            "eval": {"top1": top1, "correct": correct, "images": images, "labelled": labelled, "set_images": set_images,
                     "runtime": runtime, "providers": providers, "load_s": load_s, "seconds": seconds,
                     "ms_per_image": ms_per_image, "agreement": agreement, "reference_top1": reference_top1,
                     "qnn_version": v["qnn_version"], "onnxruntime_qnn": v["onnxruntime_qnn"],
                     "onnxruntime": v["onnxruntime"], "soc_model": v["soc_model"], "htp_arch": v["htp_arch"]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quantize")
    q.add_argument("--in", dest="inp", required=True)
    q.add_argument("--calibration", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--per-tensor", action="store_true")
    q.add_argument("--samples", type=int, default=0)
    for name in ("compile", "eval"):
        p = sub.add_parser(name)
        p.add_argument("--soc-model", type=int, required=True, help="QNN SoC model id (QnnTypes.h QNN_SOC_MODEL_*)")
        p.add_argument("--htp-arch", type=int, required=True, help="Hexagon HTP architecture (73, 75, 79, ...)")
    c = sub.choices["compile"]
    c.add_argument("--qdq", required=True)
    c.add_argument("--out", required=True)
    e = sub.choices["eval"]
    e.add_argument("--model", required=True, help="the EPContext wrapper (model_ctx.onnx) beside its context binary")
    e.add_argument("--set", required=True)
    e.add_argument("--config", required=True, help="the folder whose config.json preprocesses the images")
    e.add_argument("--predictions", required=True)
    e.add_argument("--reference")
    e.add_argument("--images", type=int, default=0, help="score the first N images only (0: all)")
    args = ap.parse_args()
    return {"quantize": quantize, "compile": compile_ctx, "eval": evaluate}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
