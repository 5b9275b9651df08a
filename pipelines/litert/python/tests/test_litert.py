"""litert_convert.py and litert_validate.py on a random MobileNetV3-Small with 32x32 inputs.

Runs in the litert toolchain (skips cleanly elsewhere); pipelines/python_test.go runs it with the
helpers written out in one folder (EDGEPIPE_HELPERS), as edgepipe runs them:

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_litert

The model is random (seeded): its BatchNorm statistics are set from data and its last layer
is scaled so its logits spread like a trained classifier's; nothing is trained. Each helper runs
as a subprocess, the way edgepipe runs it; the checks read its JSON report and the validator's
(the LiteRT interpreter's view of the .tflite). The two conversions take 3-10 minutes on two
shared cores.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import torch
    import torchvision
    from ai_edge_litert.interpreter import Interpreter  # noqa: F401
    import litert_torch  # noqa: F401
    HAVE = True
except ImportError as e:  # not the litert toolchain
    HAVE, WHY = False, str(e)

HERE = os.environ.get("EDGEPIPE_HELPERS") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE, CLASSES = 32, 10


def run(script, *args):
    p = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{script} exited {p.returncode}: {p.stderr[-3000:]}")
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, f"{script} printed more than its report line on stdout: {p.stdout[-2000:]}"
    return json.loads(lines[0])


@unittest.skipUnless(HAVE, "needs the litert toolchain (torch, torchvision, litert_torch, ai_edge_litert)")
class LiteRTConvert(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from safetensors.torch import save_file

        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.dir = cls.tmp.name
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        model = torchvision.models.mobilenet_v3_small(num_classes=CLASSES)
        # Smooth, image-like inputs: a random field upsampled, so activations have structure.
        def images(n):
            small = torch.from_numpy(rng.standard_normal((n, 3, 8, 8)).astype(np.float32))
            return torch.nn.functional.interpolate(small, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
        # Running BatchNorm statistics from data (train-mode forwards, no gradient step).
        model.train()
        with torch.no_grad():
            for _ in range(4):
                model(images(32))
        model.eval()
        # torchvision initialises the last layer with std 0.01 and no bias: a random model's logits
        # are ~1e-4 wide, under int8's smallest output step. Scale them to a spread a trained
        # classifier has (std 2), so top-1 means something after quantization.
        with torch.no_grad():
            spread = float(model(images(32)).std())
            model.classifier[3].weight.mul_(2.0 / spread)
        cls.model = model
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(d, "m.safetensors"))
        np.save(os.path.join(d, "calib.npy"), images(32).numpy())
        cls.x = images(64).numpy()
        np.save(os.path.join(d, "x.npy"), cls.x)
        with torch.no_grad():
            cls.ref = model(torch.from_numpy(cls.x)).numpy()
        np.save(os.path.join(d, "ref.npy"), cls.ref)
        # Labels: the float model's own classes, so the float model's accuracy is 1 by construction.
        np.save(os.path.join(d, "y.npy"), cls.ref.argmax(1).astype(np.int64))
        common = ["--weights", os.path.join(d, "m.safetensors"), "--num-classes", str(CLASSES), "--input-size", str(SIZE)]
        cls.fp32 = run("litert_convert.py", *common, "--mode", "fp32", "--out", os.path.join(d, "fp32.tflite"))
        cls.int8 = run("litert_convert.py", *common, "--mode", "int8", "--out", os.path.join(d, "int8.tflite"),
                       "--calibration", os.path.join(d, "calib.npy"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def validate(self, name, *extra):
        d = self.dir
        return run("litert_validate.py", "--model", os.path.join(d, name), "--images", os.path.join(d, "x.npy"),
                   "--labels", os.path.join(d, "y.npy"), "--reference", os.path.join(d, "ref.npy"), *extra)

    def test_fp32_matches_torch(self):
        r = self.fp32
        self.assertEqual(r["input"]["dtype"], "float32")
        self.assertEqual(r["input"]["shape"], [1, 3, SIZE, SIZE])
        self.assertEqual(r["weights"].get("int8", 0), 0)
        self.assertGreater(r["weights"].get("float32", 0), 50)  # 52 convolutions and 2 linear layers
        v = self.validate("fp32.tflite")
        spread = float(self.ref.max() - self.ref.min())
        self.assertLess(v["reference"]["max_abs_logit_diff"], 1e-3 * max(spread, 1.0), v)
        self.assertEqual(v["reference"]["agreement"], 1.0)
        self.assertEqual(v["top1"], 1.0)
        self.assertEqual(v["reference"]["drop"], 0.0)

    def test_int8_is_full_integer(self):
        r = self.int8
        self.assertEqual(r["input"]["dtype"], "int8")
        self.assertEqual(r["output"]["dtype"], "int8")
        self.assertGreater(r["input"]["scale"], 0)
        self.assertEqual(r["calibration_samples"], 32)
        self.assertTrue(r["per_channel"])
        # Every convolution and fully-connected weight is int8.
        self.assertEqual(set(r["weights"]), {"int8"}, r["weights"])
        self.assertEqual(r["weights"]["int8"], self.fp32["weights"]["float32"])
        self.assertGreater(r["ops"].get("QUANTIZE", 0), 0)
        self.assertLess(r["bytes"], self.fp32["bytes"] * 0.4, (r["bytes"], self.fp32["bytes"]))

    def test_int8_agrees(self):
        logits = os.path.join(self.dir, "int8_logits.npy")
        v = self.validate("int8.tflite", "--save-logits", logits)
        self.assertEqual(v["samples"], len(self.x))
        # Random weights are harder than a trained model's (the digits model agrees on 99%);
        # most top-1s must still agree.
        self.assertGreaterEqual(v["reference"]["agreement"], 0.6, v)
        self.assertAlmostEqual(v["reference"]["drop"], 1.0 - v["top1"], places=9)
        # The dequantized logits follow the float ones. Not their maximum difference: static
        # quantization clips logits beyond the calibrated output range (measured: the largest
        # logits of unseen images saturate while every top-1 agrees).
        q = np.load(logits)
        self.assertEqual(q.shape, self.ref.shape)
        # Measured: correlation 0.80 here, with a median difference of half the logits' standard
        # deviation (random weights quantize worse: the digits model has 0.997 and 0.05); logits
        # unrelated to the float model's correlate near 0.
        corr = float(np.corrcoef(q.ravel(), self.ref.ravel())[0, 1])
        self.assertGreater(corr, 0.6, (corr, v))

    def test_bad_inputs_fail_with_the_fix(self):
        d = self.dir
        p = subprocess.run([sys.executable, os.path.join(HERE, "litert_convert.py"), "--weights",
                            os.path.join(d, "m.safetensors"), "--num-classes", "7", "--input-size", str(SIZE),
                            "--mode", "fp32", "--out", os.path.join(d, "bad.tflite")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--num-classes", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "bad.tflite")))
        np.save(os.path.join(d, "x16.npy"), self.x[:, :, :16, :16])
        p = subprocess.run([sys.executable, os.path.join(HERE, "litert_validate.py"), "--model",
                            os.path.join(d, "fp32.tflite"), "--images", os.path.join(d, "x16.npy")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("does not fit the model's input", p.stderr)


if __name__ == "__main__":
    unittest.main()
