"""Convert an image classifier to TFLite/LiteRT, FP32 or full-integer INT8.

    python litert_convert.py --weights model.safetensors --out model.tflite --mode fp32|int8
        --num-classes 10 [--input-size 32] [--in-channels 3]
        [--calibration CALIB.npy] [--samples N] [--per-tensor]
    python litert_convert.py --model DIR --out model.tflite --mode fp32|int8
        [--calibration SET.npz] [--samples N] [--per-tensor]

--model DIR is an edgepipe image-classifier folder (model.safetensors and config.json, see
vision_data.py): the classes, input size and channels come from its config, a labelled
calibration set (.npz) is preprocessed with it, as every vision runtime does, and the network is
the config's architecture as vision_data builds it (torchvision's mobilenet_v3_small, timm's
tf_efficientnet_lite0), loaded strictly from the safetensors (no pickle is read).

--weights FILE is torchvision's mobilenet_v3_small(num_classes=...) with its first convolution
rebuilt for --in-channels when that is not 3, loaded from a safetensors state dict (strict: every
key must match; no pickle is read). It is converted for one image of shape
(1, in_channels, input_size, input_size), float32, NCHW, as the model itself takes it (normalized
the way it was trained: the caller preprocesses).

--mode fp32: litert_torch.convert of the float model.
--mode int8: post-training static quantization through litert-torch's PT2E path (the flow its own
tests and docs use): torch.export, prepare_pt2e with litert_torch's PT2EQuantizer
(get_symmetric_quantization_config: int8 activations calibrated with a histogram observer, int8
symmetric weights per output channel, or per tensor with --per-tensor), one forward per
calibration image, convert_pt2e(fold_quantize=False), then litert_torch.convert with
QuantConfig(pt2e_quantizer=...). The .tflite takes and returns int8 tensors (see the input and
output scale and zero point in the report). --calibration is a float32 .npy of shape
(N, in_channels, input_size, input_size), preprocessed like the model's input; --samples takes
its first N (default: all).

The result is checked by loading it with the LiteRT interpreter (ai_edge_litert) and counting its
tensors by dtype and its operators (without the XNNPACK delegate, so the census shows the model's
own ops). `weights` counts the weight operands of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED
by dtype; in int8 mode a float weight operand fails the conversion.

Its report is report() below (reports/litert_convert.json): the .tflite's size, its input and
output tensors, the census above, the calibration images and the versions.
"""

import argparse
import contextlib
import os
import sys
import time

import edgepipe_report

WEIGHT_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def fail(msg):
    print(f"litert_convert: {msg}", file=sys.stderr)
    sys.exit(2)


@contextlib.contextmanager
def stdout_to_stderr():
    """litert-torch prints its progress on stdout (Python and C++): keep stdout for the report."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def build_model(weights, num_classes, in_channels):
    """torchvision's mobilenet_v3_small with the state dict from a safetensors file (strict)."""
    import torch
    import torchvision
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    model = torchvision.models.mobilenet_v3_small(num_classes=num_classes)
    if in_channels != 3:
        stem = model.features[0][0]
        model.features[0][0] = torch.nn.Conv2d(in_channels, stem.out_channels, kernel_size=stem.kernel_size,
                                               stride=stem.stride, padding=stem.padding, bias=stem.bias is not None)
    try:
        state = load_file(weights)
    except (SafetensorError, OSError) as e:
        fail(f"{weights}: not a readable safetensors file ({e}); save the state dict with safetensors.torch.save_file")
    missing, unexpected = [], []
    own = model.state_dict()
    for k in own:
        if k not in state:
            missing.append(k)
    for k in state:
        if k not in own:
            unexpected.append(k)
    if missing or unexpected:
        fail(f"{weights} is not a mobilenet_v3_small state dict: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
             f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''} (keys must be torchvision's, without a prefix)")
    bad = [k for k in own if tuple(state[k].shape) != tuple(own[k].shape)]
    if bad:
        k = bad[0]
        fail(f"{weights}: {k} has shape {tuple(state[k].shape)}, the model wants {tuple(own[k].shape)}: "
             "check --num-classes and --in-channels")
    model.load_state_dict(state, strict=True)
    return model.eval()


def load_calibration(path, shape, samples, cfg=None):
    import numpy as np

    if path.endswith(".npz"):
        if cfg is None:
            fail(f"--calibration {path}: a labelled set (.npz) needs --model DIR, whose config.json says how to preprocess it")
        import vision_data

        images, _ = vision_data.load_set(path)
        x = vision_data.preprocess(images[:samples] if samples else images, cfg)
        if len(x) == 0:
            fail(f"--calibration {path}: no images")
        return x.astype(np.float32)
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        fail(f"--calibration {path}: not a readable .npy ({e})")
    if x.ndim != 4 or tuple(x.shape[1:]) != tuple(shape[1:]):
        fail(f"--calibration {path}: shape {x.shape}, want (N, {shape[1]}, {shape[2]}, {shape[3]}) preprocessed images")
    if not np.issubdtype(x.dtype, np.floating):
        fail(f"--calibration {path}: dtype {x.dtype}; give the model's float32 input (normalized), not raw pixels")
    if samples:
        x = x[:samples]
    if len(x) == 0:
        fail(f"--calibration {path}: no images")
    return x.astype(np.float32)


def quantize_int8(model, example, calib, per_channel):
    import torch
    from litert_torch.quantize import pt2e_quantizer
    from litert_torch.quantize.quant_config import QuantConfig
    from torchao.quantization.pt2e import quantize_pt2e

    quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=per_channel))
    exported = torch.export.export(model, (example,)).module()
    prepared = quantize_pt2e.prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        # The export has a static batch of one: calibrate image by image.
        for img in calib:
            prepared(torch.from_numpy(img[None]))
    converted = quantize_pt2e.convert_pt2e(prepared, fold_quantize=False)
    return converted, QuantConfig(pt2e_quantizer=quantizer)


