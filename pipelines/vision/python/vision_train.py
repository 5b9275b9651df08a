"""Train the built-in vision model: torchvision's MobileNetV3-Small on scikit-learn's digits.

    python vision_train.py --out DIR [--epochs 10]
    python vision_train.py --write-splits DIR      # the calibration and test sets as .npz

Reproducible: fixed seeds, torch's deterministic algorithms, one thread, the pinned
vision toolchain, AVX2 kernels on every x86-64 CPU; two runs write bit-identical
model.safetensors, on AVX2 and AVX-512 hosts alike. The 8x8 digits are
upscaled to 32x32 (bilinear) and repeated over 3 channels; the split is by index
(vision_data.SPLITS): the model never sees the calibration or test images.

Writes DIR/model.safetensors and DIR/config.json, and prints one JSON line:
{"model", "params", "train_images", "epochs", "train_accuracy", "test_accuracy", "sha256",
"reference_build" (whether the bytes are the reference build's), "torch"}; a build that differs from
the reference also says so on stderr.
"""

import argparse
import hashlib
import json
import os
import platform
import random
import sys

# The same kernels on every x86-64 host, set before torch (and the oneDNN
# and MKL inside it) loads: they pick AVX-512 and VNNI code paths where the
# CPU has them, and training through those writes other weights (an
# AVX-512 host wrote a model of 95.26% top-1 instead of 98.05%).
# ATEN_CPU_CAPABILITY alone was not enough; with oneDNN and MKL held to
# AVX2 as well, that host wrote the reference build's bytes.
if platform.machine().lower() in ("x86_64", "amd64"):
    for _k, _v in (("ATEN_CPU_CAPABILITY", "avx2"), ("ONEDNN_MAX_CPU_ISA", "AVX2"),
                   ("MKL_CBWR", "AVX2"), ("MKL_ENABLE_INSTRUCTIONS", "AVX2")):
        os.environ[_k] = _v

import numpy as np

import vision_data

SEED = 20261203
EPOCHS = 10
# model.safetensors as the reference build wrote it (EPOCHS, x86-64 AVX2 kernels, 98.05% top-1).
REFERENCE_SHA256 = "3a1c9e6388cac509560be46d842c87b130700a35bdb028269f2c3db6f92b50a2"
CONFIG = {
    "architecture": "mobilenet_v3_small",
    "num_classes": 10,
    "input_size": 32,
    "in_channels": 3,
    # The digits' own statistics would do as well; ImageNet's keep the usual convention.
    "mean": [0.5, 0.5, 0.5],
    "std": [0.5, 0.5, 0.5],
    "labels": [str(i) for i in range(10)],
    "dataset": "scikit-learn load_digits, 8x8 upscaled to 32x32",
}


def write_splits(out):
    os.makedirs(out, exist_ok=True)
    res = {}
    for split in ("calibration", "test"):
        images, labels = vision_data.digits_split(split)
        path = os.path.join(out, f"digits-{split}.npz")
        vision_data.save_set(path, images, labels)
        res[split] = {"path": path, "images": int(len(labels))}
    print(json.dumps(res, sort_keys=True), flush=True)
    return 0


def accuracy(model, x, y):
    import torch

    with torch.no_grad():
        pred = torch.cat([model(x[i:i + 256]).argmax(1) for i in range(0, len(x), 256)])
    return float((pred == y).float().mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--write-splits", metavar="DIR")
    args = ap.parse_args()
    if args.write_splits:
        return write_splits(args.write_splits)
    if not args.out:
        ap.error("--out is required")

    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)

    images, labels = vision_data.digits_split("train")
    x = torch.from_numpy(vision_data.preprocess(images, CONFIG))
    y = torch.from_numpy(labels)
    model = vision_data.build_model(CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=args.epochs * ((len(x) + 63) // 64))
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(args.epochs):
        model.train()
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 64):
            b = perm[i:i + 64]
            xb = x[b]
            # Shift each batch by up to 2 pixels (zero-filled): the digits are centred, the test set too,
            # but a shift keeps 1078 images from being memorised.
            dx, dy = (int(v) for v in torch.randint(-2, 3, (2,), generator=gen))
            xb = torch.roll(xb, shifts=(dy, dx), dims=(2, 3))
            loss = torch.nn.functional.cross_entropy(model(xb), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    # torchvision's MobileNetV3 keeps BatchNorm running statistics with momentum 0.01, far too
    # slow for a few hundred steps: recompute them as exact averages over the training images.
    for mod in model.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    model.train()
    with torch.no_grad():
        for i in range(0, len(x), 64):
            model(x[i:i + 64])
    for mod in model.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.momentum = 0.01
    model.eval()
    timages, tlabels = vision_data.digits_split("test")
    test_acc = accuracy(model, torch.from_numpy(vision_data.preprocess(timages, CONFIG)), torch.from_numpy(tlabels))
    train_acc = accuracy(model, x, y)

    os.makedirs(args.out, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    path = os.path.join(args.out, "model.safetensors")
    # One metadata key: safetensors writes its metadata map in hash order, so two keys can
    # swap places between runs (same tensors, different bytes); the architecture is in config.json.
    save_file(state, path, metadata={"format": "pt"})
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != REFERENCE_SHA256 and args.epochs == EPOCHS:
        print(f"vision_train: warning: the weights (sha256 {sha[:12]}) differ from the reference build's "
              f"({REFERENCE_SHA256[:12]}): this CPU trains differently, so accuracies will differ from the README's",
              file=sys.stderr)
    # For the build log: edgepipe reads the model folder, not this line (no report type).
    print(json.dumps({"model": "model.safetensors", "params": sum(p.numel() for p in model.parameters()),
                      "train_images": len(x), "epochs": args.epochs, "train_accuracy": train_acc,
                      "test_accuracy": test_acc, "sha256": sha, "reference_build": sha == REFERENCE_SHA256,
                      "torch": torch.__version__}, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
