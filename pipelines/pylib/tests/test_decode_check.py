"""decode_check.py (what every decode helper measures) and generate_reference.py.

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_decode_check

A KV cache fed at an offset of one (the positions shifted, or one past entry dropped) must fail
the decode-consistency bound the families use (1e-3) by orders of magnitude, on tiny random
models (one with a sliding window, decoded across it) and on the built-in SmolLM2
(EDGEPIPE_DECODE_MODEL, with EDGEPIPE_DECODE_PROMPTS and EDGEPIPE_DECODE_TEXT), while the
correct decode stays far inside it; generate_reference.py's reference of a model decoded
through its own runtime agrees with itself token for token.
"""

import io
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import torch

import decode_check
import generate_reference
import ppl_scoring

# The families' decode-consistency bound (pipelines/llmcompressor/decode.go, pipelines/mlc/decode.go).
BOUND = 1e-3


class ShiftedPositions(decode_check.TorchRuntime):
    """Decodes with every position one too far: the cache fed at an offset of one."""

    def step(self, token):
        pos = self.cache.get_seq_length()
        with self.torch.inference_mode():
            out = self.model(input_ids=self.torch.tensor([[token]]), past_key_values=self.cache, use_cache=True,
                             position_ids=self.torch.tensor([[pos + 1]]), logits_to_keep=1)
        self.cache = out.past_key_values
        return out.logits[0, -1].float().numpy()


class DroppedEntry(decode_check.TorchRuntime):
    """Drops the prompt's last entry from the cache after the prefill: every later token is one
    position early and misses one past token."""

    def start(self, prompt_ids):
        logits = super().start(prompt_ids)
        self.cache.crop(len(prompt_ids) - 1)
        return logits


def tiny_model(config_class, **kw):
    """A random model whose logits spread like a trained one's (several units), so that a
    wrong position moves them by as much as it does in a real model."""
    torch.manual_seed(0)
    cfg = config_class(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.3, **kw)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.eval()
    return model


def reference_of(model, prompts, max_new, eos=(1,)):
    """A reference as generate_reference.py writes it, generated through the model's own cache."""
    rt = decode_check.TorchRuntime(model, torch)
    seqs = []
    for i, p in enumerate(prompts):
        tokens, stopped, ids, logp = generate_reference.generate(rt, p, max_new, set(eos), np)
        seqs.append({"id": f"p{i}", "prompt_ids": p, "tokens": tokens, "stopped_at_eos": stopped, "crosses_window": None,
                     "topk": {"ids": ids, "logp": logp}})
    return {"eos_ids": list(eos), "max_new_tokens": max_new, "sequences": seqs}