def census(path):
    """Tensor dtypes, operators and weight operand dtypes of a .tflite, as the LiteRT interpreter sees them,
    and its input and output tensors' details."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    details = {d["index"]: d for d in it.get_tensor_details()}
    tensors, ops, weights = {}, {}, {}
    for d in details.values():
        k = d["dtype"].__name__
        tensors[k] = tensors.get(k, 0) + 1
    for op in it._get_ops_details():  # the interpreter's only per-op listing
        name = op["op_name"]
        ops[name] = ops.get(name, 0) + 1
        if name in WEIGHT_OPS and len(op["inputs"]) > 1 and op["inputs"][1] in details:
            k = details[op["inputs"][1]]["dtype"].__name__
            weights[k] = weights.get(k, 0) + 1
    return {"input": it.get_input_details()[0], "output": it.get_output_details()[0],
            "tensors": dict(sorted(tensors.items())), "ops": dict(sorted(ops.items())),
            "weights": dict(sorted(weights.items()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", help="the classifier's state dict (.safetensors)")
    ap.add_argument("--model", help="an image-classifier folder (model.safetensors + config.json) instead of --weights "
                                    "and the shape flags")
    ap.add_argument("--out", required=True, help="the .tflite to write")
    ap.add_argument("--mode", choices=("fp32", "int8"), required=True)
    ap.add_argument("--num-classes", type=int, default=0)
    ap.add_argument("--input-size", type=int, default=224, help="height and width of the model's input")
    ap.add_argument("--in-channels", type=int, default=3)
    ap.add_argument("--calibration", help="int8: float32 .npy (N, C, H, W) of preprocessed calibration images")
    ap.add_argument("--samples", type=int, default=0, help="int8: calibrate on the first N images (default all)")
    ap.add_argument("--per-tensor", action="store_true", help="int8: one weight scale per tensor, not per output channel")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = None
    if bool(args.model) == bool(args.weights):
        fail("give exactly one of --model DIR and --weights FILE")
    if args.model:
        import vision_data

        cfg = vision_data.read_config(args.model)
        args.num_classes, args.input_size, args.in_channels = cfg["num_classes"], cfg["input_size"], cfg["in_channels"]
    if args.num_classes < 1 or args.input_size < 1 or args.in_channels < 1:
        fail("--num-classes, --input-size and --in-channels must be positive")
    if args.mode == "int8" and not args.calibration:
        fail("--mode int8 needs --calibration: a float32 .npy of preprocessed images (static quantization calibrates activations)")
    if args.mode == "fp32" and (args.calibration or args.per_tensor):
        fail("--calibration and --per-tensor are for --mode int8")

    import torch

    torch.manual_seed(args.seed)
    shape = (1, args.in_channels, args.input_size, args.input_size)
    if args.model:
        model, _ = vision_data.load_model(args.model)
    else:
        model = build_model(args.weights, args.num_classes, args.in_channels)
    calib = load_calibration(args.calibration, shape, args.samples, cfg) if args.mode == "int8" else None

    example = torch.zeros(shape, dtype=torch.float32)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with stdout_to_stderr():
        import litert_torch

        start = time.monotonic()
        if args.mode == "fp32":
            edge = litert_torch.convert(model, (example,))
        else:
            graph, qcfg = quantize_int8(model, example, calib, not args.per_tensor)
            edge = litert_torch.convert(graph, (example,), quant_config=qcfg)
        edge.export(args.out)
        seconds = time.monotonic() - start

    info = census(args.out)
    if args.mode == "int8":
        floats = sum(n for k, n in info["weights"].items() if k != "int8")
        if floats or not info["weights"].get("int8"):
            fail(f"int8 conversion left weight operands {info['weights']} (conv/fully-connected): the PT2E quantizer "
                 "did not cover them; this pinned litert-torch cannot produce a full-integer model of it")

    import ai_edge_litert
    import torchvision

    edgepipe_report.emit(report(args.out, args.mode, os.path.getsize(args.out), seconds, info,
                                0 if calib is None else int(len(calib)), args.mode == "int8" and not args.per_tensor,
                                litert_torch.__version__, ai_edge_litert.__version__, torch.__version__,
                                torchvision.__version__))
    return 0


def report(model, mode, nbytes, seconds, info, calibration_samples, per_channel, litert_torch, ai_edge_litert, torch,
           torchvision):
    """info is census(): the input and output tensors' interpreter details, and the counts."""
    inp, out = info["input"], info["output"]
    return {"model": model, "mode": mode, "bytes": nbytes, "convert_s": round(seconds, 2),
            "input": {"name": inp["name"], "dtype": inp["dtype"].__name__, "shape": [int(s) for s in inp["shape"]],
                      "scale": float(inp["quantization"][0]), "zero_point": int(inp["quantization"][1])},
            "output": {"name": out["name"], "dtype": out["dtype"].__name__, "shape": [int(s) for s in out["shape"]],
                       "scale": float(out["quantization"][0]), "zero_point": int(out["quantization"][1])},
            "tensors": info["tensors"], "ops": info["ops"], "weights": info["weights"],
            "calibration_samples": calibration_samples, "per_channel": per_channel,
            "versions": {"litert-torch": litert_torch, "ai-edge-litert": ai_edge_litert, "torch": torch,
                         "torchvision": torchvision}}


if __name__ == "__main__":
    sys.exit(main())
