"""tiny_model.py: each built-in tiny model built twice, under different thread and SIMD
settings, to the same bytes and the digest edgepipe pins; loaded by transformers, not
degenerate, exact in float16 and bfloat16, and with the features its architecture claims
really there (a sliding window that changes the logits past it, experts that all get tokens).

Run by TestRealPythonModules (llama toolchain) with EDGEPIPE_HELPERS, EDGEPIPE_TINY_PINS
(the Go table: name -> arch, class, tokenizer model, sha256), EDGEPIPE_TINY_TOKENIZERS
(built-in model -> its checkpoint folder), EDGEPIPE_TINY_TEXT (the calibration text) and
EDGEPIPE_TINY_EVAL (the evaluation text).
"""

import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import torch
import transformers

import tiny_model

torch.set_num_threads(1)
CTX = 128


def env_json(key):
    return json.loads(os.environ[key])


def build(arch, tokenizer, out, threads):
    """Run tiny_model.py as edgepipe does; threads and torch's SIMD dispatch vary by build."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), EDGEPIPE_THREADS=str(threads))
    if threads > 1:
        env["ATEN_CPU_CAPABILITY"] = "default"
    script = os.path.join(os.environ["EDGEPIPE_HELPERS"], "tiny_model.py")
    res = subprocess.run([sys.executable, script, "--arch", arch, "--tokenizer", tokenizer,
                          "--text", os.environ["EDGEPIPE_TINY_TEXT"], "--out", str(out)],
                         env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise AssertionError(f"tiny_model.py --arch {arch} failed:\n{res.stderr}")
    return json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}


class TinyModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pins = {m["Arch"]: m for m in env_json("EDGEPIPE_TINY_PINS")}
        cls.tokenizers = env_json("EDGEPIPE_TINY_TOKENIZERS")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.built = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def model_dir(self, arch):
        """The model built once per test run (twice: the second build must match)."""
        if arch not in self.built:
            pin = self.pins[arch]
            tok = self.tokenizers[pin["Tokenizer"]]
            a, b = Path(self.tmp.name) / arch / "a", Path(self.tmp.name) / arch / "b"
            rep = build(arch, tok, a, 1)
            build(arch, tok, b, 2)
            self.built[arch] = (a, b, rep)
        return self.built[arch]

    def test_the_go_table_and_the_script_agree(self):
        self.assertEqual(sorted(self.pins), sorted(tiny_model.ARCHS))
        for arch, spec in tiny_model.ARCHS.items():
            pin = self.pins[arch]
            self.assertEqual(pin["Name"], "tiny-" + arch)
            self.assertTrue(pin["Tokenizer"].startswith(spec["tokenizer"]), (arch, pin["Tokenizer"]))

    def test_bit_identical_and_pinned(self):
        for arch in tiny_model.ARCHS:
            with self.subTest(arch=arch):
                a, b, rep = self.model_dir(arch)
                fa, fb = files(a), files(b)
                self.assertEqual(sorted(fa), sorted(fb))
                for name in fa:
                    self.assertEqual(fa[name], fb[name], f"{arch}: {name} differs between two builds")
                sha = hashlib.sha256(fa["model.safetensors"]).hexdigest()
                self.assertEqual(rep["sha256"], sha)
                self.assertEqual(sha, self.pins[arch]["SHA256"],
                                 f"{arch}: model.safetensors is {sha}; edgepipe pins another digest "
                                 "(internal/toolchain/builtin_tiny.go): a change to the weights must change the pin")
                self.assertEqual(rep["architecture"], self.pins[arch]["Architecture"])
                self.assertEqual(rep["files"], sorted(fa))

    def test_loads_runs_and_is_not_degenerate(self):
        eval_text = Path(os.environ["EDGEPIPE_TINY_EVAL"]).read_text(encoding="utf-8")
        for arch in tiny_model.ARCHS:
            with self.subTest(arch=arch):
                a, _, rep = self.model_dir(arch)
                tok = transformers.AutoTokenizer.from_pretrained(str(a))
                model = transformers.AutoModelForCausalLM.from_pretrained(str(a), dtype=torch.float32).eval()
                self.assertEqual(len(tok), model.config.vocab_size)
                self.assertEqual(sum(p.numel() for p in model.parameters()), rep["parameters"])
                ids = tok(eval_text, add_special_tokens=False, verbose=False)["input_ids"]
                nll, count, argmaxes = 0.0, 0, set()
                with torch.no_grad():
                    for c in range(4):
                        x = torch.tensor([ids[c * CTX:(c + 1) * CTX]])
                        logits = model(x).logits[0, :-1]
                        self.assertTrue(bool(torch.isfinite(logits).all()))
                        lp = torch.log_softmax(logits, -1)
                        nll -= float(lp.gather(1, x[0, 1:, None]).sum())
                        count += CTX - 1
                        argmaxes |= set(lp.argmax(-1).tolist())
                ppl = math.exp(nll / count)
                # A uniform guess scores the vocabulary's size.
                self.assertLess(ppl, model.config.vocab_size / 10, f"{arch}: perplexity {ppl:.0f}")
                self.assertGreaterEqual(len(argmaxes), 10, f"{arch}: predictions do not follow the context")

    def test_attention_matters(self):
        """The logits depend on the attention layers far more than on 8-bit rounding (a
        conversion that breaks attention cannot hide in quantization noise): zeroing every
        output projection moves them by a KL divergence over 0.003; measured 0.018 to 0.16
        against Q8_0-like rounding's 0.0001 to 0.002."""
        for arch in tiny_model.ARCHS:
            with self.subTest(arch=arch):
                a, _, _ = self.model_dir(arch)
                model = transformers.AutoModelForCausalLM.from_pretrained(str(a), dtype=torch.float32).eval()
                x = torch.arange(1000, 1000 + CTX)[None]
                with torch.no_grad():
                    before = torch.log_softmax(model(x).logits[0], -1)
                    for layer in model.model.layers:
                        layer.self_attn.o_proj.weight.zero_()
                    after = torch.log_softmax(model(x).logits[0], -1)
                kl = float((before.exp() * (before - after)).sum(-1).mean())
                self.assertGreater(kl, 0.003, f"{arch}: attention moves the logits by a KL of {kl:.5f} only")

    def test_weights_exact_in_half_precisions(self):
        for arch in tiny_model.ARCHS:
            with self.subTest(arch=arch):
                a, _, _ = self.model_dir(arch)
                model = transformers.AutoModelForCausalLM.from_pretrained(str(a), dtype=torch.float32)
                for name, w in model.state_dict().items():
                    if not w.is_floating_point() or name.endswith("embed_scale"):
                        continue
                    self.assertTrue(torch.equal(w.half().float(), w), f"{arch}: {name} is not exact in float16")
                    self.assertTrue(torch.equal(w.bfloat16().float(), w), f"{arch}: {name} is not exact in bfloat16")

    def test_features_are_there(self):
        for arch, spec in tiny_model.ARCHS.items():
            with self.subTest(arch=arch):
                a, _, _ = self.model_dir(arch)
                model = transformers.AutoModelForCausalLM.from_pretrained(str(a), dtype=torch.float32).eval()
                cfg = model.config
                self.assertGreaterEqual(cfg.num_hidden_layers, 4)
                self.assertGreaterEqual(cfg.max_position_embeddings, 2048)
                head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
                self.assertEqual(head_dim % 16, 0)
                self.assertLess(cfg.num_key_value_heads, cfg.num_attention_heads)
                for feature in spec["features"]:
                    self.check_feature(arch, feature, model, a)

    def check_feature(self, arch, feature, model, folder):
        cfg, names = model.config, dict(model.named_modules())
        weights = files(folder)["model.safetensors"]
        header = json.loads(weights[8:8 + int.from_bytes(weights[:8], "little")])
        if feature == "gqa":
            self.assertGreater(cfg.num_key_value_heads, 1)
        elif feature == "mqa":
            self.assertEqual(cfg.num_key_value_heads, 1)
        elif feature in ("tied-embeddings", "untied-embeddings"):
            tied = feature == "tied-embeddings"
            self.assertEqual(cfg.tie_word_embeddings, tied)
            self.assertEqual("lm_head.weight" in header, not tied)
            self.assertEqual(model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), tied)
        elif feature == "llama3-rope-scaling":
            self.assertEqual(cfg.rope_scaling["rope_type"], "llama3")
        elif feature == "qkv-bias":
            bias = model.model.layers[0].self_attn.q_proj.bias
            self.assertTrue(bias is not None and bool(bias.detach().abs().sum() > 0))
        elif feature == "qk-norm":
            norm = model.model.layers[0].self_attn.q_norm.weight.detach()
            self.assertGreater(float(norm.max() - norm.min()), 0)
        elif feature == "fused-qkv":
            self.assertTrue(any(n.endswith("self_attn.qkv_proj") for n in names))
        elif feature == "fused-gate-up":
            self.assertTrue(any(n.endswith("mlp.gate_up_proj") for n in names))
        elif feature == "sliding-window":
            self.check_window(model, folder)
        elif feature == "sandwich-norms":
            self.assertTrue(any(n.endswith("post_feedforward_layernorm") for n in names))
        elif feature == "embedding-scale":
            self.assertAlmostEqual(float(model.model.embed_tokens.embed_scale), cfg.hidden_size ** 0.5, places=4)
        elif feature == "gelu-tanh":
            self.assertEqual(cfg.hidden_activation, "gelu_pytorch_tanh")
        elif feature == "moe-4-experts-top-2":
            self.check_experts(model)
        else:
            self.fail(f"{arch}: no check for the feature {feature!r}: add one")

    def check_window(self, model, folder):
        """The window is smaller than the context, and it is real: the logits match a model
        without it before the window's end and differ after it."""
        window = model.config.sliding_window
        self.assertLess(window, CTX)
        if hasattr(model.config, "layer_types"):
            kinds = set(model.config.layer_types)
            self.assertIn("sliding_attention", kinds)
        wide = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                                 sliding_window=4096).eval()
        x = torch.arange(1000, 1000 + CTX)[None]
        with torch.no_grad():
            a, b = model(x).logits[0], wide(x).logits[0]
        self.assertTrue(torch.allclose(a[:window], b[:window], atol=1e-5))
        self.assertGreater(float((a[window + 8:] - b[window + 8:]).abs().max()), 1e-3)

    def check_experts(self, model):
        """Four experts, two per token, and every expert of every layer gets tokens."""
        cfg = model.config
        experts = getattr(cfg, "num_experts", None) or cfg.num_local_experts
        self.assertEqual((experts, cfg.num_experts_per_tok), (4, 2))
        x = torch.arange(1000, 1000 + CTX)[None]
        with torch.no_grad():
            out = model(x, output_router_logits=True)
        for layer, logits in enumerate(out.router_logits):
            chosen = set(logits.topk(2, dim=-1).indices.flatten().tolist())
            self.assertEqual(chosen, set(range(4)), f"layer {layer} routes to {sorted(chosen)} only")


if __name__ == "__main__":
    unittest.main()
