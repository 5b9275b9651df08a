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
        for name, imp in (("rtn", h.diagonal().clone()), ("gptq", {"diag": h.diagonal().clone(), "hessian": h})):
            qw, qs = mlc_native.quantize(w, torch, "imatrix", imp)
            d = torch.from_numpy(mlc_gate.dequantize(qw, qs.numpy(), 64))
            errors[name] = float(((x @ (d - w).T) ** 2).mean())
        self.assertLess(errors["gptq"], 0.8 * errors["rtn"], errors)

    def test_zero_group(self):
        w = torch.zeros(2, 32)
        d, _ = decoded(w, "q4f16_1", "mse")
        self.assertTrue(np.all(d == 0))


if __name__ == "__main__":
    unittest.main()
