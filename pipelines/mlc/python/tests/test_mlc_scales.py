"""mlc_native.py's --scales mse against mlc_llm's max_abs / 7, decoded the way the gate (and every
MLC runtime) decodes: (q - 7) * scale per group of 32."""

import unittest

import numpy as np
import torch

import mlc_gate
import mlc_native


def decoded(w, quantization, scales):
    dtype = torch.float16 if quantization == "q4f16_1" else torch.float32
    qw, qs = mlc_native.quantize(w.to(dtype), torch, scales)
    qs = qs.float().numpy()
    if quantization == "q4f32_1":
        # what the shards hold: the float32 scales stored as bfloat16
        qs = mlc_native.f32_to_bf16(qs).astype(np.uint32) << np.uint32(16)
        qs = qs.view(np.float32)
    return mlc_gate.dequantize(qw, qs, w.shape[1]), qw


class MSEScales(unittest.TestCase):
    def setUp(self):
        g = torch.Generator().manual_seed(7)
        w = torch.randn(96, 200, generator=g) * 0.02 + torch.empty(96, 200).exponential_(generator=g) * 0.01
        w[torch.arange(96), torch.randint(0, 200, (96,), generator=g)] = -0.2
        self.w = w

    def group_errors(self, d):
        e = (torch.from_numpy(d) - self.w.to(torch.float16).float()) ** 2
        e = torch.nn.functional.pad(e, (0, 24))  # 200 -> 224 columns: 7 groups
        return e.reshape(96, 7, 32).sum(-1)

    def test_never_worse_and_clearly_better(self):
        for q in ("q4f16_1", "q4f32_1"):
            base, _ = decoded(self.w, q, "mlc")
            mse, qw = decoded(self.w, q, "mse")
            eb, em = self.group_errors(base), self.group_errors(mse)
            self.assertTrue(bool((em <= eb * 1.0001 + 1e-12).all()), f"{q}: a group got worse")
            ratio = float(em.sum() / eb.sum())
            self.assertLess(ratio, 0.85, f"{q}: mse error {ratio:.3f} of max_abs/7's")
            codes = [(qw >> np.uint32(4 * r)) & np.uint32(0xF) for r in range(8)]
            self.assertEqual(int(max(c.max() for c in codes)), 15, f"{q}: code 15 never used")

    def test_gptq_lowers_the_output_error(self):
        # Correlated inputs, as a layer's are: GPTQ's error feedback must beat rounding each
        # weight to its nearest code under the same searched scales, measured on the outputs.
        g = torch.Generator().manual_seed(3)
        mix = torch.randn(64, 64, generator=g)
        x = torch.randn(2048, 64, generator=g) @ mix
        h = x.T @ x / x.shape[0]
        w = torch.randn(48, 64, generator=g) * 0.05
        errors = {}
        full = {"diag": h.diagonal().clone(), "hessian": h}
        for name, imp in (("rtn", h.diagonal().clone()), ("gptq", full), ("act_order", dict(full, act_order=True))):
            qw, qs = mlc_native.quantize(w, torch, "imatrix", imp)
            d = torch.from_numpy(mlc_gate.dequantize(qw, qs.numpy(), 64))
            errors[name] = float(((x @ (d - w).T) ** 2).mean())
        self.assertLess(errors["gptq"], 0.8 * errors["rtn"], errors)
        self.assertLess(errors["act_order"], 0.8 * errors["rtn"], errors)

    def test_zero_group(self):
        w = torch.zeros(2, 32)
        d, _ = decoded(w, "q4f16_1", "mse")
        self.assertTrue(np.all(d == 0))


