"""The quality gate of an MLC model folder: its published shards read back from the files,
dequantized into the unconverted model in PyTorch and scored on the evaluation text.

    python mlc_gate.py --mlc DIR --model DIR --text eval.txt [--ctx 512] [--chunks N]
                       --digests OUT.json [--scores-out DIR] [--baseline-scores DIR]

Reads tensor-cache.json and every params_shard_N.bin it lists (sizes and md5sums checked),
decodes each tensor to float32 the way MLC's kernels read it (q4: (q - 7) * scale per group of
32, element r of a uint32 at bits 4r; float16 widened; a float32 record stored "f32-to-bf16"
widened from bfloat16), writes the sha256 of every decoded tensor's little-endian float32 bytes
to --digests (the browser check must decode the same bytes), loads those weights into the
Hugging Face model (qkv_proj and gate_up_proj split back) and scores it with ppl_scoring.py,
the scheme of every edgepipe perplexity. The arithmetic is float32: (q - 7) * scale is exact
there. WebLLM's q4f16_1 kernels compute in float16, which this gate does not reproduce.

--scores-out keeps every scored token's negative log-likelihood (the delta's interval against
the baseline's); --baseline-scores, the hf_perplexity.py baseline's folder, adds the KL
divergence and top-1 agreement against its top tokens (ppl_scoring.add_score_args).

Its report is report() below (reports/mlc_gate.json): the perplexity, the tokens and chunks it
scored, how many tensors it decoded, the sha256 of all their digests, and the KL divergence and
top-1 agreement against the baseline (null without --baseline-scores).
"""

import argparse
import hashlib
import json
import os
import sys

import edgepipe_env
import edgepipe_report
import ppl_scoring


def fail(msg):
    print(f"mlc_gate: {msg}", file=sys.stderr)
    sys.exit(2)


def read_records(mlc_dir):
    import numpy as np

    with open(os.path.join(mlc_dir, "tensor-cache.json"), encoding="utf-8") as f:
        cache = json.load(f)
    out = {}
    for sh in cache["records"]:
        with open(os.path.join(mlc_dir, sh["dataPath"]), "rb") as f:
            data = f.read()
        if len(data) != sh["nbytes"]:
            fail(f"{sh['dataPath']}: {len(data)} bytes, tensor-cache.json says {sh['nbytes']}")
        if hashlib.md5(data).hexdigest() != sh["md5sum"]:
            fail(f"{sh['dataPath']}: md5 differs from tensor-cache.json")
        for r in sh["records"]:
            raw = data[r["byteOffset"]:r["byteOffset"] + r["nbytes"]]
            dt, fmt = r["dtype"], r["format"]
            if dt == "float32" and fmt == "f32-to-bf16":
                a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            elif dt == "bfloat16":
                a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            elif dt in ("float16", "float32", "uint32"):
                a = np.frombuffer(raw, dtype={"float16": "<f2", "float32": "<f4", "uint32": "<u4"}[dt])
            else:
                fail(f"{r['name']}: dtype {dt} is not one an MLC q4 model stores")
            out[r["name"]] = a.reshape(r["shape"])
    return cache, out


def dequantize(q_weight, q_scale, cols):
    import numpy as np

    rows, words = q_weight.shape
    codes = np.empty((rows, words * 8), dtype=np.float32)
    for r in range(8):
        codes[:, r::8] = ((q_weight >> np.uint32(4 * r)) & np.uint32(0xF)).astype(np.float32)
    codes = codes[:, :cols] - np.float32(7)
    scale = np.repeat(q_scale.astype(np.float32), 32, axis=1)[:, :cols]
    return np.ascontiguousarray(codes * scale, dtype=np.float32)


