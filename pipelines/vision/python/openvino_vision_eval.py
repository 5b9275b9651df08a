"""Top-1 of an OpenVINO IR classifier on an image set, on OpenVINO's CPU plugin.

    python openvino_vision_eval.py --model DIR/model.xml --set IMAGES.npz --predictions OUT.npy
        [--reference REF.npy] [--threads N]

The images are preprocessed with the config.json beside the IR, exactly as vision_eval.py does for
PyTorch and ONNX Runtime, and run in static batches of 64 on the CPU plugin at f32 inference
precision: the quantized layers run in int8 as FakeQuantize says, the rest in f32 rather than the
bf16 a CPU with AMX would pick, so the score does not depend on this host's instruction set more
than the int8 kernels do. Predicted classes go to --predictions (int64
.npy); with --reference (the PyTorch reference's predictions) the share of images where both agree.

Why the batch is static: the IR's dynamic batch axis is fixed at 64 (or at the set's size when
smaller) and the last batch is filled up with copies of its last image, whose outputs are dropped.
OpenVINO's CPU plugin dies with SIGSEGV on an INT8 IR with a dynamic dimension at small batches on
CPUs with AMX (openvinotoolkit/openvino#37577): here a digits IR crashed at a last batch of 1 or 2.

On an unlabelled set (every label -1) "top1" is null, "labelled" false, and agreement is the measure.

Prints one JSON line, report() below (reports/openvino_vision_eval.json): {"top1", "correct",
"images", "runtime", "labelled", "agreement" (null without --reference), "ms_per_image"}.
"""

import argparse
import os
import time

import numpy as np

import edgepipe_report
import vision_data


BATCH = 64


def run_padded(compiled, x, batch):
    """The logits of x, run as one batch of exactly batch images (x's last image repeated)."""
    n = len(x)
    if n < batch:
        x = np.concatenate([x, np.repeat(x[-1:], batch - n, axis=0)])
    return compiled(x)[0][:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the IR's .xml (its .bin and config.json beside it)")
    ap.add_argument("--set", required=True)
    ap.add_argument("--predictions", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    import openvino as ov

    cfg = vision_data.read_config(os.path.dirname(args.model))
    images, labels = vision_data.load_set(args.set)
    core = ov.Core()
    props = {"INFERENCE_PRECISION_HINT": "f32"}
    if args.threads > 0:
        props["INFERENCE_NUM_THREADS"] = args.threads
    x = vision_data.preprocess(images, cfg)
    if len(x) == 0:
        raise SystemExit(f"{args.set}: no images to score")
    batch = min(BATCH, len(x))
    model = core.read_model(args.model)
    if model.input(0).get_partial_shape().is_dynamic:
        model.reshape({model.input(0).any_name: [batch, *x.shape[1:]]})
    compiled = core.compile_model(model, "CPU", props)
    n_classes = cfg["num_classes"]
    labelled = not vision_data.is_unlabelled(labels)
    if labelled and (labels.min() < 0 or labels.max() >= n_classes):
        raise SystemExit(f"{args.set}: labels run {labels.min()}..{labels.max()}, but the model has {n_classes} classes")
    start = time.perf_counter()
    out = [run_padded(compiled, x[i:i + batch], batch) for i in range(0, len(x), batch)]
    seconds = time.perf_counter() - start
    logits = np.concatenate(out)
    if logits.shape != (len(x), n_classes):
        raise SystemExit(f"{args.model}: logits of shape {logits.shape} for {len(x)} images of {n_classes} classes")
    pred = logits.argmax(1).astype(np.int64)
    np.save(args.predictions, pred)
    correct = int((pred == labels).sum()) if labelled else 0
    agreement = None
    if args.reference:
        ref = np.load(args.reference, allow_pickle=False)
        if ref.shape != pred.shape:
            raise SystemExit(f"{args.reference}: {ref.shape[0]} reference predictions for {pred.shape[0]} images")
        agreement = float((ref == pred).mean())
    edgepipe_report.emit(report(correct, len(labels), ov.get_version(), labelled, 1000 * seconds / len(x), agreement))
    return 0


def report(correct, images, ov_version, labelled, ms_per_image, agreement):
    return {"top1": correct / images if labelled else None, "correct": correct, "images": int(images),
            "runtime": "openvino " + ov_version.split("-")[0] + " CPU plugin (f32 inference precision, int8 where quantized)",
            "labelled": labelled, "ms_per_image": ms_per_image, "agreement": agreement}


if __name__ == "__main__":
    raise SystemExit(main())
