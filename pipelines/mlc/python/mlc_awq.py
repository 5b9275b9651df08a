"""Activation-aware rescaling (AWQ: Lin et al. 2023, "AWQ: Activation-aware Weight Quantization
for LLM Compression and Acceleration", section 3.2) for the native MLC converter.

MLC's q4 storage has no zero point and one scale per 32 input columns, so a column whose
activations are large loses as much precision as a quiet one. AWQ multiplies each input column c
of a linear layer by s_c > 1 where its activations are large and divides the layer's input by the
same s_c, folded into whatever produces that input, so the float model computes exactly the same
function while the 4-bit grid spends its precision where the outputs feel it:

  * q/k/v (MLC's qkv_proj) read input_layernorm's output: the norm's weight is divided by s;
  * gate/up (gate_up_proj) read post_attention_layernorm's: the same;
  * down_proj reads act(gate) * up, linear in up: up_proj's rows are divided by s;
  * o_proj reads the attention output, linear in v: v_proj's rows are divided by s, one s per
    key/value head dimension shared by the query heads that read that head (grouped-query
    attention), so o_proj's columns take that head's s.

The tied embedding (also the output projection) is left alone: it is a lookup table at the
input, where nothing could absorb a scale.

Per layer and group, s = rms(x)^alpha, normalised by sqrt(max(s) * min(s)) as AWQ's
auto_scale does, and alpha in 0, 0.1, ..., 1 is the one whose quantized weights
(Q(W diag(s)) diag(s)^-1) give the least output error over the calibration activations,
trace(dW H dW^T) with H = X^T X / n. alpha = 0 is the identity, so the chosen scaling is never
worse than none by that measure. Every transformed tensor, the folded norms included, is stored
in the artifact as usual; the gate scores what was stored.
"""

ALPHAS = [i / 10 for i in range(11)]
RMS_FLOOR = 1e-5  # of the largest rms: a column no token reached still gets a finite scale


def scale_for(rms, alpha, torch):
    if alpha == 0:
        return torch.ones_like(rms)
    r = torch.clamp(rms, min=float(rms.max()) * RMS_FLOOR + 1e-12)
    s = r ** alpha
    return s / torch.sqrt(s.max() * s.min())


def output_error(w, deq, hessian):
    d = deq - w
    return float(((d @ hessian) * d).sum())


def search(w, hessian, qdq, torch, tie=None):
    """The alpha and s minimising the output error of quantizing w (rows, cols) whose input has
    second moments `hessian` (cols, cols). qdq(w, importance) quantizes and dequantizes in the
    model's storage. tie(rms) -> rms shares scales among columns (GQA)."""
    diag = hessian.diagonal().clamp(min=0)
    rms = torch.sqrt(diag)
    if tie is not None:
        rms = tie(rms)
    best = None
    base = None
    for alpha in ALPHAS:
        s = scale_for(rms, alpha, torch)
        deq = qdq(w * s, diag / (s * s)) / s
        err = output_error(w, deq, hessian)
        if alpha == 0:
            base = err
        if best is None or err < best[0]:
            best = (err, alpha, s)
    return best[1], best[2], best[0], base


def plan_and_apply(cfg, weights, hessians, qdq, torch):
    """Rescales `weights` (Hugging Face names -> float32 tensors; every linear layer and norm of
    the decoder layers) in place. hessians: linear layer weight name -> X^T X / n of its input
    (q_proj for q/k/v, gate_proj for gate/up; o_proj, down_proj). Returns (importance: the
    diagonal of each quantized layer's input second moments after rescaling, the imatrix the
    scale search then weighs by; report: per group kind, mean alpha and output errors)."""
    layers = cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    rep = heads // kv
    importance, report = {}, {}

    def tie_gqa(rms):
        # o_proj's columns: query head h (reading kv head h // rep), dim d. One s per kv
        # head dim: the rms over the query heads that share it.
        g = rms.reshape(kv, rep, head_dim)
        return torch.sqrt((g * g).mean(1, keepdim=True)).expand(kv, rep, head_dim).reshape(-1)

    def note(kind, alpha, err, base):
        r = report.setdefault(kind, {"alphas": [], "output_error": 0.0, "output_error_unscaled": 0.0})
        r["alphas"].append(alpha)
        r["output_error"] += err
        r["output_error_unscaled"] += base

    for i in range(layers):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."

        # o_proj <- v_proj rows (rows first: they change v, which qkv's search then sees).
        h = hessians[a + "o_proj.weight"]
        alpha, s, err, base = search(weights[a + "o_proj.weight"], h, qdq, torch, tie_gqa)
        note("o_proj", alpha, err, base)
        weights[a + "o_proj.weight"] = weights[a + "o_proj.weight"] * s
        sv = s.reshape(kv, rep, head_dim)[:, 0, :].reshape(-1)
        weights[a + "v_proj.weight"] = weights[a + "v_proj.weight"] / sv.unsqueeze(1)
        importance[a + "o_proj.weight"] = h.diagonal().clamp(min=0) / (s * s)

        # down_proj <- up_proj rows.
        h = hessians[m + "down_proj.weight"]
        alpha, s, err, base = search(weights[m + "down_proj.weight"], h, qdq, torch)
        note("down_proj", alpha, err, base)
        weights[m + "down_proj.weight"] = weights[m + "down_proj.weight"] * s
        weights[m + "up_proj.weight"] = weights[m + "up_proj.weight"] / s.unsqueeze(1)
        importance[m + "down_proj.weight"] = h.diagonal().clamp(min=0) / (s * s)

        # qkv_proj <- input_layernorm, gate_up_proj <- post_attention_layernorm.
        for kind, names, norm, hkey in (
                ("qkv_proj", [a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"],
                 p + "input_layernorm.weight", a + "q_proj.weight"),
                ("gate_up_proj", [m + "gate_proj.weight", m + "up_proj.weight"],
                 p + "post_attention_layernorm.weight", m + "gate_proj.weight")):
            h = hessians[hkey]
            fused = torch.cat([weights[n] for n in names], dim=0)
            alpha, s, err, base = search(fused, h, qdq, torch)
            note(kind, alpha, err, base)
            for n in names:
                weights[n] = weights[n] * s
            weights[norm] = weights[norm] / s
            importance[hkey] = h.diagonal().clamp(min=0) / (s * s)

    summary = {}
    for kind, r in report.items():
        summary[kind] = {"mean_alpha": round(sum(r["alphas"]) / len(r["alphas"]), 4),
                         "output_error": r["output_error"],
                         "output_error_unscaled": r["output_error_unscaled"]}
    return importance, summary
