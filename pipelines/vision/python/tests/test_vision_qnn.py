"""vision_qnn.py on a small random convolutional classifier with 16x16 inputs, through QNN's HTP
backend and its simulator.

Runs in the qnn toolchain (skips cleanly elsewhere); pipelines/python_test.go runs it with the
helpers written out in one folder (EDGEPIPE_HELPERS), as edgepipe runs them:

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_vision_qnn

Each subcommand runs as a subprocess, the way edgepipe runs it: quantize fixes the exported
dynamic batch to 1 and quantizes every Conv and Gemm (their weights per channel); compile writes
an EPContext wrapper of EPContext nodes only and its context binary; eval scores it on the
simulator, and on the images it scores only when asked for a subset. A graph with a node QNN's
HTP backend does not take is refused at compile time with the node named, never run on the CPU.
About a minute on two shared cores.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    import onnxruntime_qnn  # noqa: F401
    import torch
    HAVE = True
except ImportError as e:  # not the qnn toolchain
    HAVE, WHY = False, str(e)

HERE = os.environ.get("EDGEPIPE_HELPERS") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE, CLASSES, SOC = 16, 4, ["--soc-model", "57", "--htp-arch", "75"]


def run(*args, code=0):
    p = subprocess.run([sys.executable, os.path.join(HERE, "vision_qnn.py"), *args], capture_output=True, text=True)
    if p.returncode != code:
        raise AssertionError(f"vision_qnn.py {args[0]} exited {p.returncode}, want {code}: {p.stderr[-3000:]}")
    if code:
        return p.stderr
    # QNN's own libraries print a line of their own on stdout; the report is the JSON line, as
    # edgepipe reads it.
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, f"want one report line on stdout: {p.stdout[-2000:]}"
    report = json.loads(lines[0])
    # The subcommand's result is under its name, the others are null (report() in vision_qnn.py).
    assert sorted(report) == ["compile", "eval", "quantize"], report
    assert all(report[k] is None for k in report if k != args[0]), report
    return report[args[0]]


@unittest.skipUnless(HAVE, "needs the qnn toolchain (onnxruntime-qnn, torch, onnx)")
class VisionQNN(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import vision_data

        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.dir = cls.tmp.name
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, stride=2, padding=1),
            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, CLASSES)).eval()
        cfg = {"architecture": "mobilenet_v3_small", "num_classes": CLASSES, "input_size": SIZE, "in_channels": 3,
               "mean": [0.5] * 3, "std": [0.5] * 3}
        os.makedirs(os.path.join(d, "fp32"))
        with open(os.path.join(d, "fp32", "config.json"), "w") as f:
            json.dump(cfg, f)
        cls.fp32 = os.path.join(d, "fp32", "model.onnx")
        torch.onnx.export(model, (torch.zeros(1, 3, SIZE, SIZE),), cls.fp32, input_names=["pixel_values"],
                          output_names=["logits"], dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=18, dynamo=False)
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, (12, SIZE, SIZE, 3), dtype=np.uint8)
        x = vision_data.preprocess(images, cfg)
        with torch.no_grad():
            labels = model(torch.from_numpy(x)).argmax(1).numpy().astype(np.int64)
        cls.set = os.path.join(d, "set.npz")
        vision_data.save_set(cls.set, images, labels)
        cls.ref = os.path.join(d, "ref.npy")
        np.save(cls.ref, labels)  # the fp32 model's own classes: the reference

        cls.q = run("quantize", "--in", cls.fp32, "--calibration", cls.set, "--out", os.path.join(d, "qdq"))
        cls.c = run("compile", "--qdq", os.path.join(d, "qdq", "model.onnx"), "--out", os.path.join(d, "ctx"), *SOC)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_quantize_static_batch_per_channel(self):
        q = self.q
        self.assertEqual(q["shape"], [1, 3, SIZE, SIZE])
        self.assertEqual(q["fixed_dims"], ["batch"])
        self.assertEqual(q["float_conv_gemm"], 0)
        self.assertEqual(q["per_channel_weights"], 3)  # both Convs and the Gemm
        self.assertEqual(q["calibration_images"], 12)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "qdq", "config.json")))

    def test_compile_epcontext_only(self):
        c = self.c
        self.assertEqual(c["qnn_version"], "2.51.0")
        self.assertEqual(c["epcontext_nodes"], 1)
        ctx = os.path.join(self.dir, "ctx")
        self.assertGreater(os.path.getsize(os.path.join(ctx, c["context_binary"])), 0)
        ops = {n.op_type for n in onnx.load(os.path.join(ctx, "model_ctx.onnx")).graph.node}
        self.assertEqual(ops, {"EPContext"})

    def test_eval_on_the_simulator(self):
        model = os.path.join(self.dir, "ctx", "model_ctx.onnx")
        out = os.path.join(self.dir, "pred.npy")
        r = run("eval", "--model", model, "--set", self.set, "--config", os.path.join(self.dir, "ctx"),
                "--predictions", out, "--reference", self.ref, *SOC)
        self.assertEqual((r["images"], r["set_images"]), (12, 12))
        self.assertEqual(r["reference_top1"], 1.0)
        self.assertEqual(r["top1"], r["agreement"])  # labels are the reference's classes
        self.assertEqual(r["correct"], int(round(r["top1"] * 12)))
        self.assertEqual(np.load(out).shape, (12,))
        sub = run("eval", "--model", model, "--set", self.set, "--config", os.path.join(self.dir, "ctx"),
                  "--predictions", out, "--reference", self.ref, "--images", "5", *SOC)
        self.assertEqual((sub["images"], sub["set_images"]), (5, 12))
        self.assertEqual(np.load(out).shape, (5,))

    def test_a_node_the_htp_refuses_is_not_run_on_the_cpu(self):
        # A float Det after the classifier: no QNN op computes it.
        m = onnx.load(os.path.join(self.dir, "qdq", "model.onnx"))
        logits = m.graph.output[0].name
        m.graph.node.append(onnx.helper.make_node("Reshape", [logits, "shape22"], ["square"], name="to_square"))
        m.graph.initializer.append(onnx.numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "shape22"))
        m.graph.node.append(onnx.helper.make_node("Det", ["square"], ["det"], name="det_on_cpu"))
        del m.graph.output[:]
        m.graph.output.append(onnx.helper.make_tensor_value_info("det", onnx.TensorProto.FLOAT, []))
        bad = os.path.join(self.dir, "bad")
        os.makedirs(bad)
        onnx.save(m, os.path.join(bad, "model.onnx"))
        err = run("compile", "--qdq", os.path.join(bad, "model.onnx"), "--out", os.path.join(self.dir, "badctx"), *SOC, code=3)
        self.assertIn("refused the graph", err)


if __name__ == "__main__":
    unittest.main()
