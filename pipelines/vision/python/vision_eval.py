"""Top-1 accuracy of a classifier on a labelled image set, in PyTorch or ONNX Runtime.

    python vision_eval.py --set IMAGES.npz (--torch MODEL_DIR | --onnx MODEL.onnx)
        --predictions OUT.npy [--reference REF.npy] [--simulate-qdq]

--torch scores the fp32 PyTorch model (the reference every converted model is gated
against); --onnx scores an ONNX model on ONNX Runtime's CPU provider. Both preprocess
with the model's config.json and run batches of 64. The predicted classes are saved to
--predictions (.npy, int64); with --reference (the reference step's predictions), the
share of images where both predict the same class is reported too. --simulate-qdq runs an ONNX
QDQ model with ONNX Runtime's graph optimizations off, so each QuantizeLinear/DequantizeLinear pair
is computed as written (round, clamp, rescale in float) instead of being fused into ONNX Runtime's
integer kernels: the exact int8 model, as TensorRT's explicit quantization computes it with int32
accumulation, without the u8 x s8 saturation of this CPU's AVX2 kernels.

On an unlabelled set (every label -1, vision_data.UNLABELLED) there is no accuracy:
"top1" is null, "labelled" false, and agreement with --reference is the only measure.

Prints one JSON line, report() below (reports/vision_eval.json): {"top1", "correct", "images",
"runtime", "labelled", "agreement"} ("agreement" null without --reference).
"""

import argparse
import os

import numpy as np

import edgepipe_env
import edgepipe_report
import vision_data


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", required=True)
    ap.add_argument("--torch")
    ap.add_argument("--onnx")
    ap.add_argument("--predictions", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--simulate-qdq", action="store_true")
    args = ap.parse_args()
    if bool(args.torch) == bool(args.onnx):
        ap.error("give exactly one of --torch and --onnx")

    images, labels = vision_data.load_set(args.set)
    if args.torch:
        import torch

        torch.set_num_threads(edgepipe_env.threads())
        model, cfg = vision_data.load_model(args.torch)

        def run(b):
            with torch.no_grad():
                return model(torch.from_numpy(b)).numpy()

        runtime = "torch " + torch.__version__
    else:
        import onnxruntime as ort

        cfg = vision_data.read_config(os.path.dirname(args.onnx))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = edgepipe_env.threads()
        if args.simulate_qdq:
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(args.onnx, opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name

        def run(b):
            return sess.run(None, {name: b})[0]

        runtime = "onnxruntime " + ort.__version__ + " " + ",".join(sess.get_providers())
        if args.simulate_qdq:
            runtime += " (optimizations off: Q/DQ computed as written, TensorRT's exact int8 arithmetic)"
    x = vision_data.preprocess(images, cfg)
    n_classes = cfg["num_classes"]
    labelled = not vision_data.is_unlabelled(labels)
    if labelled and (labels.min() < 0 or labels.max() >= n_classes):
        raise SystemExit(f"{args.set}: labels run {labels.min()}..{labels.max()}, but the model has {n_classes} classes")
    pred = np.concatenate([run(x[i:i + 64]).argmax(1) for i in range(0, len(x), 64)]).astype(np.int64)
    np.save(args.predictions, pred)
    correct = int((pred == labels).sum()) if labelled else 0
    agreement = None
    if args.reference:
        ref = np.load(args.reference, allow_pickle=False)
        if ref.shape != pred.shape:
            raise SystemExit(f"{args.reference}: {ref.shape[0]} reference predictions for {pred.shape[0]} images")
        agreement = float((ref == pred).mean())
    edgepipe_report.emit(report(correct, len(labels), runtime, labelled, agreement))
    return 0


def report(correct, images, runtime, labelled, agreement):
    return {"top1": correct / images if labelled else None, "correct": correct, "images": int(images),
            "runtime": runtime, "labelled": labelled, "agreement": agreement}


if __name__ == "__main__":
    raise SystemExit(main())
