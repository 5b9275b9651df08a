"""Image sets and the classifiers every vision helper shares.

An image set is an .npz file (numpy's zip of .npy arrays, read with allow_pickle=False):
  images  uint8, (N, H, W) grayscale or (N, H, W, 3) RGB, values 0-255
  labels  int64, (N,) class indices; all -1 (UNLABELLED) for an unlabelled set, which is
          scored by top-1 agreement with the fp32 model only (a set is labelled or not as a
          whole: some -1 among class indices is an error)
A model folder holds model.safetensors (the state dict of a classifier build_model makes) and
config.json: {"architecture", "num_classes", "input_size", "in_channels", "mean", "std"}.
Preprocessing (resize, channels, normalization) is config.json's, the same for every
runtime, so PyTorch and ONNX Runtime score the same tensors.
"""

import json
import os

import numpy as np

# The built-in digits splits, by index into scikit-learn's load_digits() (1797 images):
# 3 of every 5 train, the 4th calibrates, the 5th tests.
SPLITS = {"train": (0, 1, 2), "calibration": (3,), "test": (4,)}

# The label of every image of an unlabelled set.
UNLABELLED = -1


def split_indices(n, split):
    keep = SPLITS[split]
    return np.array([i for i in range(n) if i % 5 in keep], dtype=np.int64)


def digits_split(split):
    """One split of scikit-learn's digits as (images uint8 NxHxW, labels int64)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    idx = split_indices(len(d.target), split)
    # The 8x8 images hold 0-16: spread them over 0-255 like any 8-bit image.
    images = np.rint(d.images[idx] * (255.0 / 16.0)).astype(np.uint8)
    return images, d.target[idx].astype(np.int64)


def load_set(path):
    with np.load(path, allow_pickle=False) as z:
        if "images" not in z or "labels" not in z:
            raise SystemExit(f"{path}: an image set needs arrays 'images' and 'labels' (has {sorted(z.keys())})")
        images, labels = z["images"], z["labels"]
    if images.dtype != np.uint8 or images.ndim not in (3, 4) or (images.ndim == 4 and images.shape[3] != 3):
        raise SystemExit(f"{path}: images must be uint8 (N, H, W) or (N, H, W, 3), got {images.dtype} {images.shape}")
    if labels.ndim != 1 or len(labels) != len(images):
        raise SystemExit(f"{path}: labels must be one class index per image, got shape {labels.shape} for {len(images)} images")
    labels = labels.astype(np.int64)
    if (labels == UNLABELLED).any() and not (labels == UNLABELLED).all():
        raise SystemExit(f"{path}: {int((labels == UNLABELLED).sum())} of {len(labels)} labels are -1: a set is labelled "
                         f"(class indices) or unlabelled (every label -1), not both")
    return images, labels


def is_unlabelled(labels):
    return len(labels) > 0 and bool((labels == UNLABELLED).all())


def save_set(path, images, labels):
    """np.savez's layout (stored .npy members), with a fixed member date: the same arrays
    always make the same bytes."""
    import io
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, arr in (("images", images), ("labels", labels)):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue())


CONFIG_KEYS = ("architecture", "num_classes", "input_size", "in_channels", "mean", "std")


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise SystemExit(f"{model_dir} has no config.json: an image classifier folder holds model.safetensors and config.json")
    with open(path) as f:
        cfg = json.load(f)
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise SystemExit(f"{path} lacks {', '.join(missing)}: it is not an image classifier's config "
                         f"(a text model in an image-classification recipe?)")
    return cfg


def preprocess(images, cfg):
    """uint8 images -> float32 NCHW tensors the model takes (numpy)."""
    import torch

    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    if x.ndim == 3:
        x = x.unsqueeze(1)
    else:
        x = x.permute(0, 3, 1, 2)
    c = cfg["in_channels"]
    if x.shape[1] == 1 and c == 3:
        x = x.expand(-1, 3, -1, -1)
    size = cfg["input_size"]
    if x.shape[2] != size or x.shape[3] != size:
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    mean = torch.tensor(cfg["mean"], dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(cfg["std"], dtype=torch.float32).view(1, -1, 1, 1)
    return ((x - mean) / std).contiguous().numpy()


# The architectures edgepipe builds, by config.json's "architecture".
ARCHITECTURES = ("mobilenet_v3_small", "tf_efficientnet_lite0")


def build_model(cfg):
    arch = cfg["architecture"]
    if arch == "mobilenet_v3_small":
        import torchvision

        return torchvision.models.mobilenet_v3_small(num_classes=cfg["num_classes"])
    if arch == "tf_efficientnet_lite0":
        import timm

        # pretrained=False: timm builds the layers only and downloads nothing; the weights
        # come from the folder's model.safetensors.
        return timm.create_model(arch, pretrained=False, num_classes=cfg["num_classes"])
    raise SystemExit(f"architecture {arch!r} is not one edgepipe builds ({', '.join(ARCHITECTURES)})")


def load_model(model_dir):
    """The classifier in eval mode, from safetensors (never pickle), and its config."""
    from safetensors.torch import load_file

    cfg = read_config(model_dir)
    model = build_model(cfg)
    state = load_file(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict(state, strict=True)
    model.eval()
    return model, cfg
