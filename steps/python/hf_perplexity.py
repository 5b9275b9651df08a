"""Perplexity of a Hugging Face causal LM, scored exactly like llama.cpp's llama-perplexity.

    python hf_perplexity.py --model DIR --text eval.txt [--ctx 512] [--chunks N]

The scheme follows tools/perplexity/perplexity.cpp (perplexity(), ppl_stride 0):
  * the whole text is tokenized once, without parsing special-token text, with a BOS
    token in front only if the tokenizer adds one (llama.cpp: add_bos of the vocab);
  * it is cut into floor(tokens / ctx) chunks of ctx tokens (--chunks caps that), the
    remainder is dropped;
  * each chunk is evaluated on its own from an empty cache; if add_bos, its first
    token is replaced by BOS for the forward pass;
  * only the second half is scored: the logits at positions ctx/2 .. ctx-2 predict the
    tokens at ctx/2+1 .. ctx-1, i.e. ctx-1-ctx/2 tokens per chunk;
  * ppl = exp(mean negative log-likelihood over all scored tokens).

Prints one JSON line: {"ppl", "tokens", "chunks", "ctx", "scored", "add_bos"}.
"""

import argparse
import json
import math
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--text", required=True, help="UTF-8 text file to score")
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk (llama-perplexity -c)")
    ap.add_argument("--chunks", type=int, default=-1, help="score at most this many chunks (llama-perplexity --chunks)")
    ap.add_argument("--add-bos", choices=["auto", "yes", "no"], default="auto",
                    help="put BOS first in every chunk; auto: if the tokenizer adds BOS itself")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: all cores)")
    args = ap.parse_args()
    if args.ctx < 4 or args.ctx % 2:
        print("hf_perplexity: --ctx must be an even number of at least 4", file=sys.stderr)
        return 2

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()

    with open(args.text, encoding="utf-8") as f:
        text = f.read()

    bos = tokenizer.bos_token_id
    if args.add_bos == "auto":
        probe = tokenizer("a").input_ids
        add_bos = bos is not None and len(probe) > 1 and probe[0] == bos
    else:
        add_bos = args.add_bos == "yes"
    if add_bos and bos is None:
        print("hf_perplexity: --add-bos yes but the tokenizer has no BOS token", file=sys.stderr)
        return 2

    # llama.cpp tokenizes with parse_special=false: "<|im_end|>" in the text is plain text.
    tokens = tokenizer(text, add_special_tokens=False, split_special_tokens=True).input_ids
    if add_bos:
        tokens = [bos] + tokens

    n_ctx = args.ctx
    if len(tokens) < 2 * n_ctx:
        print(f"hf_perplexity: need at least {2 * n_ctx} tokens for --ctx {n_ctx}, the text has {len(tokens)}",
              file=sys.stderr)
        return 2
    n_chunk = len(tokens) // n_ctx
    if args.chunks > 0:
        n_chunk = min(n_chunk, args.chunks)
    first = n_ctx // 2

    nll, count = 0.0, 0
    with torch.inference_mode():
        for i in range(n_chunk):
            chunk = tokens[i * n_ctx:(i + 1) * n_ctx]
            inputs = list(chunk)
            if add_bos:
                inputs[0] = bos
            logits = model(torch.tensor([inputs])).logits[0]
            # logits[j] predicts chunk[j+1]; score j = first .. n_ctx-2.
            scored = logits[first:n_ctx - 1].double()
            targets = torch.tensor(chunk[first + 1:n_ctx])
            logp = torch.log_softmax(scored, dim=-1).gather(1, targets[:, None])[:, 0]
            nll -= logp.sum().item()
            count += n_ctx - 1 - first
            print(f"[{i + 1}/{n_chunk}] ppl so far {math.exp(nll / count):.4f}", file=sys.stderr, flush=True)

    print(json.dumps({"ppl": math.exp(nll / count), "tokens": len(tokens), "chunks": n_chunk,
                      "ctx": n_ctx, "scored": count, "add_bos": add_bos}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
