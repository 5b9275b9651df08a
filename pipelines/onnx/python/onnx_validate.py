"""Validate an ONNX causal LM against its PyTorch source, and score it, with ONNX Runtime on the CPU.

    python onnx_validate.py --onnx model.onnx --hf DIR --text eval.txt [--ctx 512] [--chunks N]
                            [--scores-out DIR] [--baseline-scores DIR]

Tokens, chunks and scoring are ppl_scoring.py's (llama.cpp's llama-perplexity scheme, each
chunk run from an empty KV cache), so the perplexity here compares with hf_perplexity.py's
on the unconverted checkpoint.

Logits check: the first chunk also runs through the PyTorch model (fp32, transformers) and
the two logits tensors are compared position by position: max and mean absolute
difference, and how often both pick the same top token.

A graph with static shapes (QNN QDQ) must take exactly --ctx tokens.

Per-token scores (ppl_scoring.add_score_args): --scores-out keeps every scored token's
negative log-likelihood (the delta's interval against the baseline's); --baseline-scores, the
hf_perplexity.py baseline's folder, adds the KL divergence and top-1 agreement against its top
tokens over every scored position (kl_divergence, baseline_top1_agreement; null without it).
top1_agreement is the logits check's, on the first chunk against PyTorch.

Its report is report() below (reports/onnx_validate.json).
"""

import argparse
import sys

import edgepipe_env
import edgepipe_report
import logits_check
import ppl_scoring


def past_shape(inp, batch):
    """Shape of an empty past tensor: numeric dims kept, batch 1, every other symbol 0."""
    dims = []
    for i, d in enumerate(inp.shape):
        if isinstance(d, int):
            dims.append(d)
        else:
            dims.append(batch if i == 0 else 0)
    return dims


def make_feeds(session, ids, np):
    n = len(ids)
    feeds = {}
    for inp in session.get_inputs():
        name = inp.name
        if name == "input_ids":
            feeds[name] = np.array([ids], dtype=np.int64)
        elif name == "attention_mask":
            feeds[name] = np.ones((1, n), dtype=np.int64)
        elif name == "position_ids":
            feeds[name] = np.arange(n, dtype=np.int64)[None, :]
        elif name.startswith("past_key_values."):
            dtype = np.float16 if "float16" in inp.type else np.float32
            feeds[name] = np.zeros(past_shape(inp, 1), dtype=dtype)
        else:
            raise SystemExit(f"onnx_validate: the graph has an input {name!r} this script does not know how to fill")
        seq = inp.shape[1] if len(inp.shape) > 1 else None
        if name == "input_ids" and isinstance(seq, int) and seq != n:
            raise SystemExit(f"onnx_validate: the graph takes exactly {seq} tokens (static shape), but --ctx is {n}: "
                             f"score it with the context it was fixed to")
    return feeds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True, help="ONNX model file")
    ap.add_argument("--hf", required=True, help="the Hugging Face checkpoint it was converted from")
    ap.add_argument("--text", required=True, help="UTF-8 text to score")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ppl_scoring.add_score_args(ap)
    args = ap.parse_args()

    edgepipe_env.offline()

    import numpy as np
    import onnxruntime as ort
    import torch
    from transformers import AutoTokenizer

    threads = edgepipe_env.threads(args.threads)
    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(args.hf)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        n_chunk = ppl_scoring.chunk_count(len(tokens), args.ctx, args.chunks)
    except ppl_scoring.EvalError as e:
        print(f"onnx_validate: {e}", file=sys.stderr)
        return 2
    n_ctx = args.ctx

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    session = ort.InferenceSession(args.onnx, sess_options=so, providers=["CPUExecutionProvider"])

    scorer = ppl_scoring.scorer(args, n_ctx)
    check = {}
    try:
        for i in range(n_chunk):
            chunk, inputs = ppl_scoring.chunk(tokens, i, n_ctx, add_bos, bos)
            logits = session.run(["logits"], make_feeds(session, inputs, np))[0][0].astype(np.float64)
            if i == 0:
                check = logits_check.against_reference(args.hf, inputs, logits, torch, np)
            scorer.add(logits, chunk, total=n_chunk)
        kl, top1 = scorer.agreement()
    except ppl_scoring.EvalError as e:
        print(f"onnx_validate: {e}", file=sys.stderr)
        return 2
    scorer.save(args.scores_out)

    edgepipe_report.emit(report(scorer.ppl(), n_chunk, n_ctx, scorer.count, len(tokens), session.get_providers(), check,
                                kl, top1))
    return 0


def report(ppl, chunks, ctx, scored, tokens, providers, check, kl, top1):
    """check: logits_check's fields, or {} where none ran (null in the report); kl, top1: against
    the baseline's scores (None without --baseline-scores)."""
    return {"ppl": ppl, "chunks": chunks, "ctx": ctx, "scored": scored, "tokens": tokens, "providers": providers,
            "max_abs_logit_diff": check.get("max_abs_logit_diff"), "mean_abs_logit_diff": check.get("mean_abs_logit_diff"),
            "top1_agreement": check.get("top1_agreement"), "logit_positions": check.get("logit_positions"),
            "kl_divergence": kl, "baseline_top1_agreement": top1}


if __name__ == "__main__":
    sys.exit(main())
