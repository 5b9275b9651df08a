"""Greedy generations of the unconverted model: what every artifact's decode check compares with.

    python generate_reference.py --model DIR --prompts chat-prompts.json --out DIR
                                 [--max-new-tokens 64] [--text eval.txt] [--threads N]

Each prompt of --prompts (data/chat-prompts.json) is rendered with the model's chat template
(tokenizer.apply_chat_template, add_generation_prompt=True); a tokenizer without one gets the
turns' plain text, and the report says the template was skipped. The model (float32, through
transformers and its KV cache, decode_check.TorchRuntime) then decodes greedily up to
--max-new-tokens tokens, stopping at an end-of-sequence token (generation_config's and the
tokenizer's), which is kept as the sequence's last token.

A model with a sliding window (config sliding_window, with a "sliding_attention" layer type or
no layer types) gets one more sequence: the prompts file's window instruction and a passage of
--text, cut so that the prompt ends a few tokens short of the window and its decode crosses
it; crosses_window says whether it did (the model may stop at EOS first).

--out/reference.json holds, per sequence, its id, prompt_ids, tokens, stopped_at_eos,
crosses_window (null without a window) and the top-32 token ids and log-probabilities at
every step (topk: {ids, logp}), with the EOS ids and the settings. Its report is report()
below (reports/generate_reference.json).
"""

import argparse
import json
import os
import sys

import decode_check
import edgepipe_env
import edgepipe_report

REFERENCE_FILE = "reference.json"


def fail(msg):
    print(f"generate_reference: {msg}", file=sys.stderr)
    sys.exit(2)


def sliding_window(config):
    """The model's attention window in tokens, or None when no layer slides."""
    cfg = getattr(config, "text_config", None) or config
    w = getattr(cfg, "sliding_window", None)
    if not w:
        return None
    types = getattr(cfg, "layer_types", None)
    if types is not None:
        return int(w) if any("sliding" in str(t) for t in types) else None
    if getattr(cfg, "use_sliding_window", True) is False:
        return None
    return int(w)


def eos_ids(model, tokenizer):
    ids = set()
    gen = getattr(model, "generation_config", None)
    for v in (getattr(gen, "eos_token_id", None), getattr(model.config, "eos_token_id", None), tokenizer.eos_token_id):
        if v is None:
            continue
        ids.update(int(x) for x in (v if isinstance(v, (list, tuple)) else [v]))
    return sorted(ids)


def has_template(tokenizer):
    return bool(getattr(tokenizer, "chat_template", None))


def render(tokenizer, messages, templated):
    """The prompt's token ids: the chat template's, or the turns' plain text."""
    if templated:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(x) for x in ids]
    text = "\n".join(m["content"] for m in messages)
    return [int(x) for x in tokenizer(text).input_ids]


