"""Score a .tflite classifier with the LiteRT interpreter on an evaluation set.

    python litert_validate.py --model model.tflite --images X.npy [--labels Y.npy]
        [--reference REF.npy] [--save-logits OUT.npy] [--threads N]
    python litert_validate.py --model model.tflite --set SET.npz --config DIR
        [--reference REF.npy] [--predictions OUT.npy] [--threads N]

--set is a labelled image set (.npz, see vision_data.py), preprocessed with the classifier
folder DIR's config.json exactly as the PyTorch and ONNX Runtime scorers do; its labels give
top-1 accuracy. --predictions saves the predicted classes (int64 .npy), as vision_eval.py does.

--images is a float32 .npy of shape (N, C, H, W): the model's input, preprocessed as for PyTorch.
For a quantized model (int8 or uint8 input) each image is quantized with the input tensor's scale
and zero point, and the output is dequantized with the output's, so logits are comparable across
formats. The model runs image by image (converted models have a static batch of one) through
ai_edge_litert.interpreter with its default delegates (XNNPACK on the CPU).

--labels (int .npy, (N,)) gives top-1 accuracy. --reference is the FP32 model's output on the same
images: float logits (N, classes) or predicted classes (N,) (int). It gives the top-1 agreement
with it, and with --labels the reference's accuracy and the drop (reference minus this model,
absolute top-1). With float logits the largest absolute logit difference is reported too.

This tool measures; it does not gate: it exits 0 whatever the accuracy, and non-zero (2) only when
it cannot score (bad inputs, a model the interpreter refuses).

Its report is report() below (reports/litert_validate.json): the images scored, the input and
output tensors, top-1 (null without labels), the comparison with --reference (null without one;
its top1 and drop null without labels, max_abs_logit_diff null for a reference of classes), the
time and the interpreter's version.
"""

import argparse
import sys
import time

import edgepipe_report


def fail(msg):
    print(f"litert_validate: {msg}", file=sys.stderr)
    sys.exit(2)