def load_model(mlc_dir, model_dir, float_names, digests_path, torch):
    """The unconverted model with the MLC folder's shards decoded into it (float32), the folder's
    tensor-cache.json and the sha256 of each decoded tensor (written to digests_path when set).
    float_names are parameters kept from the checkpoint instead (a diagnostic)."""
    import numpy as np
    from transformers import AutoModelForCausalLM

    cache, recs = read_records(mlc_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    cfg = model.config
    params = dict(model.named_parameters())
    for name in float_names:
        if name not in params:
            fail(f"--float {name}: the checkpoint has no such parameter")
    original = {name: params[name].detach().clone() for name in float_names}

    decoded, digests = {}, {}
    for name in sorted(recs):
        if name.endswith(".q_scale"):
            continue
        if name.endswith(".q_weight"):
            base = name[: -len(".q_weight")]
            if base + ".q_scale" not in recs:
                fail(f"{name} has no {base}.q_scale")
            if base.endswith("qkv_proj"):
                cols = cfg.hidden_size
            elif base.endswith("gate_up_proj"):
                cols = cfg.hidden_size
            else:
                cols = params[base + ".weight"].shape[1]
            w = dequantize(recs[name], recs[base + ".q_scale"], cols)
            key = base + ".weight"
        else:
            w = np.ascontiguousarray(recs[name].astype(np.float32))
            key = name
        decoded[key] = w
        digests[key] = hashlib.sha256(w.astype("<f4").tobytes()).hexdigest()

    # Split the fused tensors back into the Hugging Face model's parameters.
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    nq, nkv = cfg.num_attention_heads * head_dim, cfg.num_key_value_heads * head_dim
    loaded = set()

    def put(hf_name, value):
        p = params.get(hf_name)
        if p is None:
            fail(f"the checkpoint has no parameter {hf_name}")
        if tuple(p.shape) != value.shape:
            fail(f"{hf_name}: decoded shape {value.shape}, the model has {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(value))
        loaded.add(hf_name)

    for key, w in decoded.items():
        if key.endswith("self_attn.qkv_proj.weight"):
            a = key[: -len("qkv_proj.weight")]
            put(a + "q_proj.weight", w[:nq])
            put(a + "k_proj.weight", w[nq:nq + nkv])
            put(a + "v_proj.weight", w[nq + nkv:])
        elif key.endswith("mlp.gate_up_proj.weight"):
            m = key[: -len("gate_up_proj.weight")]
            half = w.shape[0] // 2
            put(m + "gate_proj.weight", w[:half])
            put(m + "up_proj.weight", w[half:])
        else:
            put(key, w)
    with torch.no_grad():
        for name, value in original.items():
            params[name].copy_(value)
    tied = getattr(cfg, "tie_word_embeddings", False)
    left = sorted(n for n in params if n not in loaded and not (tied and n == "lm_head.weight"))
    if left:
        fail(f"{len(left)} parameters of the model are not in the MLC folder, e.g. {left[0]}")

    if digests_path:
        with open(digests_path, "w", encoding="utf-8") as f:
            json.dump({"format": "sha256 of each tensor decoded to little-endian float32, by Hugging Face-style MLC name",
                       "tensors": digests}, f, indent=1, sort_keys=True)
    return model, cache, digests


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlc", required=True, help="the MLC model folder (tensor-cache.json and shards)")
    ap.add_argument("--model", required=True, help="the unconverted Hugging Face checkpoint")
    ap.add_argument("--text", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--digests", required=True, help="where to write the decoded tensors' sha256")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--float", action="append", default=[], metavar="NAME",
                    help="a diagnostic, never used by the gate step: keep this Hugging Face parameter "
                         "from the checkpoint instead of the shards (repeatable), to measure what its "
                         "quantization costs")
    ppl_scoring.add_score_args(ap)
    args = ap.parse_args()
    edgepipe_env.offline()

    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    model, cache, digests = load_model(args.mlc, args.model, args.float, args.digests, torch)
    all_sha = hashlib.sha256("".join(f"{k}={v}\n" for k, v in sorted(digests.items())).encode()).hexdigest()

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        n_chunk = ppl_scoring.chunk_count(len(tokens), args.ctx, args.chunks)
    except ppl_scoring.EvalError as e:
        fail(str(e))
    scorer = ppl_scoring.scorer(args, args.ctx, label="mlc ")
    try:
        ppl, count = ppl_scoring.score(ppl_scoring.torch_forward(model, torch), tokens, args.ctx, n_chunk,
                                       add_bos, bos, scorer_=scorer)
        kl, top1 = scorer.agreement()
    except ppl_scoring.EvalError as e:
        fail(str(e))
    scorer.save(args.scores_out)
    edgepipe_report.emit(report(ppl, n_chunk, args.ctx, count, len(digests), all_sha, cache["metadata"].get("ParamBytes"),
                                args.float, torch.__version__, kl, top1))
    return 0


def report(ppl, chunks, ctx, scored, tensors, decoded_sha256, param_bytes, float_from_checkpoint, torch_version, kl, top1):
    """param_bytes is tensor-cache.json's ParamBytes (None when it has none); float_from_checkpoint
    the --float parameters kept from the checkpoint (a diagnostic: the step passes none); kl, top1
    against the baseline's scores (None without --baseline-scores)."""
    return {"ppl": ppl, "chunks": chunks, "ctx": ctx, "scored": scored, "tensors": tensors,
            "decoded_sha256": decoded_sha256, "param_bytes": param_bytes, "compute": "float32",
            "float_from_checkpoint": float_from_checkpoint, "torch": torch_version,
            "kl_divergence": kl, "top1_agreement": top1}


if __name__ == "__main__":
    sys.exit(main())
