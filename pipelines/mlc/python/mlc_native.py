"""edgepipe's native MLC weight converter: what `mlc_llm convert_weight` and `mlc_llm gen_config`
write, for the Llama architecture, without mlc_llm (which is not a registry package).

    python mlc_native.py convert-weight --model DIR --quantization q4f16_1|q4f32_1 --out DIR [--scales mlc|mse]
    python mlc_native.py gen-config --model DIR --quantization Q --conv-template chatml \
        --context-window-size N --out DIR

This is not mlc_llm: it follows mlc_llm's code as of mlc-ai/mlc-llm commit
79d603f085f50500e9509fa01785ffa7ecfaaa93 and apache/tvm commit
0906717357f5a377dc43cb162ba2a731fe06c2da, file by file:

  * python/mlc_llm/quantization/quantization.py: q4f16_1 and q4f32_1 are GroupQuantize with
    group_size 32, int4 in uint32 storage, linear_weight_layout "NK", the embedding and the
    final fc quantized too; model_dtype float16 (q4f16_1) or float32 (q4f32_1).
  * python/mlc_llm/quantization/group_quantization.py (GroupQuantize._quantize): per group of
    32 along the input axis, max_abs in the model dtype, scale = max_abs / 7, q = clamp(round(
    w / scale + 7), 0, 14), all in the model dtype; pack_weight (quantization/utils.py) puts
    element r of a word at bits 4r..4r+3. q_weight is uint32 [out, in/8], q_scale [out, in/32].
  * python/mlc_llm/loader/standard_loader.py + model/llama/llama_loader.py: q/k/v concatenate
    (axis 0) into self_attn.qkv_proj, gate/up into mlp.gate_up_proj, then astype(model dtype);
    rotary_emb.inv_freq is unused; the rest maps 1:1.
  * python/mlc_llm/loader/huggingface_loader.py (_loading_order): parameters come out in the
    order of the checkpoint's tensor names (safe_open(...).keys(), or the index's weight_map),
    each MLC parameter when the first of its source tensors comes up.
  * python/mlc_llm/interface/convert_weight.py + tvm python/tvm/contrib/tvmjs.py
    (dump_tensor_cache, encode_format "f32-to-bf16", shard cap 32 MiB): raw shards named
    params_shard_N.bin, a new shard when the pending bytes plus the next tensor reach the cap,
    a tensor of half the cap or more in a shard of its own; float32 tensors are stored as
    bfloat16 (round to nearest even); tensor-cache.json (indent 4) with each shard's md5sum and
    metadata {ParamSize, ParamBytes, BitsPerParam}.
  * python/mlc_llm/interface/gen_config.py + protocol/mlc_chat_config.py: mlc-chat-config.json.

`--scales mse` (edgepipe's default) keeps that storage and that decoding, (q - 7) * scale, and
chooses each group's scale to minimise the squared error instead: the scale's sign follows the
group's largest-magnitude weight so that weight lands on code 15 (the code mlc_llm leaves unused:
16 levels, not 15, as llama.cpp's Q4_0 does), candidate scales around it are each refitted by
least squares on their codes and rounded to the stored dtype, and the best one is kept.
`--scales mlc` is mlc_llm's max_abs / 7 exactly. Any MLC runtime decodes either the same way.

What could not be checked byte for byte without mlc_llm and TVM: TVM's compiled CPU kernel is
assumed to round every float16 operation (as LLVM's half legalization does, and as torch does
here); a group whose weights are all zero has scale 0 and q = NaN in TVM (stored here as 7,
which dequantizes to 0 like any code would); mlc-chat-config.json's field order and the
parts of it that come from mlc_llm's registries (the conversation template, tokenizer_info).

Its report is report() below (reports/mlc_native.json): convert-weight's under "convert_weight",
gen-config's under "gen_config", the other null.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys

import edgepipe_env
import edgepipe_report

QUANTIZATIONS = {
    # name: model dtype (the dtype of the scales, the norms and the arithmetic)
    "q4f16_1": "float16",
    "q4f32_1": "float32",
}
GROUP = 32
PER_WORD = 8  # uint32 storage / int4
MAX_INT = 7
SHARD_CAP = 32 << 20

TOKENIZER_FILES = ["tokenizer.model", "tokenizer.json", "vocab.json", "merges.txt",
                   "added_tokens.json", "tokenizer_config.json"]


def fail(msg):
    print(f"mlc_native: {msg}", file=sys.stderr)
    sys.exit(2)


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except OSError as e:
        fail(f"the checkpoint has no readable config.json ({e})")
    if cfg.get("model_type") != "llama":
        fail(f"model type {cfg.get('model_type')!r}: the native MLC converter knows the llama architecture "
             "only; use `with: {backend: mlc-llm}` with mlc_llm installed for other architectures")
    return cfg


def source_tensors(model_dir):
    """[(torch name, file)] in the order mlc_llm's HuggingFaceLoader walks them."""
    from safetensors import safe_open

    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        return [(name, os.path.join(model_dir, path)) for name, path in weight_map.items()]
    single = os.path.join(model_dir, "model.safetensors")
    if not os.path.exists(single):
        fail(f"no model.safetensors or model.safetensors.index.json in {model_dir}")
    with safe_open(single, framework="pt", device="cpu") as f:
        return [(name, single) for name in f.keys()]