def window_lead(max_new_tokens):
    """How many tokens short of the window the prompt ends: the token fed at decode step
    lead + 1 is the first past the window's start."""
    return max(1, min(8, (max_new_tokens - 2) // 2))


def window_prompt(tokenizer, templated, instruction, text, window, max_new_tokens):
    """Messages whose rendered prompt ends window_lead tokens short of the window (or less
    when the tokenizer merges tokens at the passage's end), with its ids."""
    target = window - window_lead(max_new_tokens)
    passage = tokenizer(text, add_special_tokens=False).input_ids
    if not passage:
        fail("--text is empty: a sliding-window model needs a passage to fill its window")
    while len(passage) < target:
        passage = passage + passage
    overhead = len(render(tokenizer, [{"role": "user", "content": instruction + "\n\n"}], templated))
    n = max(1, target - overhead)
    for _ in range(6):
        body = tokenizer.decode(passage[:n])
        msgs = [{"role": "user", "content": instruction + "\n\n" + body}]
        ids = render(tokenizer, msgs, templated)
        if len(ids) <= target:
            return msgs, ids
        n -= len(ids) - target
    fail(f"could not fit the window passage under {target} tokens")


def generate(runtime, prompt_ids, max_new_tokens, eos, np):
    """Greedy decoding through the runtime's KV cache: (tokens, stopped_at_eos, top-k ids, logp)."""
    tokens, ids_rows, logp_rows = [], [], []
    logits = runtime.start(prompt_ids)
    while True:
        logp = decode_check.log_softmax(np.asarray(logits, dtype=np.float32), np)
        ids, vals = decode_check.top_k(logp, np)
        ids_rows.append([int(x) for x in ids])
        logp_rows.append([float(np.float32(x)) for x in vals])
        tok = int(ids[0])
        tokens.append(tok)
        if tok in eos:
            return tokens, True, ids_rows, logp_rows
        if len(tokens) >= max_new_tokens:
            return tokens, False, ids_rows, logp_rows
        logits = runtime.step(tok)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the unconverted Hugging Face checkpoint")
    ap.add_argument("--prompts", required=True, help="the chat prompts (data/chat-prompts.json)")
    ap.add_argument("--out", required=True, help="folder for reference.json")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--text", help="text a sliding-window model's window passage is taken from")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.max_new_tokens < 1:
        fail("--max-new-tokens must be at least 1")
    edgepipe_env.offline()

    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    with open(args.prompts, encoding="utf-8") as f:
        prompts = json.load(f)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    templated = has_template(tokenizer)
    eos = eos_ids(model, tokenizer)
    if not eos:
        fail("the model names no end-of-sequence token (generation_config, config or tokenizer)")
    window = sliding_window(model.config)

    todo = [(p["id"], render(tokenizer, p["messages"], templated)) for p in prompts["prompts"]]
    if window is not None:
        limit = getattr(getattr(model.config, "text_config", None) or model.config, "max_position_embeddings", None)
        if limit is not None and window >= limit:
            window = None  # the window is the whole context: nothing slides
        elif not args.text:
            fail(f"the model has a {window}-token sliding window: pass --text, the passage its extra sequence is cut from")
        else:
            with open(args.text, encoding="utf-8") as f:
                text = f.read()
            w = prompts["window"]
            _, ids = window_prompt(tokenizer, templated, w["instruction"], text, window, args.max_new_tokens)
            todo.append((w["id"], ids))

    runtime = decode_check.TorchRuntime(model, torch)
    seqs = []
    for sid, prompt_ids in todo:
        tokens, stopped, top_ids, top_logp = generate(runtime, prompt_ids, args.max_new_tokens, set(eos), np)
        crosses = None
        if window is not None:
            # The last token fed through the cache sits at len(prompt) + len(tokens) - 2; it
            # attends past the window's start when that position is the window or more.
            crosses = len(prompt_ids) <= window <= len(prompt_ids) + len(tokens) - 2
        seqs.append({"id": sid, "prompt_ids": prompt_ids, "tokens": tokens, "stopped_at_eos": stopped,
                     "crosses_window": crosses, "topk": {"ids": top_ids, "logp": top_logp}})
        print(f"generate_reference {sid}: {len(prompt_ids)} prompt tokens, {len(tokens)} generated"
              f"{' (stopped at EOS)' if stopped else ''}: {tokenizer.decode(tokens)!r}", file=sys.stderr, flush=True)

    ref = {"format": 1, "max_new_tokens": args.max_new_tokens, "chat_template": templated, "eos_ids": eos,
           "sliding_window": window, "sequences": seqs}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, REFERENCE_FILE), "w", encoding="utf-8") as f:
        json.dump(ref, f, separators=(",", ":"))
    edgepipe_report.emit(report(REFERENCE_FILE, seqs, args.max_new_tokens, templated, eos, window, runtime.cache_name(),
                                transformers.__version__, torch.__version__))
    return 0


def report(reference, seqs, max_new_tokens, templated, eos, window, cache, transformers_version, torch_version):
    """window is the sliding window (None without one); crosses_window whether the window
    sequence's decode crossed it (None without a window)."""
    crosses = [s["crosses_window"] for s in seqs if s["crosses_window"] is not None]
    return {"reference": reference, "sequences": len(seqs), "generated_tokens": sum(len(s["tokens"]) for s in seqs),
            "stopped_at_eos": sum(1 for s in seqs if s["stopped_at_eos"]), "max_new_tokens": max_new_tokens,
            "chat_template": templated, "eos_ids": eos, "sliding_window": window,
            "crosses_window": any(crosses) if crosses else None, "cache": cache,
            "transformers": transformers_version, "torch": torch_version}


if __name__ == "__main__":
    sys.exit(main())
