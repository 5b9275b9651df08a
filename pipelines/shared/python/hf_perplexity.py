"""Perplexity of a Hugging Face causal LM, scored exactly like llama.cpp's llama-perplexity.

    python hf_perplexity.py --model DIR --text eval.txt [--ctx 512] [--chunks N]

The scheme (tokens, chunks, the scored half of each) is ppl_scoring.py's, shared with every
helper that reports a perplexity. Its report is report() below (reports/hf_perplexity.json).
"""

import argparse
import sys

import edgepipe_env
import edgepipe_report
import ppl_scoring


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--text", required=True, help="UTF-8 text file to score")
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk (llama-perplexity -c)")
    ap.add_argument("--chunks", type=int, default=-1, help="score at most this many chunks (llama-perplexity --chunks)")
    ap.add_argument("--add-bos", choices=["auto", "yes", "no"], default="auto",
                    help="put BOS first in every chunk; auto: if the tokenizer adds BOS itself")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: all cores)")
    ppl_scoring.add_score_args(ap)
    args = ap.parse_args()

    edgepipe_env.offline()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()

    with open(args.text, encoding="utf-8") as f:
        text = f.read()

    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text, {"auto": None, "yes": True, "no": False}[args.add_bos])
        n_chunk = ppl_scoring.chunk_count(len(tokens), args.ctx, args.chunks)
    except ppl_scoring.EvalError as e:
        print(f"hf_perplexity: {e}", file=sys.stderr)
        return 2
    scorer = ppl_scoring.scorer(args, args.ctx)
    try:
        ppl, count = ppl_scoring.score(ppl_scoring.torch_forward(model, torch), tokens, args.ctx, n_chunk, add_bos, bos, scorer_=scorer)
        kl, top1 = scorer.agreement()
    except ppl_scoring.EvalError as e:
        print(f"hf_perplexity: {e}", file=sys.stderr)
        return 2
    scorer.save(args.scores_out)
    edgepipe_report.emit(report(ppl, len(tokens), n_chunk, args.ctx, count, add_bos, kl, top1))
    return 0


def report(ppl, tokens, chunks, ctx, scored, add_bos, kl, top1):
    return {"ppl": ppl, "tokens": tokens, "chunks": chunks, "ctx": ctx, "scored": scored, "add_bos": add_bos,
            "kl_divergence": kl, "top1_agreement": top1}


if __name__ == "__main__":
    sys.exit(main())