def param_map(cfg, present):
    """MLC parameter -> its source tensors (mlc_llm's standard HF loader for Llama)."""
    out = {}
    layers = cfg["num_hidden_layers"]
    for i in range(layers):
        a, m = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        out[f"{a}.qkv_proj.weight"] = [f"{a}.q_proj.weight", f"{a}.k_proj.weight", f"{a}.v_proj.weight"]
        out[f"{m}.gate_up_proj.weight"] = [f"{m}.gate_proj.weight", f"{m}.up_proj.weight"]
    out["model.embed_tokens.weight"] = ["model.embed_tokens.weight"]
    for i in range(layers):
        p = f"model.layers.{i}."
        for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                  "self_attn.o_proj.weight", "mlp.down_proj.weight"):
            out[p + n] = [p + n]
    out["model.norm.weight"] = ["model.norm.weight"]
    if not cfg.get("tie_word_embeddings", False):
        out["lm_head.weight"] = ["lm_head.weight"]
    missing = sorted({s for srcs in out.values() for s in srcs} - present)
    if missing:
        fail(f"the checkpoint lacks {len(missing)} tensors MLC's Llama needs, e.g. {missing[0]}")
    return out


def loading_order(pmap, torch_names):
    torch_to_mlc = {}
    for mlc, srcs in pmap.items():
        for s in srcs:
            torch_to_mlc.setdefault(s, []).append(mlc)
    order = {}
    for t in torch_names:
        for mlc in torch_to_mlc.get(t, []):
            order.setdefault(mlc, None)
    return list(order)


def is_quantized(mlc_name):
    # group_quantization.py quantizes every nn.Linear (final fc included) and the nn.Embedding;
    # Llama's norms are the only other parameters.
    return mlc_name.endswith(".weight") and not mlc_name.endswith("norm.weight")


# Candidate divisors of the largest-magnitude weight for --scales mse: 8 puts it exactly on
# code 15; below 8 leaves headroom, above 8 clips it (llama.cpp's make_qx_quants searches the
# same way). Each candidate is refitted by least squares, so the grid only needs to be coarse.
SEARCH_DIVISORS = [8.0 + 0.1 * i for i in range(-12, 7)]
SEARCH_ROWS = 4096  # rows per pass: bounds the temporaries on a 262K-row embedding


def search_scales(g, store, torch, importance=None):
    """Per group of g (rows, groups, GROUP; float32): signed codes in [-MAX_INT, MAX_INT + 1] and
    float32 scales exactly representable in `store`, minimising sum(imp * (code * scale - w)^2),
    imp the input column's importance (groups, GROUP), or 1."""
    lo, hi = -MAX_INT, MAX_INT + 1
    imp = torch.ones(g.shape[1:]) if importance is None else importance
    peak = torch.gather(g, -1, g.abs().argmax(-1, keepdim=True)).squeeze(-1)
    best_err = torch.full(peak.shape, float("inf"))
    best_code = torch.zeros_like(g)
    best_scale = torch.zeros_like(peak)

    def codes_for(scale):
        nonzero = scale != 0
        safe = torch.where(nonzero, scale, torch.ones_like(scale))
        c = torch.clamp(torch.round(g / safe.unsqueeze(-1)), lo, hi)
        return torch.where(nonzero.unsqueeze(-1), c, torch.zeros_like(c))

    for d in SEARCH_DIVISORS:
        c = codes_for(peak / d)
        den = (imp * c * c).sum(-1)
        fit = (imp * g * c).sum(-1) / torch.where(den > 0, den, torch.ones_like(den))
        scale = torch.where(den > 0, fit, torch.zeros_like(fit)).to(store).to(torch.float32)
        c = codes_for(scale)
        err = (imp * (c * scale.unsqueeze(-1) - g) ** 2).sum(-1)
        better = err < best_err
        best_err = torch.where(better, err, best_err)
        best_scale = torch.where(better, scale, best_scale)
        best_code = torch.where(better.unsqueeze(-1), c, best_code)
    return best_code, best_scale