def load_npy(path, what):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        fail(f"{what} {path}: not a readable .npy ({e})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the .tflite")
    ap.add_argument("--images", help="float32 .npy (N, C, H, W), preprocessed")
    ap.add_argument("--set", help="a labelled image set (.npz) instead of --images and --labels")
    ap.add_argument("--config", help="with --set: the classifier folder whose config.json preprocesses it")
    ap.add_argument("--predictions", help="write the predicted classes here (int64 .npy)")
    ap.add_argument("--labels", help="int .npy (N,): the true classes")
    ap.add_argument("--reference", help=".npy: the FP32 model's logits (N, classes) or predicted classes (N,)")
    ap.add_argument("--save-logits", help="write this model's (dequantized) logits here, float32 (N, classes)")
    ap.add_argument("--threads", type=int, default=None, help="interpreter threads (default: the interpreter's)")
    args = ap.parse_args()

    import numpy as np
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter

    if bool(args.set) == bool(args.images) or (args.set and (not args.config or args.labels)):
        fail("give --images [--labels], or --set SET.npz with --config DIR")
    if args.set:
        import vision_data

        images, labels = vision_data.load_set(args.set)
        if vision_data.is_unlabelled(labels):
            labels = None  # scored by agreement with --reference only
        x = vision_data.preprocess(images, vision_data.read_config(args.config))
    else:
        x = load_npy(args.images, "--images")
        labels = load_npy(args.labels, "--labels") if args.labels else None
    if x.ndim != 4 or not np.issubdtype(x.dtype, np.floating):
        fail(f"--images {args.images}: want float32 (N, C, H, W) preprocessed images, got {x.dtype} {x.shape}")
    if labels is not None and (labels.ndim != 1 or len(labels) != len(x) or not np.issubdtype(labels.dtype, np.integer)):
        fail(f"--labels {args.labels}: want one int class per image ({len(x)}), got {labels.dtype} {labels.shape}")
    ref = load_npy(args.reference, "--reference") if args.reference else None
    if ref is not None:
        ok = (ref.ndim == 2 and np.issubdtype(ref.dtype, np.floating)) or (ref.ndim == 1 and np.issubdtype(ref.dtype, np.integer))
        if not ok or len(ref) != len(x):
            fail(f"--reference {args.reference}: want float logits (N, classes) or int classes (N,) for {len(x)} images, "
                 f"got {ref.dtype} {ref.shape}")

    try:
        it = Interpreter(model_path=args.model, num_threads=args.threads)
        it.allocate_tensors()
    except (ValueError, RuntimeError) as e:
        fail(f"{args.model}: the LiteRT interpreter refused it ({e})")
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    want = tuple(int(s) for s in inp["shape"])
    if want[0] != 1 or tuple(x.shape[1:]) != want[1:]:
        fail(f"--images shape {x.shape} does not fit the model's input {want}: preprocess to (N, {', '.join(map(str, want[1:]))})")
    in_scale, in_zero = inp["quantization"]
    out_scale, out_zero = out["quantization"]
    in_dtype, out_dtype = inp["dtype"], out["dtype"]
    quant_in = np.issubdtype(in_dtype, np.integer)
    if quant_in and in_scale == 0:
        fail(f"{args.model}: integer input without a quantization scale")
    if quant_in:
        info = np.iinfo(in_dtype)

    logits = []
    start = time.monotonic()
    for img in x.astype(np.float32):
        t = img[None]
        if quant_in:
            t = np.clip(np.rint(t / in_scale) + in_zero, info.min, info.max).astype(in_dtype)
        it.set_tensor(inp["index"], t)
        it.invoke()
        y = it.get_tensor(out["index"])
        if np.issubdtype(out_dtype, np.integer):
            y = (y.astype(np.float32) - out_zero) * out_scale
        logits.append(np.asarray(y, dtype=np.float32).reshape(-1))
    seconds = time.monotonic() - start
    logits = np.stack(logits)
    pred = logits.argmax(axis=1)
    if args.save_logits:
        np.save(args.save_logits, logits)
    if args.predictions:
        np.save(args.predictions, pred.astype(np.int64))

    top1 = None if labels is None else float((pred == labels).mean())
    reference = None
    if ref is not None:
        ref_pred = ref.argmax(axis=1) if ref.ndim == 2 else ref
        ref_top1 = None if labels is None else float((ref_pred == labels).mean())
        max_diff = None
        if ref.ndim == 2:
            if ref.shape[1] != logits.shape[1]:
                fail(f"--reference has {ref.shape[1]} classes, the model {logits.shape[1]}")
            max_diff = float(np.abs(ref.astype(np.float32) - logits).max())
        reference = reference_report(float((pred == ref_pred).mean()), ref_top1,
                                     None if labels is None else ref_top1 - top1, max_diff)
    edgepipe_report.emit(report(args.model, int(len(x)), inp, out, top1,
                                None if labels is None else int((pred == labels).sum()), labels is not None, reference,
                                seconds, ai_edge_litert.__version__))
    return 0


def report(model, samples, inp, out, top1, correct, labelled, reference, seconds, ai_edge_litert):
    """inp and out are the interpreter's tensor details; reference is reference_report()'s, None
    without --reference."""
    return {"model": model, "samples": samples,
            "input": {"dtype": inp["dtype"].__name__, "shape": [int(v) for v in inp["shape"]],
                      "scale": float(inp["quantization"][0]), "zero_point": int(inp["quantization"][1])},
            "output": {"dtype": out["dtype"].__name__, "shape": [int(v) for v in out["shape"]],
                       "scale": float(out["quantization"][0]), "zero_point": int(out["quantization"][1])},
            "top1": top1, "correct": correct, "labelled": labelled, "reference": reference,
            "seconds": round(seconds, 3), "ms_per_image": round(1000 * seconds / max(samples, 1), 3),
            "ai_edge_litert": ai_edge_litert}


def reference_report(agreement, top1, drop, max_abs_logit_diff):
    """The comparison with the reference: top1 and drop are None without labels, max_abs_logit_diff
    for a reference of classes. (A function of its own since the report has it only with a reference:
    the golden's reference object checks these keys.)"""
    return {"agreement": agreement, "top1": top1, "drop": drop, "max_abs_logit_diff": max_abs_logit_diff}


if __name__ == "__main__":
    sys.exit(main())
