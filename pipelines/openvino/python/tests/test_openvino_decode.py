"""openvino_decode.py's runtime: the stateful IR on OpenVINO's CPU plugin.

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_openvino_decode

A tiny random Llama is exported by optimum-intel (openvino_export.py: the KV cache in the model's
state) and compressed by NNCF to INT4 and INT8 weights (openvino_quantize.py); its reference is
the PyTorch model's greedy decode (generate_reference.generate). Through OpenVINORuntime each IR
decodes as it prefills, within the family's bound; a state fed at an offset of one (every
position one too far, or the prompt's last cache entry dropped from the state) fails the bound by
orders of magnitude.
"""

import contextlib
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import torch

import decode_check
import generate_reference
import openvino_decode
import openvino_export
import openvino_quantize

# The family's decode-consistency bound (pipelines/openvino/decode.go, DecodeBound).
BOUND = 1e-2


class ShiftedPositions(openvino_decode.OpenVINORuntime):
    """Decodes every token one position too far: the state fed at an offset of one (a prefill,
    from a reset state, keeps its positions)."""

    def positions(self, start, n):
        return super().positions(start + 1 if start else 0, n)


class DroppedEntry(openvino_decode.OpenVINORuntime):
    """Drops the prompt's last entry from the state after the prefill: every later token is one
    position early and misses one past token."""

    def start(self, prompt_ids):
        import openvino as ov

        logits = super().start(prompt_ids)
        for s in self.request.query_state():
            data = np.array(s.state.data, copy=True)
            assert data.shape[2] == len(prompt_ids), f"state {s.name} is {data.shape}, not [batch, heads, seq, dim]"
            s.state = ov.Tensor(np.ascontiguousarray(data[:, :, :-1]))
        self.pos -= 1
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


class OpenVINODecode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from transformers import AutoModelForCausalLM, LlamaConfig

        logging.disable(logging.INFO)
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
        cls.dirs = {"fp32": os.path.join(cls.tmp, "fp32")}
        rc, _ = run_main(openvino_export, ["--model", hf, "--out", cls.dirs["fp32"]])
        assert rc == 0, "openvino_export.py failed"
        for fmt, flags in (("int4", ["--sym", "--group-size", "32"]), ("int8", [])):
            cls.dirs[fmt] = os.path.join(cls.tmp, fmt)
            rc, _ = run_main(openvino_quantize, ["--in", cls.dirs["fp32"], "--out", cls.dirs[fmt],
                                                 "--weight-format", fmt] + flags)
            assert rc == 0, f"openvino_quantize.py {fmt} failed"

        rt = decode_check.TorchRuntime(model, torch)
        seqs = []
        for i, p in enumerate([[5, 9, 13, 3, 40, 41, 42, 43], [7, 7, 8, 30]]):
            tokens, stopped, ids, logp = generate_reference.generate(rt, p, 16, {2}, np)
            seqs.append({"id": f"p{i}", "prompt_ids": p, "tokens": tokens, "stopped_at_eos": stopped,
                         "crosses_window": None, "topk": {"ids": ids, "logp": logp}})
        cls.ref = {"eos_ids": [2], "max_new_tokens": 16, "sequences": seqs}

    @classmethod
    def tearDownClass(cls):
        logging.disable(logging.NOTSET)
        shutil.rmtree(cls.tmp)

    def runtime(self, cls, which):
        compiled, _, _ = openvino_decode.compile_ir(self.dirs[which], 1)
        return cls(compiled, np)

    def test_each_ir_decodes_as_it_prefills(self):
        for which in ("fp32", "int4", "int8"):
            with self.subTest(model=which):
                s, _ = decode_check.compare(self.runtime(openvino_decode.OpenVINORuntime, which), self.ref, np)
                self.assertEqual(s["steps"], sum(len(q["tokens"]) for q in self.ref["sequences"]))
                self.assertLess(s["decode_max_abs"], BOUND / 10)
                self.assertEqual(s["decode_top1"], 1.0)
                if which == "fp32":
                    # The uncompressed IR is the PyTorch model: it agrees with every token.
                    self.assertEqual(s["token_agreement"], 1.0)
                    self.assertLess(s["mean_kl"], 1e-4)

    def test_a_state_fed_at_an_offset_of_one_fails_the_bound(self):
        for which in ("int4", "int8"):
            for broken in (ShiftedPositions, DroppedEntry):
                with self.subTest(model=which, broken=broken.__name__):
                    s, _ = decode_check.compare(self.runtime(broken, which), self.ref, np)
                    self.assertGreater(s["decode_max_abs"], 100 * BOUND, f"{broken.__name__}: {s}")
                    print(f"{which} {broken.__name__}: decode max abs {s['decode_max_abs']:.3g}, "
                          f"top-1 {s['decode_top1']:.3f}", file=sys.stderr)

    def test_the_plugin_computes_exactly(self):
        # f32, an f32 cache and no int8 activations: the plugin's x86 defaults (bf16 where the
        # CPU has it, a u8 cache, dynamic quantization) move a decode off its prefill.
        _, computes, _ = openvino_decode.compile_ir(self.dirs["int4"], 1)
        self.assertEqual(computes, "f32, KV cache f32, dynamic quantization group 0")

    def test_main_reports_what_it_measured(self):
        path = os.path.join(self.tmp, "reference.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.ref, f)
        rc, out = run_main(openvino_decode, ["--ir", self.dirs["int4"], "--reference", path, "--threads", "1"])
        self.assertEqual(rc, 0)
        rep = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
        self.assertEqual(rep["sequences"], 2)
        self.assertEqual(rep["max_new_tokens"], 16)
        self.assertIn("CPU plugin (f32, KV cache f32, dynamic quantization group 0)", rep["runtime"])
        self.assertLess(rep["decode_max_abs"], BOUND)


if __name__ == "__main__":
    unittest.main()
