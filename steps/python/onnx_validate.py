"""Validate an ONNX causal LM against its PyTorch source, and score it, with ONNX Runtime on the CPU.

    python onnx_validate.py --onnx model.onnx --hf DIR --text eval.txt [--ctx 512] [--chunks N]

Tokens and chunks follow hf_perplexity.py (and with it llama.cpp's llama-perplexity): the
text is tokenized once without parsing special-token text, BOS first if the tokenizer adds
one, cut into floor(tokens / ctx) chunks (--chunks caps that), each chunk run from an empty
KV cache with BOS as its first token, and only the second half scored; so the perplexity
here compares with hf_perplexity.py's on the unconverted checkpoint.

Logits check: the first chunk also runs through the PyTorch model (fp32, transformers) and
the two logits tensors are compared position by position: max and mean absolute
difference, and how often both pick the same top token.

A graph with static shapes (QNN QDQ) must take exactly --ctx tokens.

Prints one JSON line: {"ppl", "chunks", "ctx", "scored", "tokens", "max_abs_logit_diff",
"mean_abs_logit_diff", "top1_agreement", "logit_positions", "providers"}.
"""

import argparse
import json
import math
import os
import sys


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
    args = ap.parse_args()
    if args.ctx < 4 or args.ctx % 2:
        print("onnx_validate: --ctx must be an even number of at least 4", file=sys.stderr)
        return 2

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import numpy as np
    import onnxruntime as ort
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(args.hf)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    bos = tokenizer.bos_token_id
    probe = tokenizer("a").input_ids
    add_bos = bos is not None and len(probe) > 1 and probe[0] == bos
    tokens = tokenizer(text, add_special_tokens=False, split_special_tokens=True).input_ids
    if add_bos:
        tokens = [bos] + tokens
    n_ctx = args.ctx
    if len(tokens) < 2 * n_ctx:
        print(f"onnx_validate: need at least {2 * n_ctx} tokens for --ctx {n_ctx}, the text has {len(tokens)}",
              file=sys.stderr)
        return 2
    n_chunk = len(tokens) // n_ctx
    if args.chunks > 0:
        n_chunk = min(n_chunk, args.chunks)
    first = n_ctx // 2

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    session = ort.InferenceSession(args.onnx, sess_options=so, providers=["CPUExecutionProvider"])

    def chunk_inputs(i):
        chunk = tokens[i * n_ctx:(i + 1) * n_ctx]
        inputs = list(chunk)
        if add_bos:
            inputs[0] = bos
        return chunk, inputs

    nll, count = 0.0, 0
    check = {}
    for i in range(n_chunk):
        chunk, inputs = chunk_inputs(i)
        logits = session.run(["logits"], make_feeds(session, inputs, np))[0][0].astype(np.float64)
        if i == 0:
            model = AutoModelForCausalLM.from_pretrained(args.hf, dtype=torch.float32)
            model.eval()
            with torch.inference_mode():
                ref = model(torch.tensor([inputs])).logits[0].double().numpy()
            del model
            diff = np.abs(logits - ref)
            check = {
                "max_abs_logit_diff": float(diff.max()),
                "mean_abs_logit_diff": float(diff.mean()),
                "top1_agreement": float((logits.argmax(-1) == ref.argmax(-1)).mean()),
                "logit_positions": int(logits.shape[0]),
            }
            print(f"logits vs PyTorch on chunk 1: max |diff| {check['max_abs_logit_diff']:.6g}, "
                  f"mean {check['mean_abs_logit_diff']:.6g}, same top-1 {check['top1_agreement']:.4f}",
                  file=sys.stderr, flush=True)
        scored = logits[first:n_ctx - 1]
        scored = scored - scored.max(-1, keepdims=True)
        logp = scored - np.log(np.exp(scored).sum(-1, keepdims=True))
        targets = np.array(chunk[first + 1:n_ctx])
        nll -= float(logp[np.arange(len(targets)), targets].sum())
        count += n_ctx - 1 - first
        print(f"[{i + 1}/{n_chunk}] ppl so far {math.exp(nll / count):.4f}", file=sys.stderr, flush=True)

    out = {"ppl": math.exp(nll / count), "chunks": n_chunk, "ctx": n_ctx, "scored": count, "tokens": len(tokens),
           "providers": session.get_providers()}
    out.update(check)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
