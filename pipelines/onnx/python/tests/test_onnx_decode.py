"""onnx_decode.py's runtime: ONNX Runtime with the exported past key/values.

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_onnx_decode

A tiny random Llama is exported with its KV cache by optimum-onnx (onnx_export.py's export) and
quantized to MatMulNBits (onnx_quantize.py); its reference is the PyTorch model's greedy decode
(generate_reference.generate). Through OnnxRuntime, the fp32 graph and the 4-bit one decode as
they prefill, within the family's bounds; a past fed at an offset of one (every position one too
far, or the prompt's last past entry dropped) fails both bounds by orders of magnitude.
"""

import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import torch

import decode_check
import generate_reference
import onnx_decode
import onnx_export
import onnx_quantize

# The family's decode-consistency bounds (pipelines/onnx/decode.go, DecodeBounds).
BOUNDS = {"fp32": 1e-3, "int4": 1e-3}


class ShiftedPositions(onnx_decode.OnnxRuntime):
    """Decodes every token one position too far: the past fed at an offset of one (a prefill,
    from an empty past, keeps its positions)."""

    def positions(self, start, n):
        return super().positions(start + 1 if start else 0, n)


class DroppedEntry(onnx_decode.OnnxRuntime):
    """Drops the prompt's last entry from the past after the prefill: every later token is one
    position early and misses one past token."""

    def start(self, prompt_ids):
        logits = super().start(prompt_ids)
        self.past = {k: v[:, :, :-1].copy() for k, v in self.past.items()}
        return logits


def run_main(module, argv):
    """A helper's main() on argv: its exit status and stdout."""
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [module.__name__ + ".py"] + argv
    try:
        with contextlib.redirect_stdout(out):
            rc = module.main()
    finally:
        sys.argv = saved
    return rc, out.getvalue()


class OnnxDecode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from transformers import AutoModelForCausalLM, LlamaConfig

        cls.tmp = tempfile.mkdtemp()
        torch.manual_seed(0)
        # Logits that spread like a trained model's (several units), so that a wrong position
        # moves them by as much as it does in a real one.
        cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                          initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        model.eval()
        hf = os.path.join(cls.tmp, "hf")
        model.save_pretrained(hf)
        cls.fp32 = os.path.join(cls.tmp, "fp32")
        rc, _ = run_main(onnx_export, ["--model", hf, "--out", cls.fp32])
        assert rc == 0, "onnx_export.py failed"
        cls.int4 = os.path.join(cls.tmp, "int4")
        rc, _ = run_main(onnx_quantize, ["--in", os.path.join(cls.fp32, "model.onnx"), "--out", cls.int4,
                                         "--block-size", "32", "--v-down-bits", "8"])
        assert rc == 0, "onnx_quantize.py failed"

        rt = decode_check.TorchRuntime(model, torch)
        seqs = []
        for i, p in enumerate([[5, 9, 13, 3, 40, 41, 42, 43], [7, 7, 8, 30]]):
            tokens, stopped, ids, logp = generate_reference.generate(rt, p, 16, {2}, np)
            seqs.append({"id": f"p{i}", "prompt_ids": p, "tokens": tokens, "stopped_at_eos": stopped,
                         "crosses_window": None, "topk": {"ids": ids, "logp": logp}})
        cls.ref = {"eos_ids": [2], "max_new_tokens": 16, "sequences": seqs}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def runtime(self, cls, which):
        return cls(onnx_decode.session(os.path.join(getattr(self, which), "model.onnx"), 1), np)

    def test_the_export_decodes_as_it_prefills(self):
        s, per = decode_check.compare(self.runtime(onnx_decode.OnnxRuntime, "fp32"), self.ref, np)
        self.assertEqual(s["steps"], sum(len(q["tokens"]) for q in self.ref["sequences"]))
        self.assertLess(s["decode_max_abs"], BOUNDS["fp32"] / 10)
        self.assertEqual(s["decode_top1"], 1.0)
        # The fp32 graph is the PyTorch model: it agrees with the reference's every token.
        self.assertEqual(s["token_agreement"], 1.0)
        self.assertLess(s["mean_kl"], 1e-4)

    def test_the_4bit_model_decodes_as_it_prefills(self):
        s, _ = decode_check.compare(self.runtime(onnx_decode.OnnxRuntime, "int4"), self.ref, np)
        self.assertLess(s["decode_max_abs"], BOUNDS["int4"] / 5)
        self.assertEqual(s["decode_top1"], 1.0)

    def test_a_past_fed_at_an_offset_of_one_fails_the_bound(self):
        for which in ("fp32", "int4"):
            for broken in (ShiftedPositions, DroppedEntry):
                with self.subTest(model=which, broken=broken.__name__):
                    s, _ = decode_check.compare(self.runtime(broken, which), self.ref, np)
                    self.assertGreater(s["decode_max_abs"], 100 * BOUNDS[which], f"{broken.__name__}: {s}")
                    print(f"{which} {broken.__name__}: decode max abs {s['decode_max_abs']:.3g}, "
                          f"top-1 {s['decode_top1']:.3f}", file=sys.stderr)

    def test_a_graph_without_its_past_is_refused(self):
        nopast = os.path.join(self.tmp, "nopast")
        rc, _ = run_main(onnx_export, ["--model", os.path.join(self.tmp, "hf"), "--out", nopast, "--no-past"])
        self.assertEqual(rc, 0)
        with self.assertRaisesRegex(onnx_decode.GraphError, "no past_key_values inputs"):
            onnx_decode.OnnxRuntime(onnx_decode.session(os.path.join(nopast, "model.onnx"), 1), np)

    def test_main_reports_what_it_measured(self):
        import json

        path = os.path.join(self.tmp, "reference.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.ref, f)
        rc, out = run_main(onnx_decode, ["--onnx", os.path.join(self.int4, "model.onnx"), "--reference", path,
                                         "--threads", "1"])
        self.assertEqual(rc, 0)
        rep = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
        self.assertEqual(rep["sequences"], 2)
        self.assertEqual(rep["max_new_tokens"], 16)
        self.assertIn("ONNX Runtime", rep["runtime"])
        self.assertLess(rep["decode_max_abs"], BOUNDS["int4"])


if __name__ == "__main__":
    unittest.main()