class Comparison(unittest.TestCase):
    def test_a_model_agrees_with_its_own_reference(self):
        from transformers import LlamaConfig

        model = tiny_model(LlamaConfig)
        ref = reference_of(model, [[5, 9, 13, 2, 40], [7, 7, 8]], 12)
        s, per = decode_check.compare(decode_check.TorchRuntime(model, torch), ref, np)
        self.assertEqual(s["sequences"], 2)
        self.assertEqual(s["steps"], sum(len(q["tokens"]) for q in ref["sequences"]))
        self.assertLess(s["decode_max_abs"], 1e-4)
        self.assertEqual(s["decode_top1"], 1.0)
        self.assertEqual(s["token_agreement"], 1.0)
        self.assertIsNone(s["first_divergence"])
        self.assertLess(s["mean_kl"], 1e-6)
        self.assertEqual(len(per), 2)

    def test_a_cache_fed_at_an_offset_of_one_fails_the_bound(self):
        from transformers import LlamaConfig

        model = tiny_model(LlamaConfig)
        ref = reference_of(model, [[5, 9, 13, 2, 40, 41, 42, 43], [7, 7, 8, 30]], 16)
        good, _ = decode_check.compare(decode_check.TorchRuntime(model, torch), ref, np)
        self.assertLess(good["decode_max_abs"], BOUND / 10)
        for broken in (ShiftedPositions, DroppedEntry):
            with self.subTest(broken=broken.__name__):
                s, _ = decode_check.compare(broken(model, torch), ref, np)
                self.assertGreater(s["decode_max_abs"], 100 * BOUND, f"{broken.__name__}: {s}")
                self.assertGreater(s["mean_kl"], good["mean_kl"])

    def test_a_different_model_diverges(self):
        from transformers import LlamaConfig

        model = tiny_model(LlamaConfig)
        ref = reference_of(model, [[5, 9, 13, 2, 40]], 24)
        other = tiny_model(LlamaConfig)
        with torch.no_grad():
            for p in other.parameters():
                p.add_(0.5 * torch.randn_like(p))
        s, _ = decode_check.compare(decode_check.TorchRuntime(other, torch), ref, np)
        # Still consistent with itself, no longer the reference's model.
        self.assertLess(s["decode_max_abs"], BOUND)
        self.assertLess(s["token_agreement"], 1.0)
        self.assertIsNotNone(s["first_divergence"])
        self.assertGreater(s["mean_kl"], 0.01)

    def test_stops_like_original(self):
        from transformers import LlamaConfig

        model = tiny_model(LlamaConfig)
        ref = reference_of(model, [[5, 9, 13]], 6)
        seq = ref["sequences"][0]
        # Make the reference say the last token it generated was its EOS.
        ref["eos_ids"] = [seq["tokens"][-1]]
        seq["stopped_at_eos"] = True
        s, _ = decode_check.compare(decode_check.TorchRuntime(model, torch), ref, np)
        self.assertIs(s["stops_like_original"], True)
        ref["eos_ids"] = [95 if seq["tokens"][-1] != 95 else 94]
        s, _ = decode_check.compare(decode_check.TorchRuntime(model, torch), ref, np)
        self.assertIs(s["stops_like_original"], False)

    def test_kl_is_ppl_scorings(self):
        rng = np.random.default_rng(3)
        base = decode_check.log_softmax(rng.normal(size=(5, 200)) * 3, np)
        other = decode_check.log_softmax(rng.normal(size=(5, 200)) * 3, np)
        ids = np.stack([decode_check.top_k(row, np)[0] for row in base])
        p_log = np.take_along_axis(base, ids, axis=1)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scores.topk")
            with open(path, "wb") as f:
                np.savez(f, ids=ids.astype(np.int32), logp=p_log.astype(np.float32))
            c = ppl_scoring.Comparison(path)
            c.add(other)
            want, _ = c.result()
        got = np.mean([decode_check.coarse_kl(p_log.astype(np.float32).astype(np.float64)[i], other[i][ids[i]], np) for i in range(5)])
        self.assertAlmostEqual(float(got), want, places=9)


class SlidingWindow(unittest.TestCase):
    def test_window_detection(self):
        from transformers import LlamaConfig, MistralConfig, Qwen2Config

        self.assertIsNone(generate_reference.sliding_window(LlamaConfig()))
        self.assertEqual(generate_reference.sliding_window(MistralConfig(sliding_window=16)), 16)
        self.assertIsNone(generate_reference.sliding_window(MistralConfig(sliding_window=None)))
        self.assertIsNone(generate_reference.sliding_window(Qwen2Config(sliding_window=4096, use_sliding_window=False)))

        class Gemma:
            sliding_window = 512
            layer_types = ["sliding_attention", "full_attention"]

        class Full:
            sliding_window = 512
            layer_types = ["full_attention"]

        self.assertEqual(generate_reference.sliding_window(Gemma()), 512)
        self.assertIsNone(generate_reference.sliding_window(Full()))

    def test_decode_across_the_window(self):
        from transformers import MistralConfig

        model = tiny_model(MistralConfig, sliding_window=16)
        lead = generate_reference.window_lead(12)
        prompt = [int(x) for x in np.random.default_rng(1).integers(3, 90, size=16 - lead)]
        ref = reference_of(model, [prompt], 12)
        seq = ref["sequences"][0]
        self.assertGreaterEqual(len(prompt) + len(seq["tokens"]) - 2, 16, "the decode does not cross the window")
        good, _ = decode_check.compare(decode_check.TorchRuntime(model, torch), ref, np)
        self.assertLess(good["decode_max_abs"], BOUND / 10)
        self.assertEqual(good["token_agreement"], 1.0)
        broken, _ = decode_check.compare(ShiftedPositions(model, torch), ref, np)
        self.assertGreater(broken["decode_max_abs"], 100 * BOUND)

        # A cache that keeps attending past the window (the same weights without it) decodes
        # like the prefill until the window is crossed, and not after: the sequence covers it.
        full = tiny_model(MistralConfig, sliding_window=None)
        full.load_state_dict(model.state_dict())

        class IgnoresWindow(decode_check.TorchRuntime):
            def start(self, prompt_ids):
                self.model = full
                return super().start(prompt_ids)

            def prefill(self, ids, keep):
                self.model = model
                return super().prefill(ids, keep)

        _, per = decode_check.compare(IgnoresWindow(model, torch), ref, np)
        self.assertGreater(per[0]["decode_max_abs"], 100 * BOUND)
        early = {"sequences": [dict(seq, tokens=seq["tokens"][:lead], topk={"ids": seq["topk"]["ids"][:lead],
                                                                          "logp": seq["topk"]["logp"][:lead]})],
                 "eos_ids": ref["eos_ids"]}
        before, _ = decode_check.compare(IgnoresWindow(model, torch), early, np)
        self.assertLess(before["decode_max_abs"], BOUND / 10)