def quantize(w, torch, scales="mlc", importance=None):
    """GroupQuantize._quantize, layout NK, in w's dtype: returns (q_weight uint32 numpy, q_scale).
    scales "mse" and "imatrix" choose each group's scale by search_scales instead of max_abs / 7;
    importance (imatrix): the mean squared activation of each input column, or None."""
    import numpy as np

    rows, k = w.shape
    groups = -(-k // GROUP)
    pad = groups * GROUP - k
    wp = torch.nn.functional.pad(w, (0, pad)) if pad else w
    g = wp.reshape(rows, groups, GROUP)
    if isinstance(importance, dict):
        # GPTQ rounding: the whole Hessian, not just its diagonal (importance["diag"]).
        if pad:
            fail(f"a weight of {k} columns: GPTQ rounding needs a multiple of {GROUP}")
        store = torch.bfloat16 if w.dtype == torch.float32 else w.dtype
        codes, scale = gptq_quantize(w.float(), importance["hessian"], store, torch,
                                     act_order=importance.get("act_order", False))
        q = codes + MAX_INT
        scale = scale.to(w.dtype)
    elif scales in ("mse", "imatrix"):
        # q4f32_1's scales are stored as bfloat16 (f32-to-bf16): search among those values.
        codes, scale = searched_codes(g, w.dtype, importance, pad, torch)
        q = codes + MAX_INT
        scale = scale.to(w.dtype)
    else:
        max_abs = g.abs().amax(dim=-1)  # padding is 0 and |w| >= 0: the same maximum as TVM's min_value padding
        scale = max_abs / MAX_INT  # rounded to the model dtype, as TVM does
        scaled = g / scale.unsqueeze(-1)  # one rounding per operation
        scaled = scaled + MAX_INT
        q = torch.clamp(torch.round(scaled), 0, 2 * MAX_INT)
        q = torch.where(torch.isnan(q), torch.full_like(q, MAX_INT), q)  # all-zero group: scale 0
    q = q.reshape(rows, groups * GROUP)[:, :k].to(torch.int64).numpy().astype(np.uint32)
    words = -(-k // PER_WORD)
    qp = np.zeros((rows, words * PER_WORD), dtype=np.uint32)
    qp[:, :k] = q  # pack_weight: elements past k are 0
    qp = qp.reshape(rows, words, PER_WORD)
    packed = np.zeros((rows, words), dtype=np.uint32)
    for r in range(PER_WORD):
        packed |= qp[:, :, r] << np.uint32(4 * r)
    return packed, scale.contiguous()


def searched_codes(g, dtype, importance, pad, torch):
    """search_scales over g (rows, groups, GROUP) in bounded passes; importance per input column
    (unpadded) or None. Returns float32 codes and scales."""
    groups = g.shape[1]
    # q4f32_1's scales are stored as bfloat16 (f32-to-bf16): search among those values.
    store = torch.bfloat16 if dtype == torch.float32 else dtype
    imp = None
    if importance is not None:
        imp = torch.nn.functional.pad(importance.float(), (0, pad)).reshape(groups, GROUP)
        # A column no calibration token reached still counts a little, so a group of them
        # is fitted rather than left to chance.
        imp = imp + 1e-3 * float(imp.mean()) + 1e-12
    return search_scales_bounded(g, store, torch, imp)


def search_scales_bounded(g, store, torch, imp):
    """search_scales over g (rows, groups, GROUP) in passes of SEARCH_ROWS rows (each row's search
    is its own, so the passes give what one would): float32 codes and scales."""
    parts = [search_scales(g[i:i + SEARCH_ROWS].float(), store, torch, imp) for i in range(0, g.shape[0], SEARCH_ROWS)]
    return torch.cat([c for c, _ in parts]), torch.cat([s for _, s in parts])


def quantize_dequantize(w, dtype, importance, torch):
    """What the runtime decodes for float32 w stored in `dtype` with searched scales (the
    imatrix path of quantize, without packing): float32, w's shape."""
    rows, k = w.shape
    groups = -(-k // GROUP)
    pad = groups * GROUP - k
    wq = w.to(dtype)
    wq = torch.nn.functional.pad(wq, (0, pad)) if pad else wq
    codes, scale = searched_codes(wq.reshape(rows, groups, GROUP), dtype, importance, pad, torch)
    return (codes * scale.unsqueeze(-1)).reshape(rows, groups * GROUP)[:, :k]


GPTQ_BLOCK = 128  # columns per lazy batch (GPTQ's B); a multiple of GROUP
GPTQ_DAMP = 0.01  # of the Hessian's mean diagonal, added to it (GPTQ's default)


def gptq_quantize(w, hessian, store, torch, act_order=False):
    """GPTQ (Frantar et al. 2022, Algorithm 1 with lazy batches) on MLC's storage: columns are
    rounded to codes in [-MAX_INT, MAX_INT + 1] times their group's scale, and each column's
    rounding error is spread over the columns not yet rounded through the inverse Hessian's
    Cholesky factor. Without act_order the columns go in order and a group's scale is searched
    (search_scales, weighted by the Hessian's diagonal) on the group's weights as updated when
    its first column comes up. With act_order the columns go by decreasing Hessian diagonal (the
    most active inputs first, while the most columns are left to absorb their error), and since
    MLC's groups are 32 consecutive columns, every group's scale is searched up front on the
    unrounded weights (GPTQ's "static groups").
    w: (rows, cols) float32; returns (codes (rows, groups, GROUP) float32, scales (rows, groups))."""
    rows, cols = w.shape
    w = w.clone()
    h = hessian.clone()
    dead = h.diagonal() == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    groups = cols // GROUP
    scales = torch.zeros(rows, groups)
    perm = torch.arange(cols)
    if act_order:
        diag0 = h.diagonal().clone()
        _, scales = search_scales_bounded(w.reshape(rows, groups, GROUP), store, torch, diag0.reshape(groups, GROUP))
        perm = torch.argsort(diag0, descending=True, stable=True)
        w, h = w[:, perm], h[perm][:, perm]
    h += torch.eye(cols) * (GPTQ_DAMP * float(h.diagonal().mean()))
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    diag = h.diagonal()
    codes = torch.zeros(rows, cols)  # in processing order
    for b0 in range(0, cols, GPTQ_BLOCK):
        b1 = min(b0 + GPTQ_BLOCK, cols)
        w1 = w[:, b0:b1].clone()
        err1 = torch.zeros_like(w1)
        hinv1 = hinv[b0:b1, b0:b1]
        for i in range(b1 - b0):
            col = int(perm[b0 + i])
            gi, gj = divmod(col, GROUP)
            if gj == 0 and not act_order:
                _, sc = search_scales(w1[:, i:i + GROUP].reshape(rows, 1, GROUP), store, torch,
                                      diag[col:col + GROUP].reshape(1, GROUP))
                scales[:, gi] = sc[:, 0]
            s = scales[:, gi]
            safe = torch.where(s == 0, torch.ones_like(s), s)
            q = torch.where(s == 0, torch.zeros_like(s), torch.clamp(torch.round(w1[:, i] / safe), -MAX_INT, MAX_INT + 1))
            codes[:, b0 + i] = q
            e = (w1[:, i] - q * s) / hinv1[i, i]
            w1[:, i:] -= e.unsqueeze(1) @ hinv1[i, i:].unsqueeze(0)
            err1[:, i] = e
        w[:, b1:] -= err1 @ hinv[b0:b1, b1:]
    return codes[:, torch.argsort(perm)].reshape(rows, groups, GROUP), scales


# The share of q/k/v's GPTQ Hessian given to the first position of every calibration window.
# That token is the attention sink (Xiao et al. 2023, "Efficient Streaming Language Models with
# Attention Sinks"): on the built-in model later layers put 30-60% of every query's attention on
# it, so an error in its key or value reaches every token, while X^T X counts it once in 512.
# Unweighted, GPTQ moved q/k/v's rounding error into the directions that token lives in: its
# output error fell 3x on the calibration text and the perplexity rose (+4.23 with GPTQ on q/k/v,
# +2.43 without, 16 x 512 tokens). At 0.2 (0.5 scores the same): +1.50.
SINK_SHARE = 0.2


def weigh_sink(h, h0, share):
    """h (X^T X / n over every token) plus h0 (the first tokens' X^T X) scaled so that h0 holds
    `share` of the result's trace."""
    trace0 = float(h0.trace())
    if trace0 <= 0 or share <= 0:
        return h
    return h + h0 * (share / (1 - share) * float(h.trace()) / trace0)


def collect_importance(args, torch, hessians=False, sink_share=0.0):
    """The mean squared input activation of every nn.Linear's input column over the calibration
    text (llama.cpp's importance matrix, computed in the checkpoint's own forward pass): the
    weight a quantization error on that column gets in the scale search. With hessians (True,
    or a set of layer names), also those layers' X^T X / n (GPTQ's Hessian, whose diagonal is
    that importance). With sink_share, the Hessian of q/k/v (which read the same input) gives
    the first position of every window that share of its trace (see SINK_SHARE)."""
    import ppl_scoring
    from transformers import AutoModelForCausalLM, AutoTokenizer

    edgepipe_env.offline()
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    with open(args.calibration, encoding="utf-8") as f:
        text = f.read()
    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        n = ppl_scoring.chunk_count(len(tokens), args.calib_ctx, args.calib_chunks)
    except ppl_scoring.EvalError as e:
        fail(f"calibration text: {e}")
    sums, counts, hooks, firsts = {}, {}, [], {}

    def hook(name):
        def record(_module, inputs):
            x = inputs[0].detach().float().reshape(-1, inputs[0].shape[-1])
            full = hessians is True or (hessians and name in hessians)
            sums[name] = sums.get(name, 0) + ((x.T @ x) if full else (x * x).sum(0))
            counts[name] = counts.get(name, 0) + x.shape[0]
            if full and sink_share > 0 and name.endswith("q_proj"):
                x0 = inputs[0].detach().float()[:, 0, :]  # (batch, hidden): each window's first token
                firsts[name] = firsts.get(name, 0) + x0.T @ x0
        return record

    for name, module in model.named_modules():
        # k/v and up read the same input as q and gate, whose statistics the fused
        # qkv_proj and gate_up_proj take (param_map lists q and gate first).
        if isinstance(module, torch.nn.Linear) and not name.endswith(("k_proj", "v_proj", "up_proj")):
            hooks.append(module.register_forward_pre_hook(hook(name)))
    with torch.inference_mode():
        for i in range(n):
            _, inputs = ppl_scoring.chunk(tokens, i, args.calib_ctx, add_bos, bos)
            model(torch.tensor([inputs]))
    for h in hooks:
        h.remove()
    imp = {name + ".weight": sums[name] / counts[name] for name in sums}
    for name, h0 in firsts.items():
        imp[name + ".weight"] = weigh_sink(imp[name + ".weight"], h0, sink_share)
    imp = {name: {"diag": h.diagonal().clone(), "hessian": h} if h.dim() == 2 else h for name, h in imp.items()}
    if getattr(model.config, "tie_word_embeddings", False) and "lm_head.weight" in imp:
        # The tied embedding is the output projection too; as a lookup table every column
        # counts alike, so the projection's activations are what tell the columns apart.
        imp["model.embed_tokens.weight"] = imp["lm_head.weight"]
    return imp, n * args.calib_ctx


def f32_to_bf16(a):
    """tvmjs._convert_f32_to_bf16: round to nearest even inside bf16's range, truncate outside."""
    import numpy as np

    cap = np.finfo("float32").max
    limit = ((np.array([cap.view("uint32")]) >> 16) << 16).view("float32")[0]
    data = a.view("uint32")
    bias = np.where(np.logical_and(a < limit, a > -limit), ((data >> 16) & 1) + 0x7FFF, np.zeros_like(data))
    return ((data + bias) >> 16).astype("uint16")


class Shards:
    """tvmjs.TensorCacheShardingManager with prefix params_shard."""

    def __init__(self, out):
        self.out, self.records, self.cur, self.cur_recs, self.counter = out, [], bytearray(), [], 0

    def append(self, data, rec):
        if len(self.cur) + len(data) >= SHARD_CAP:
            if len(data) * 2 >= SHARD_CAP:
                rec["byteOffset"] = 0
                self._commit(data, [rec])
                return
            self.commit()
        rec["byteOffset"] = len(self.cur)
        self.cur_recs.append(rec)
        self.cur += data

    def commit(self):
        if self.cur:
            self._commit(self.cur, self.cur_recs)
            self.cur, self.cur_recs = bytearray(), []

    def _commit(self, data, recs):
        path = f"params_shard_{self.counter}.bin"
        self.counter += 1
        with open(os.path.join(self.out, path), "wb") as f:
            f.write(data)
        self.records.append({"dataPath": path, "format": "raw-shard", "nbytes": len(data), "records": recs,
                             "md5sum": hashlib.md5(bytes(data)).hexdigest()})


def convert_weight(args):
    import numpy as np
    import torch
    from safetensors import safe_open

    if args.quantization not in QUANTIZATIONS:
        fail(f"quantization {args.quantization!r}: the native converter writes {', '.join(QUANTIZATIONS)}")
    dtype = {"float16": torch.float16, "float32": torch.float32}[QUANTIZATIONS[args.quantization]]
    cfg = read_config(args.model)
    src = source_tensors(args.model)
    where = dict(src)
    pmap = param_map(cfg, set(where))
    unused = {f"model.layers.{i}.self_attn.rotary_emb.inv_freq" for i in range(cfg["num_hidden_layers"])}
    handles = {}
    rescaled = {}  # AWQ's transformed tensors, which replace the checkpoint's

    def tensor(name):
        if name in rescaled:
            return rescaled[name]
        path = where[name]
        if path not in handles:
            handles[path] = safe_open(path, framework="pt", device="cpu")
        return handles[path].get_tensor(name)

    total_params = 0
    for name, _ in src:
        if name not in unused:
            total_params += tensor(name).numel()

    os.makedirs(args.out, exist_ok=True)
    shards = Shards(args.out)
    total_bytes, count, f32_seen = 0.0, 0, False

    def emit(name, arr, dtype_name):
        nonlocal total_bytes, count, f32_seen
        total_bytes += arr.size * arr.dtype.itemsize
        if dtype_name == "float32":
            data, f32_seen = f32_to_bf16(np.ascontiguousarray(arr)).tobytes(), True
        else:
            data = np.ascontiguousarray(arr).tobytes()
        shards.append(data, {"name": name, "shape": list(arr.shape), "dtype": dtype_name,
                             "format": "f32-to-bf16", "nbytes": len(data)})
        count += 1

    importance, calib_tokens, awq_report = {}, 0, None
    if args.rounding != "rtn" and args.scales != "imatrix":
        fail(f"--rounding {args.rounding} needs --scales imatrix (its Hessian comes from the same calibration pass)")
    awq = args.awq == "on"
    if awq and (args.scales != "imatrix" or args.rounding == "gptq"):
        fail("--awq on needs --scales imatrix and --rounding rtn or gptq-embedding (its statistics come from the same calibration pass)")
    if args.scales == "imatrix":
        if not args.calibration:
            fail("--scales imatrix needs --calibration FILE")
        hessians = args.rounding == "gptq" or awq
        if args.rounding == "gptq-embedding" and not hessians:
            hessians = {"lm_head"}  # the tied embedding takes the output projection's
        importance, calib_tokens = collect_importance(args, torch, hessians=hessians,
                                                      sink_share=SINK_SHARE if args.rounding == "gptq" else 0.0)
    if awq:
        import mlc_awq

        layer_tensors = {name: tensor(name).float() for name, _ in src
                         if name.startswith("model.layers.") and name.endswith(("_proj.weight", "layernorm.weight"))}
        rescaled_imp, awq_report = mlc_awq.plan_and_apply(
            cfg, layer_tensors, {name: v["hessian"] for name, v in importance.items()},
            lambda w, imp: quantize_dequantize(w, dtype, imp, torch), torch)
        rescaled.update(layer_tensors)
        importance.update(rescaled_imp)  # the rescaled layers' inputs are x / s

    def gptq_rounds(name):
        # gptq-embedding: GPTQ for the tied embedding only (as the output projection its error is
        # weighed by the final norm's activations, whose correlations error feedback can use),
        # the linear layers to their nearest code.
        return args.rounding == "gptq" or (args.rounding == "gptq-embedding" and name == "model.embed_tokens.weight")

    # quantize() rounds by GPTQ where it is given a Hessian, to nearest where given a diagonal;
    # rounding gptq takes the columns in act order (gptq_quantize).
    importance = {name: (dict(v, act_order=args.rounding == "gptq") if gptq_rounds(name) else v["diag"])
                  if isinstance(v, dict) else v for name, v in importance.items()}
    embedding_rounding = "rtn"
    if isinstance(importance.get("model.embed_tokens.weight"), dict):
        embedding_rounding = "gptq"
    elif args.rounding != "rtn":
        # An untied embedding is a lookup table only, with no Hessian to feed back through.
        embedding_rounding = "rtn (untied: a lookup table only, no Hessian to feed back through)"

    dname = QUANTIZATIONS[args.quantization]
    for mlc in loading_order(pmap, [n for n, _ in src]):
        parts = [tensor(s) for s in pmap[mlc]]
        # numpy's astype in mlc_llm and torch's .to both round to nearest even.
        w = (torch.cat(parts, dim=0) if len(parts) > 1 else parts[0]).to(dtype)
        base = mlc[: -len(".weight")]
        if is_quantized(mlc):
            qw, qs = quantize(w, torch, args.scales, importance.get(pmap[mlc][0]))
            emit(base + ".q_weight", qw.astype("<u4"), "uint32")
            emit(base + ".q_scale", qs.numpy(), dname)
        else:
            emit(mlc, w.contiguous().numpy(), dname)
    shards.commit()
    meta = {"ParamSize": count, "ParamBytes": total_bytes, "BitsPerParam": total_bytes * 8.0 / total_params}
    with open(os.path.join(args.out, "tensor-cache.json"), "w") as f:
        json.dump({"metadata": meta, "records": shards.records}, f, indent=4)
    if f32_seen:
        # dump_tensor_cache also writes the records as bfloat16 (what the shards hold).
        for sh in shards.records:
            for r in sh["records"]:
                if r["dtype"] == "float32":
                    r["format"], r["dtype"] = "raw", "bfloat16"
        with open(os.path.join(args.out, "tensor-cache-b16.json"), "w") as f:
            json.dump({"metadata": meta, "records": shards.records}, f, indent=4)
    print(f"Parameter size after quantization: {total_bytes / (1 << 30):.3f} GB", file=sys.stderr)
    edgepipe_report.emit(report(args, calibration_tokens=calib_tokens, embedding_rounding=embedding_rounding,
                                awq=awq_report, shards=shards.counter, params=count, param_bytes=total_bytes,
                                total_params=total_params, bits_per_param=meta["BitsPerParam"],
                                torch_version=torch.__version__))


CHATML = {
    "name": "chatml",
    "system_template": "<|im_start|>system\n{system_message}<|im_end|>\n",
    "system_message": "A conversation between a user and an LLM-based AI assistant. The assistant gives helpful and honest answers.",
    "system_prefix_token_ids": None,
    "add_role_after_system_message": True,
    "roles": {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"},
    "role_templates": {"user": "{user_message}", "assistant": "{assistant_message}", "tool": "{tool_message}"},
    "messages": [],
    "seps": ["<|im_end|>\n"],
    "role_content_sep": "\n",
    "role_empty_sep": "\n",
    "stop_str": ["<|im_end|>"],
    "stop_token_ids": [2],
    "function_string": "",
    "use_function_calling": False,
}

SYSTEM_DEFAULTS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "temperature": 1.0,
                   "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "top_p": 1.0}


def tokenizer_info(out):
    # mlc_llm's Tokenizer.detect_tokenizer_info: byte-level BPE (GPT-2 style) or byte fallback.
    try:
        with open(os.path.join(out, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
    except OSError:
        return {"token_postproc_method": "byte_fallback", "prepend_space_in_encode": False, "strip_space_in_decode": False}
    dec = tj.get("decoder") or {}
    kinds = [dec.get("type")] + [d.get("type") for d in dec.get("decoders", [])]
    if "ByteLevel" in kinds:
        return {"token_postproc_method": "byte_level", "prepend_space_in_encode": False, "strip_space_in_decode": False}
    return {"token_postproc_method": "byte_fallback", "prepend_space_in_encode": True, "strip_space_in_decode": True}


def stop_token_ids(model_dir, stop_strs):
    """The ids a chat with this model stops on: its EOS set (config.json and
    generation_config.json, an id or a list) and the ids its tokenizer gives the template's stop
    strings as single tokens, sorted; empty when the files say nothing."""
    ids = set()
    for fname in ("config.json", "generation_config.json"):
        p = os.path.join(model_dir, fname)
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                eos = json.load(f).get("eos_token_id")
            ids.update(eos if isinstance(eos, list) else [eos] if isinstance(eos, int) else [])
    p = os.path.join(model_dir, "tokenizer.json")
    if os.path.exists(p):
        with open(p, encoding="utf-8") as f:
            tj = json.load(f)
        vocab = dict((tj.get("model") or {}).get("vocab") or {}) if isinstance((tj.get("model") or {}).get("vocab"), dict) else {}
        vocab.update({t["content"]: t["id"] for t in tj.get("added_tokens", [])})
        ids.update(vocab[s] for s in stop_strs if s in vocab)
    return sorted(i for i in ids if isinstance(i, int))


def active_vocab_size(model_dir):
    """len(AutoTokenizer) as gen_config.py measures it: the base vocabulary plus the added tokens
    it lacks, read from tokenizer.json (importing transformers costs a minute on a loaded machine)."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    vocab = (tj.get("model") or {}).get("vocab")
    if not isinstance(vocab, dict):
        from transformers import AutoTokenizer

        return len(AutoTokenizer.from_pretrained(model_dir, use_fast=True))
    ids = set(vocab.values())
    ids.update(t["id"] for t in tj.get("added_tokens", []))
    return len(ids)


def gen_config(args):
    if args.quantization not in QUANTIZATIONS:
        fail(f"quantization {args.quantization!r}: the native converter writes {', '.join(QUANTIZATIONS)}")
    if args.context_window_size <= 0:
        fail(f"--context-window-size must be positive, not {args.context_window_size}")
    cfg = read_config(args.model)
    os.makedirs(args.out, exist_ok=True)
    known = {"hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "rms_norm_eps",
             "vocab_size", "tie_word_embeddings", "rope_scaling", "num_key_value_heads", "head_dim",
             "rope_theta", "max_position_embeddings"}
    heads = cfg["num_attention_heads"]
    ctx = args.context_window_size
    rope = cfg.get("rope_scaling")
    if rope is not None and "rope_type" not in rope:
        rope = None
    model_config = {
        "hidden_size": cfg["hidden_size"], "intermediate_size": cfg["intermediate_size"],
        "num_attention_heads": heads, "num_hidden_layers": cfg["num_hidden_layers"],
        "rms_norm_eps": cfg["rms_norm_eps"], "vocab_size": cfg["vocab_size"],
        "tie_word_embeddings": cfg.get("tie_word_embeddings", False),
        "position_embedding_base": cfg.get("rope_theta", 10000), "rope_scaling": rope,
        "context_window_size": ctx, "prefill_chunk_size": min(ctx, 8192),
        "num_key_value_heads": cfg.get("num_key_value_heads") or heads,
        "head_dim": cfg.get("head_dim") or cfg["hidden_size"] // heads,
        "tensor_parallel_shards": 1, "pipeline_parallel_stages": 1, "max_batch_size": 1,
        "disaggregation": False,
        "kwargs": {k: v for k, v in cfg.items() if k not in known},
    }
    conv = CHATML if args.conv_template == "chatml" else {"name": args.conv_template}
    if conv is CHATML:
        # mlc_llm's ChatML template stops on id 2 (<|im_end|> in the vocabularies it was written
        # for); this model's own ids for its stop strings and its EOS set are what stop it.
        conv = dict(CHATML, stop_token_ids=stop_token_ids(args.model, CHATML["stop_str"]) or CHATML["stop_token_ids"])
    chat = {
        "version": "0.1.0", "model_type": "llama", "quantization": args.quantization,
        "model_config": model_config, "vocab_size": cfg["vocab_size"], "context_window_size": ctx,
        "sliding_window_size": -1, "prefill_chunk_size": min(ctx, 8192), "attention_sink_size": -1,
        "tensor_parallel_shards": 1, "pipeline_parallel_stages": 1, "active_vocab_size": cfg["vocab_size"],
        "temperature": None, "presence_penalty": None, "frequency_penalty": None,
        "repetition_penalty": None, "top_p": None, "tokenizer_files": [], "tokenizer_info": {},
        "conv_template": conv, "pad_token_id": None, "bos_token_id": None, "eos_token_id": None,
        "model_task": "chat", "embedding_metadata": None,
    }
    for fname in ("generation_config.json", "config.json"):
        p = os.path.join(args.model, fname)
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                for k, v in json.load(f).items():
                    if k in chat and chat[k] is None and k not in ("embedding_metadata",):
                        chat[k] = v
    for fname in TOKENIZER_FILES:
        p = os.path.join(args.model, fname)
        if os.path.exists(p):
            shutil.copy(p, os.path.join(args.out, fname))
            chat["tokenizer_files"].append(fname)
    chat["tokenizer_info"] = tokenizer_info(args.out)
    for k, v in SYSTEM_DEFAULTS.items():
        if chat[k] is None:
            chat[k] = v
    if os.path.exists(os.path.join(args.model, "tokenizer.json")):
        chat["active_vocab_size"] = active_vocab_size(args.model)
    with open(os.path.join(args.out, "mlc-chat-config.json"), "w", encoding="utf-8") as f:
        json.dump(chat, f, indent=2)
    edgepipe_report.emit(report(args, context_window_size=ctx, tokenizer_files=chat["tokenizer_files"]))


def report(args, calibration_tokens=None, embedding_rounding=None, awq=None, shards=None, params=None,
           param_bytes=None, total_params=None, bits_per_param=None, torch_version=None, context_window_size=None,
           tokenizer_files=None):
    """What the subcommand in args.cmd did; awq is mlc_awq's summary per layer kind (None without --awq on)."""
    if args.cmd == "convert-weight":
        return {"convert_weight": {
            "quantization": args.quantization, "scales": args.scales, "rounding": args.rounding,
            "calibration_tokens": calibration_tokens, "embedding_rounding": embedding_rounding,
            "linear_rounding": "gptq" if args.rounding == "gptq" else "rtn",
            "sink_share": SINK_SHARE if args.rounding == "gptq" else 0.0, "awq": awq, "shards": shards,
            "params": params, "param_bytes": param_bytes, "total_params": total_params,
            "bits_per_param": bits_per_param, "torch": torch_version,
        }, "gen_config": None}
    return {"convert_weight": None, "gen_config": {
        "context_window_size": context_window_size, "tokenizer_files": tokenizer_files,
        "conv_template": args.conv_template,
    }}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    cw = sub.add_parser("convert-weight")
    cw.add_argument("--model", required=True)
    cw.add_argument("--quantization", required=True)
    cw.add_argument("--out", required=True)
    cw.add_argument("--scales", choices=["mlc", "mse", "imatrix"], default="mlc",
                    help="mlc: mlc_llm's max_abs / 7; mse: each group's scale chosen by least squared error; "
                         "imatrix: the same, each column weighted by its mean squared activation on --calibration")
    cw.add_argument("--rounding", choices=["rtn", "gptq", "gptq-embedding"], default="rtn",
                    help="rtn: each weight to its nearest code; gptq: GPTQ's error feedback through "
                         "the calibration Hessian for every layer, q/k/v's weighting the attention sink "
                         "(needs --scales imatrix); gptq-embedding: GPTQ for the tied embedding (through "
                         "the output projection's Hessian), rtn for the rest")
    cw.add_argument("--awq", choices=["on", "off"], default="off",
                    help="on: rescale each linear layer's input columns by their calibration activations "
                         "(AWQ), folded into the norms and rows that produce them (needs --scales imatrix, --rounding rtn)")
    cw.add_argument("--calibration", help="calibration text for --scales imatrix")
    cw.add_argument("--calib-ctx", type=int, default=512)
    cw.add_argument("--calib-chunks", type=int, default=-1)
    gc = sub.add_parser("gen-config")
    gc.add_argument("--model", required=True)
    gc.add_argument("--quantization", required=True)
    gc.add_argument("--conv-template", default="chatml")
    gc.add_argument("--context-window-size", type=int, required=True)
    gc.add_argument("--out", required=True)
    args = ap.parse_args()
    edgepipe_env.offline()
    {"convert-weight": convert_weight, "gen-config": gen_config}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
