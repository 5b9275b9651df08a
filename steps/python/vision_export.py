"""Export a torchvision classifier (safetensors + config.json) to fp32 ONNX with a dynamic batch axis.

    python vision_export.py --model DIR --set IMAGES.npz --out DIR [--opset 18] [--images 64]

torch.onnx.export (the TorchScript exporter, eval mode, constant folding) writes
OUT/model.onnx: input "pixel_values" [batch, C, S, S] float32 (config.json's
preprocessing), output "logits" [batch, classes]. config.json is copied beside it. The
graph is checked in ONNX Runtime (CPU) against PyTorch on the first --images images of
the set, run as one batch and as batches of 1 and 7 (the batch axis must really be
dynamic).

Prints one JSON line: {"model", "opset", "inputs", "outputs", "dynamic_batch",
"max_abs_logit_diff", "checked_images", "batch_sizes", "bytes", "onnxruntime"}.
"""

import argparse
import os
import shutil

import numpy as np

import vision_data


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--set", required=True, help="labelled image set (.npz) whose first images check the graph")
    ap.add_argument("--out", required=True)
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--images", type=int, default=64)
    args = ap.parse_args()

    import onnx
    import onnxruntime as ort
    import torch

    torch.set_num_threads(vision_data.threads())
    model, cfg = vision_data.load_model(args.model)
    images, _ = vision_data.load_set(args.set)
    x = vision_data.preprocess(images[: args.images], cfg)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "model.onnx")
    sample = torch.from_numpy(x[:2])
    torch.onnx.export(model, (sample,), path, opset_version=args.opset, input_names=["pixel_values"],
                      output_names=["logits"], dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=True, dynamo=False)
    shutil.copyfile(os.path.join(args.model, "config.json"), os.path.join(args.out, "config.json"))

    m = onnx.load(path)
    onnx.checker.check_model(m)
    dim0 = m.graph.input[0].type.tensor_type.shape.dim[0]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = vision_data.threads()
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    diff = 0.0
    batches = [len(x), 1, 7]
    for bs in batches:
        for i in range(0, len(x), bs):
            got = sess.run(["logits"], {"pixel_values": x[i:i + bs]})[0]
            diff = max(diff, float(np.abs(got - ref[i:i + bs]).max()))
    vision_data.emit({
        "model": "model.onnx",
        "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        "inputs": [i.name for i in m.graph.input],
        "outputs": [o.name for o in m.graph.output],
        "dynamic_batch": bool(dim0.dim_param) and not dim0.HasField("dim_value"),
        "max_abs_logit_diff": diff,
        "checked_images": int(len(x)),
        "batch_sizes": batches,
        "bytes": os.path.getsize(path),
        "onnxruntime": ort.__version__,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
