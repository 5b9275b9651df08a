"""Tests of vision_data.py, what every vision helper reads images and models with
(numpy, torch, scikit-learn: the vision toolchain).

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_vision_data

EDGEPIPE_VISION_DATA names the repository's data/ folder: the built-in image sets there
must be exactly what digits_split and save_set make (byte for byte).
"""

import contextlib
import hashlib
import os
import tempfile
import unittest

import numpy as np

import vision_data


class TestSplits(unittest.TestCase):
    def test_disjoint_and_complete(self):
        n = 1797
        parts = {s: set(vision_data.split_indices(n, s).tolist()) for s in vision_data.SPLITS}
        self.assertEqual(len(parts["train"]) + len(parts["calibration"]) + len(parts["test"]), n)
        self.assertFalse(parts["train"] & parts["test"])
        self.assertFalse(parts["train"] & parts["calibration"])
        self.assertFalse(parts["calibration"] & parts["test"])
        self.assertEqual(len(parts["test"]), 359)

    @unittest.skipUnless(os.environ.get("EDGEPIPE_VISION_DATA"), "set EDGEPIPE_VISION_DATA to the data/ folder")
    def test_builtin_sets_rebuild_byte_identical(self):
        with tempfile.TemporaryDirectory() as tmp:
            for split in ("calibration", "test"):
                images, labels = vision_data.digits_split(split)
                path = os.path.join(tmp, split + ".npz")
                vision_data.save_set(path, images, labels)
                shipped = os.path.join(os.environ["EDGEPIPE_VISION_DATA"], f"digits-{split}.npz")
                with open(path, "rb") as a, open(shipped, "rb") as b:
                    self.assertEqual(hashlib.sha256(a.read()).hexdigest(), hashlib.sha256(b.read()).hexdigest(), split)
                got_images, got_labels = vision_data.load_set(shipped)
                np.testing.assert_array_equal(got_images, images)
                np.testing.assert_array_equal(got_labels, labels)

    @unittest.skipUnless(os.environ.get("EDGEPIPE_VISION_DATA"), "set EDGEPIPE_VISION_DATA to the data/ folder")
    def test_photo_sets_rebuild_byte_identical(self):
        import vision_photos

        with tempfile.TemporaryDirectory() as tmp:
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                vision_photos.main_args(["--write", tmp])
            for name, n in (("skimage-photos", 72), ("skimage-photos-calibration", 36)):
                shipped = os.path.join(os.environ["EDGEPIPE_VISION_DATA"], name + ".npz")
                with open(os.path.join(tmp, name + ".npz"), "rb") as a, open(shipped, "rb") as b:
                    self.assertEqual(hashlib.sha256(a.read()).hexdigest(), hashlib.sha256(b.read()).hexdigest(), name)
                images, labels = vision_data.load_set(shipped)
                self.assertEqual(images.shape, (n, 224, 224, 3))
                self.assertTrue(vision_data.is_unlabelled(labels))
            # No view is in both sets.
            ev, _ = vision_data.load_set(os.path.join(tmp, "skimage-photos.npz"))
            cal, _ = vision_data.load_set(os.path.join(tmp, "skimage-photos-calibration.npz"))
            seen = {hashlib.sha256(a.tobytes()).hexdigest() for a in ev}
            self.assertFalse(seen & {hashlib.sha256(a.tobytes()).hexdigest() for a in cal})