class AWQRescaling(unittest.TestCase):
    """mlc_awq on a tiny random Llama (grouped-query attention, one outlier input channel):
    the rescaled float model computes what the original does, and its quantized weights lose
    no more on the calibration activations than the unscaled ones."""

    def test_same_function_less_error(self):
        import mlc_awq
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
        model = LlamaForCausalLM(cfg).eval()
        with torch.no_grad():
            for layer in model.model.layers:
                layer.input_layernorm.weight[5] = 8.0  # an outlier channel, as real models have
                layer.post_attention_layernorm.weight.uniform_(0.5, 2.0)
        hess, counts = {}, {}

        def hook(name):
            def record(_m, inputs):
                x = inputs[0].detach().float().reshape(-1, inputs[0].shape[-1])
                hess[name] = hess.get(name, 0) + x.T @ x
                counts[name] = counts.get(name, 0) + x.shape[0]
            return record

        hooks = [m.register_forward_pre_hook(hook(n + ".weight")) for n, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and n.endswith(("q_proj", "o_proj", "gate_proj", "down_proj"))]
        tokens = torch.randint(0, 64, (4, 48))
        with torch.no_grad():
            before = model(tokens).logits
        for h in hooks:
            h.remove()
        hess = {k: v / counts[k] for k, v in hess.items()}
        weights = {n: p.detach().clone() for n, p in model.named_parameters() if n.startswith("model.layers.")}
        original = {n: w.clone() for n, w in weights.items()}

        def qdq(w, imp):
            return mlc_native.quantize_dequantize(w, torch.float32, imp, torch)

        cfgd = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64}
        importance, report = mlc_awq.plan_and_apply(cfgd, weights, hess, qdq, torch)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for n, w in weights.items():
                params[n].copy_(w)
            after = model(tokens).logits
        self.assertLess(float((after - before).abs().max()), 1e-3, "rescaling changed the float model")
        changed = [n for n in weights if not torch.equal(weights[n], original[n])]
        self.assertTrue(changed, "no tensor was rescaled")
        for kind, r in report.items():
            self.assertLessEqual(r["output_error"], r["output_error_unscaled"] * (1 + 1e-6), kind)
        # The outlier channel makes scaling worth it on q/k/v.
        self.assertLess(report["qkv_proj"]["output_error"], 0.9 * report["qkv_proj"]["output_error_unscaled"], report)
        self.assertEqual(set(importance), set(hess))


if __name__ == "__main__":
    unittest.main()


class SinkWeight(unittest.TestCase):
    """GPTQ spreads each column's rounding error over the columns after it, weighed by X^T X, in
    which a rare token counts once. Weighing the first token (mlc_native.weigh_sink) must keep
    that token's output closer, at little cost to the others'."""

    def test_share_of_trace(self):
        x = torch.randn(64, 16, generator=torch.Generator().manual_seed(3))
        h, h0 = x.T @ x / 64, x[:1].T @ x[:1]
        weighted = mlc_native.weigh_sink(h, h0, 0.2)
        self.assertAlmostEqual(float((weighted - h).trace() / weighted.trace()), 0.2, places=5)
        self.assertTrue(torch.equal(mlc_native.weigh_sink(h, h0, 0.0), h))

    def test_weighted_sink_keeps_its_output(self):
        totals = {"plain": [0.0, 0.0], "weighted": [0.0, 0.0]}  # sink, the rest per token
        for seed in range(5):
            g = torch.Generator().manual_seed(seed)
            w = (torch.randn(48, 64, generator=g) * 0.05).to(torch.float16).float()
            rest = torch.randn(511, 64, generator=g)
            rest[:, -8:] *= 0.02  # the usual tokens barely use the last 8 columns,
            sink = torch.zeros(1, 64)
            sink[0, -8:] = 3.0  # where the first token lives and GPTQ puts its error
            x = torch.cat([sink, rest])
            h = x.T @ x / len(x)
            for name, hess in (("plain", h), ("weighted", mlc_native.weigh_sink(h, sink.T @ sink, 0.2))):
                codes, scales = mlc_native.gptq_quantize(w, hess, torch.float16, torch)
                d = (codes * scales.unsqueeze(-1)).reshape(w.shape) - w
                totals[name][0] += float(((sink @ d.T) ** 2).sum())
                totals[name][1] += float(((rest @ d.T) ** 2).sum()) / len(rest)
        (plain_sink, plain_rest), (w_sink, w_rest) = totals["plain"], totals["weighted"]
        self.assertLess(w_sink, 0.9 * plain_sink, f"sink output error {w_sink} weighted, {plain_sink} plain")
        self.assertLess(w_rest, 1.1 * plain_rest, f"the other tokens' error {w_rest} weighted, {plain_rest} plain")
