"""Score a Core ML image classifier on Linux by interpreting its ML program (Core ML does not run).

    python coreml_vision_eval.py --package INT8.mlpackage --fp32-package FP32.mlpackage --torch MODEL_DIR
        --set IMAGES.npz --predictions OUT.npy [--reference REF.npy] [--proof-images 16]

Core ML's runtime exists only on Apple's systems. This script executes the package's own MIL
program (read from its spec and weight blob) with coreml_mil.py's interpreter in PyTorch on the
CPU, image by image (the program's batch is 1), on the set's images resized like every vision
runtime's input (config.json's input_size, RGB) as 0-255 pixel values, which is what Core ML
hands the program for an image input.

First it proves the interpreter: the FP32 package (compute precision FLOAT32, unquantized,
converted from the same model) must give PyTorch's logits on the first --proof-images images
within --proof-limit (max |logit difference|, default 1e-3). Then it scores --package on every
image: top-1 accuracy (labelled sets), predictions (--predictions, int64 .npy, as
vision_eval.py), and top-1 agreement with --reference (the PyTorch reference's predictions).

Prints one JSON line, report() below (reports/coreml_vision_eval.json): {"top1", "correct",
"images", "labelled", "agreement" (null without --reference), "runtime", "ran_coreml": false,
"interpreter_proof": {"images", "max_abs_logit_diff", "limit", "passed"}, "ops", "ms_per_image"}. An op the interpreter does not implement stops it (exit 2), naming the op.
"""

import argparse
import sys
import time

import numpy as np

import edgepipe_env
import edgepipe_report
import vision_data


def fail(msg):
    print(f"coreml_vision_eval: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", required=True)
    ap.add_argument("--fp32-package", required=True)
    ap.add_argument("--torch", required=True, help="the source classifier folder (the PyTorch model, config.json)")
    ap.add_argument("--set", required=True)
    ap.add_argument("--predictions", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--proof-images", type=int, default=16)
    ap.add_argument("--proof-limit", type=float, default=1e-3)
    args = ap.parse_args()

    import torch

    import coreml_mil
    from coreml_vision_convert import pixels

    torch.set_num_threads(edgepipe_env.threads())
    model, cfg = vision_data.load_model(args.torch)
    images, labels = vision_data.load_set(args.set)
    px = pixels(images, cfg)
    try:
        fp32 = coreml_mil.Program.load(args.fp32_package)
        prog = coreml_mil.Program.load(args.package)
    except coreml_mil.UnsupportedOp as e:
        fail(f"the MIL interpreter cannot run this package: {e}")

    def logits(p, i):
        out = p.run({p.inputs[0]: px[i:i + 1]}, keep=False)
        return np.asarray(out[p.outputs[0]], dtype=np.float32).reshape(-1)

    n = min(args.proof_images, len(px))
    x = vision_data.preprocess(images[:n], cfg)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    diff = max(float(np.abs(logits(fp32, i) - ref[i]).max()) for i in range(n))
    passed = bool(np.isfinite(diff) and diff <= args.proof_limit)
    print(f"interpreter proof: FP32 package vs PyTorch over {n} images, max |logit diff| {diff:.3g} "
          f"(limit {args.proof_limit:g})", file=sys.stderr, flush=True)

    start = time.monotonic()
    pred = np.array([int(logits(prog, i).argmax()) for i in range(len(px))], dtype=np.int64)
    seconds = time.monotonic() - start
    np.save(args.predictions, pred)
    labelled = not vision_data.is_unlabelled(labels)
    if labelled and (labels.min() < 0 or labels.max() >= cfg["num_classes"]):
        fail(f"{args.set}: labels run {labels.min()}..{labels.max()}, but the model has {cfg['num_classes']} classes")
    correct = int((pred == labels).sum()) if labelled else 0
    agreement = None
    if args.reference:
        r = np.load(args.reference, allow_pickle=False)
        if r.shape != pred.shape:
            fail(f"{args.reference}: {r.shape[0]} reference predictions for {pred.shape[0]} images")
        agreement = float((r == pred).mean())
    edgepipe_report.emit(report(correct, len(labels), labelled, torch.__version__, (n, diff, args.proof_limit, passed),
                                prog.op_types, round(1000 * seconds / max(len(px), 1), 3), agreement))
    return 0


def report(correct, images, labelled, torch_version, proof, op_types, ms_per_image, agreement):
    n, diff, limit, passed = proof
    return {"top1": correct / images if labelled else None, "correct": correct, "images": int(images),
            "labelled": labelled, "ran_coreml": False,
            "runtime": f"MIL interpreter (coreml_mil.py on PyTorch {torch_version.split('+')[0]}, CPU); "
                       f"Core ML did not run",
            "interpreter_proof": {"images": n, "max_abs_logit_diff": diff, "limit": limit, "passed": passed},
            "ops": dict(sorted(op_types.items())), "ms_per_image": ms_per_image, "agreement": agreement}


if __name__ == "__main__":
    raise SystemExit(main())
