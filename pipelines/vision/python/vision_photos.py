"""Write the built-in unlabelled photo sets from the images scikit-image's wheel bundles.

    python vision_photos.py --write DIR    # DIR/skimage-photos.npz, DIR/skimage-photos-calibration.npz

The photos are files inside scikit-image 0.26.0's wheel (skimage/data/, read with
Pillow from the pinned lock; nothing is fetched, skimage.data's downloader is never
called): 7 RGB photographs and 5 grayscale ones, the grayscale repeated over 3 channels.
Each photo gives several square views resized to 224x224 (Pillow's bicubic, which
filters when it shrinks): the evaluation set takes 6, the calibration set 3 others, so
no view is in both. They have no class labels (ImageNet has no "astronaut" or "moon"):
an image set whose labels are all -1 is unlabelled, scored by top-1 agreement with the
fp32 model, never by accuracy (vision_data.UNLABELLED). The same package versions always
write the same bytes (vision_data.save_set).
"""

import argparse
import json
import os

import numpy as np

import vision_data

SIZE = 224
# Photographs (not drawings or test patterns) whose skimage.data docstring says they are
# public domain, CC0 or free of known copyright restrictions; moon.png (no statement) and
# motorcycle_left.png (the Middlebury stereo set, "please cite") are left out.
RGB = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "hubble_deep_field.jpg", "ihc.png", "retina.jpg"]
GRAY = ["camera.png", "coins.png", "brick.png", "grass.png", "gravel.png"]

# A view: (box as fractions of the short side: scale, x position 0-1, y position 0-1, flip).
# scale 0 is the whole picture squeezed square.
EVAL_VIEWS = [(0, 0, 0, False), (1.0, 0.5, 0.5, False), (1.0, 0.5, 0.5, True),
              (0.75, 0.0, 0.0, False), (0.75, 1.0, 1.0, False), (0.6, 0.5, 0.5, True)]
CALIBRATION_VIEWS = [(0.75, 1.0, 0.0, False), (0.75, 0.0, 1.0, True), (0.85, 0.5, 0.3, False)]


def photo_dir():
    import importlib.util

    spec = importlib.util.find_spec("skimage")
    return os.path.join(list(spec.submodule_search_locations)[0], "data")


def load(name):
    from PIL import Image

    path = os.path.join(photo_dir(), name)
    if not os.path.exists(path):
        raise SystemExit(f"{path} is not in this scikit-image: the photo sets need scikit-image 0.26.0 (the vision lock)")
    with Image.open(path) as im:
        return im.convert("RGB")


def view(im, v):
    from PIL import Image

    scale, fx, fy, flip = v
    w, h = im.size
    if scale:
        side = round(scale * min(w, h))
        x, y = round(fx * (w - side)), round(fy * (h - side))
        im = im.crop((x, y, x + side, y + side))
    im = im.resize((SIZE, SIZE), Image.BICUBIC)
    if flip:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(im, dtype=np.uint8)


def build(views):
    names = RGB + GRAY
    images = [view(load(n), v) for n in names for v in views]
    return np.stack(images), names


def main_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="DIR", required=True)
    args = ap.parse_args(argv)
    os.makedirs(args.write, exist_ok=True)
    res = {}
    for name, views in (("skimage-photos", EVAL_VIEWS), ("skimage-photos-calibration", CALIBRATION_VIEWS)):
        images, photos = build(views)
        path = os.path.join(args.write, name + ".npz")
        vision_data.save_set(path, images, np.full(len(images), vision_data.UNLABELLED, dtype=np.int64))
        res[name] = {"path": path, "images": int(len(images)), "photos": photos}
    print(json.dumps(res, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main_args())