@unittest.skipUnless(os.environ.get("EDGEPIPE_DECODE_MODEL"), "EDGEPIPE_DECODE_MODEL names no checkpoint")
class BuiltinModel(unittest.TestCase):
    """The built-in SmolLM2: generate_reference.py end to end, then its reference decoded by the
    same model (consistent, in full agreement) and by a cache fed one position off (refused)."""

    @classmethod
    def setUpClass(cls):
        cls.model_dir = os.environ["EDGEPIPE_DECODE_MODEL"]
        cls.prompts = os.environ["EDGEPIPE_DECODE_PROMPTS"]
        cls.text = os.environ["EDGEPIPE_DECODE_TEXT"]
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_main(self, model_dir, out, max_new):
        argv, stdout = sys.argv, sys.stdout
        sys.argv = ["generate_reference.py", "--model", model_dir, "--prompts", self.prompts, "--out", out,
                    "--max-new-tokens", str(max_new), "--text", self.text, "--threads", "1"]
        sys.stdout = io.StringIO()
        try:
            self.assertEqual(generate_reference.main(), 0)
            lines = [ln for ln in sys.stdout.getvalue().splitlines() if ln.startswith("{")]
        finally:
            sys.argv, sys.stdout = argv, stdout
        with open(os.path.join(out, "reference.json"), encoding="utf-8") as f:
            return json.loads(lines[-1]), json.load(f)

    def test_reference_and_decode(self):
        from transformers import AutoModelForCausalLM

        rep, ref = self.run_main(self.model_dir, os.path.join(self.tmp, "ref"), 12)
        self.assertTrue(rep["chat_template"])
        self.assertIsNone(rep["sliding_window"])
        self.assertEqual(rep["sequences"], 4)
        self.assertEqual([s["id"] for s in ref["sequences"]], ["one-word", "explain", "list", "code"])
        for s in ref["sequences"]:
            self.assertTrue(0 < len(s["tokens"]) <= 12)
            self.assertEqual(len(s["topk"]["ids"]), len(s["tokens"]))
            self.assertEqual(len(s["topk"]["ids"][0]), decode_check.TOPK)
            self.assertEqual(s["tokens"][-1] in ref["eos_ids"], s["stopped_at_eos"])
        model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32)
        model.eval()
        good, _ = decode_check.compare(decode_check.TorchRuntime(model, torch), ref, np)
        self.assertLess(good["decode_max_abs"], BOUND / 5)
        self.assertEqual(good["token_agreement"], 1.0)
        self.assertLess(good["mean_kl"], 1e-4)
        for broken in (ShiftedPositions, DroppedEntry):
            with self.subTest(broken=broken.__name__):
                s, _ = decode_check.compare(broken(model, torch), ref, np)
                self.assertGreater(s["decode_max_abs"], 100 * BOUND, f"{broken.__name__}: {s}")
                print(f"{broken.__name__}: decode max abs {s['decode_max_abs']:.3g}, top-1 {s['decode_top1']:.3f}, "
                      f"agreement {s['token_agreement']:.3f}, mean KL {s['mean_kl']:.3f}", file=sys.stderr)

    def test_a_model_without_a_chat_template_gets_plain_prompts(self):
        plain = os.path.join(self.tmp, "plain")
        os.makedirs(plain)
        for name in os.listdir(self.model_dir):
            if name != "chat_template.jinja":
                os.symlink(os.path.join(self.model_dir, name), os.path.join(plain, name))
        rep, ref = self.run_main(plain, os.path.join(self.tmp, "plain-ref"), 4)
        self.assertFalse(rep["chat_template"])
        self.assertFalse(ref["chat_template"])
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(plain)
        with open(self.prompts, encoding="utf-8") as f:
            first = json.load(f)["prompts"][0]["messages"][0]["content"]
        self.assertEqual(ref["sequences"][0]["prompt_ids"], tok(first).input_ids)


if __name__ == "__main__":
    unittest.main()