class TestSets(unittest.TestCase):
    def save(self, tmp, **arrays):
        path = os.path.join(tmp, "s.npz")
        np.savez(path, **arrays)
        return path

    def test_refuses_what_is_not_an_image_set(self):
        with tempfile.TemporaryDirectory() as tmp:
            for arrays in ({"images": np.zeros((2, 8, 8), np.uint8)},
                           {"images": np.zeros((2, 8, 8), np.float32), "labels": np.zeros(2, np.int64)},
                           {"images": np.zeros((2, 8, 8), np.uint8), "labels": np.zeros(3, np.int64)},
                           {"images": np.zeros((2, 8, 8, 4), np.uint8), "labels": np.zeros(2, np.int64)},
                           # Half labelled: a set is labelled or unlabelled as a whole.
                           {"images": np.zeros((2, 8, 8), np.uint8), "labels": np.array([3, -1], np.int64)}):
                with self.assertRaises(SystemExit):
                    vision_data.load_set(self.save(tmp, **arrays))

    def test_unlabelled(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, labels = vision_data.load_set(self.save(tmp, images=np.zeros((2, 8, 8), np.uint8),
                                                       labels=np.full(2, vision_data.UNLABELLED, np.int64)))
            self.assertTrue(vision_data.is_unlabelled(labels))
            self.assertFalse(vision_data.is_unlabelled(np.array([0, 1])))

    def test_preprocess(self):
        cfg = {"input_size": 32, "in_channels": 3, "mean": [0.5] * 3, "std": [0.5] * 3}
        x = vision_data.preprocess(np.full((4, 8, 8), 255, np.uint8), cfg)
        self.assertEqual(x.shape, (4, 3, 32, 32))
        self.assertEqual(x.dtype, np.float32)
        np.testing.assert_allclose(x, 1.0)  # (1 - 0.5) / 0.5 everywhere
        rgb = vision_data.preprocess(np.zeros((1, 32, 32, 3), np.uint8), cfg)
        np.testing.assert_allclose(rgb, -1.0)


class TestImport(unittest.TestCase):
    """vision_import.remap on a state dict shaped like the package's (random values)."""

    def source(self, model):
        import re

        import vision_import

        inv_top = {v: k for k, v in vision_import.TOP.items()}
        flat = {f"{s}.{i}": n for n, (s, i) in enumerate((s, i) for s, st in enumerate(model.blocks) for i in range(len(st)))}
        out = {}
        for name, t in model.state_dict().items():
            m = re.fullmatch(r"blocks\.(\d+\.\d+)\.(\w+)\.(\w+)", name)
            if m:
                b = flat[m[1]]
                names = vision_import.SEPARABLE if b == 0 else vision_import.INVERTED
                mod = {v: k for k, v in names.items()}[m[2]]
                out[f"_blocks.{b}.{mod}.{m[3]}"] = t.clone()
            else:
                mod, _, p = name.partition(".")
                out[f"{inv_top[mod]}.{p}"] = t.clone()
        return out

    def test_remap_strict(self):
        import torch

        import vision_import

        model = vision_data.build_model(vision_import.CONFIG)
        src = self.source(model)
        self.assertEqual(len(src), 296)
        got = vision_import.remap(src, model)
        self.assertEqual(set(got), set(model.state_dict()))
        for broken in ({**src, "_extra.weight": torch.zeros(1)},
                       {k: v for k, v in src.items() if k != "_fc.bias"},
                       {**src, "_fc.weight": torch.zeros(10, 1280)}):
            with self.assertRaises(SystemExit):
                vision_import.remap(broken, model)


if __name__ == "__main__":
    unittest.main()


class TestStaticSamePadding(unittest.TestCase):
    """vision_export.static_same_padding: timm's TensorFlow "same" padding exported as Pads
    with constant amounts (input-dependent amounts are float arithmetic the INT8 quantizer
    wraps in QuantizeLinear/DequantizeLinear, which made the INT8 EfficientNet-Lite0 pad by
    the wrong amounts)."""

    def test_same_outputs_and_constant_pads(self):
        try:
            import onnx
            import timm  # noqa: F401
            import torch
        except ImportError as e:
            self.skipTest(f"needs the vision toolchain: {e}")
        import vision_export

        torch.manual_seed(0)
        cfg = {"architecture": "tf_efficientnet_lite0", "num_classes": 10, "input_size": 64, "in_channels": 3}
        model = vision_data.build_model(cfg).eval()
        x = torch.randn(2, 3, 64, 64)
        with torch.no_grad():
            want = model(x)
            self.assertEqual(vision_export.static_same_padding(model, cfg), 5)
            got = model(x)
        self.assertTrue(torch.allclose(want, got, atol=1e-5), float((want - got).abs().max()))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.onnx")
            torch.onnx.export(model, (x,), path, opset_version=18, input_names=["pixel_values"], output_names=["logits"],
                              dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
                              do_constant_folding=True, dynamo=False)
            g = onnx.load(path).graph
        pads = [n for n in g.node if n.op_type == "Pad"]
        self.assertEqual(len(pads), 5)
        self.assertFalse([n.name for n in pads if vision_export.reads_input(g, n.input[1])])
        self.assertTrue(vision_export.reads_input(g, pads[0].input[0]))


class TestOpenVINOPaddedBatch(unittest.TestCase):
    """openvino_vision_eval.run_padded: every call gets exactly the static batch, and the
    logits kept are the real images' own (the fill images' are dropped)."""

    def test_last_batch_filled_and_dropped(self):
        import openvino_vision_eval as ove

        seen = []

        def compiled(x):
            seen.append(x.shape)
            return [x.reshape(len(x), -1).sum(axis=1, keepdims=True)]

        x = np.arange(5 * 2 * 2, dtype=np.float32).reshape(5, 1, 2, 2)
        got = ove.run_padded(compiled, x[4:], 3)
        self.assertEqual(seen, [(3, 1, 2, 2)])
        np.testing.assert_array_equal(got, x[4:].reshape(1, -1).sum(axis=1, keepdims=True))
        got = ove.run_padded(compiled, x[:3], 3)
        self.assertEqual(seen[-1], (3, 1, 2, 2))
        self.assertEqual(got.shape, (3, 1))
