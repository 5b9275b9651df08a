"""Export a torchvision classifier (safetensors + config.json) to fp32 ONNX with a dynamic batch axis.

    python vision_export.py --model DIR --set IMAGES.npz --out DIR [--opset 18] [--images 64]

torch.onnx.export (the TorchScript exporter, eval mode, constant folding) writes
OUT/model.onnx: input "pixel_values" [batch, C, S, S] float32 (config.json's
preprocessing), output "logits" [batch, classes]. config.json is copied beside it. The
graph is checked in ONNX Runtime (CPU) against PyTorch on the first --images images of
the set, run as one batch and as batches of 1 and 7 (the batch axis must really be
dynamic).

TensorFlow "same" padding (timm's Conv2dSame, in the tf_ models' stride-2 convs) is exported
as a Pad with constant amounts, computed for config.json's input size (the only one the graph
takes): traced as is, the amounts become a float computation on the tensors' shapes
(Shape, Cast, Div, Ceil, Mul, Add, Sub, Clip) that the INT8 quantizer treats like
activations, inserting QuantizeLinear/DequantizeLinear on those scalars, so the quantized
graph pads by the wrong amounts (measured: blocks 2.0, 3.0 and 5.0's depthwise convs got
pads [0, 2], [1, 1], [0, 2] per spatial axis where [1, 2], [0, 1], [1, 2] are right).

Prints one JSON line, report() below (reports/vision_export.json): {"model", "opset", "inputs",
"outputs", "dynamic_batch", "max_abs_logit_diff", "checked_images", "batch_sizes", "bytes",
"static_same_pads", "onnxruntime"}.
"""

import argparse
import os
import shutil

import numpy as np

import edgepipe_env
import edgepipe_report
import vision_data


def static_same_padding(model, cfg):
    """Fix the pads of every Conv2dSame of model to those of a cfg-sized input; returns how many.
    The module's forward becomes F.pad with constant amounts then F.conv2d: the same arithmetic
    (timm's pad_same: zeros, the odd pixel after) at that size, and the exported node names
    (.../Pad, .../Conv) do not change."""
    import torch
    import torch.nn.functional as F

    try:
        from timm.layers.conv2d_same import Conv2dSame
        from timm.layers.padding import pad_same_arg
    except ImportError:  # no timm: no dynamic "same" padding either
        return 0
    convs = [m for m in model.modules() if isinstance(m, Conv2dSame)]
    if not convs:
        return 0
    sizes = {}
    hooks = [m.register_forward_pre_hook(lambda m, args: sizes.__setitem__(m, tuple(args[0].shape[-2:])))
             for m in convs]
    size = cfg["input_size"]
    with torch.no_grad():
        model(torch.zeros(1, cfg["in_channels"], size, size))
    for h in hooks:
        h.remove()

    def forward(self, x):
        return F.conv2d(F.pad(x, self.static_pads), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    for m in convs:
        if m not in sizes:
            raise SystemExit(f"a Conv2dSame of {cfg['architecture']} did not run on a {size}x{size} input")
        m.static_pads = tuple(int(p) for p in pad_same_arg(list(sizes[m]), list(m.weight.shape[-2:]),
                                                           list(m.stride), list(m.dilation)))
        m.forward = forward.__get__(m)
    return len(convs)


def reads_input(graph, tensor):
    """Whether tensor's value depends on the graph's inputs (a Pad's amounts must not: constant
    integer arithmetic, which ONNX Runtime folds, is fine)."""
    producers = {o: n for n in graph.node for o in n.output}
    inputs = {i.name for i in graph.input}
    todo, seen = [tensor], set()
    while todo:
        t = todo.pop()
        if t in inputs:
            return True
        if t in seen or t not in producers:
            continue
        seen.add(t)
        todo += [i for i in producers[t].input if i]
    return False


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

    torch.set_num_threads(edgepipe_env.threads())
    model, cfg = vision_data.load_model(args.model)
    images, _ = vision_data.load_set(args.set)
    x = vision_data.preprocess(images[: args.images], cfg)
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()  # the model as built, before static_same_padding
    static_pads = static_same_padding(model, cfg)
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
    opts.intra_op_num_threads = edgepipe_env.threads()
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    dynamic_pads = sum(1 for n in m.graph.node if n.op_type == "Pad" and len(n.input) > 1
                       and reads_input(m.graph, n.input[1]))
    if dynamic_pads:
        raise SystemExit(f"{path}: {dynamic_pads} Pad nodes compute their amounts in the graph: "
                         f"the INT8 quantizer would quantize that arithmetic")
    diff = 0.0
    batches = [len(x), 1, 7]
    for bs in batches:
        for i in range(0, len(x), bs):
            got = sess.run(["logits"], {"pixel_values": x[i:i + bs]})[0]
            diff = max(diff, float(np.abs(got - ref[i:i + bs]).max()))
    edgepipe_report.emit(report(m, dim0, diff, len(x), batches, os.path.getsize(path), static_pads, ort.__version__))
    return 0


def report(m, dim0, diff, checked, batches, size, static_pads, ort_version):
    return {
        "model": "model.onnx",
        "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        "inputs": [i.name for i in m.graph.input],
        "outputs": [o.name for o in m.graph.output],
        "dynamic_batch": bool(dim0.dim_param) and not dim0.HasField("dim_value"),
        "max_abs_logit_diff": diff,
        "checked_images": int(checked),
        "batch_sizes": batches,
        "bytes": size,
        "static_same_pads": static_pads,
        "onnxruntime": ort_version,
    }


if __name__ == "__main__":
    raise SystemExit(main())
