"""Decode-path consistency and generation agreement: what every family's decode helper measures.

A decode helper loads an artifact in its runtime (or the closest host equivalent) and hands
compare() a runtime object with three methods:

  prefill(ids, keep)  logits [keep, vocab] of the last `keep` positions of one forward pass over
                      ids from an empty cache;
  start(prompt_ids)   logits [vocab] at the prompt's last position, from a fresh KV cache that the
                      runtime keeps;
  step(token)         logits [vocab] after feeding one more token through that cache.

The reference is generate_reference.py's reference.json: for each prompt the unconverted model's
prompt_ids, its greedy tokens (EOS last when it stopped there) and its top-TOPK log-probabilities
at every step. For each sequence S = prompt_ids + tokens (T tokens):

  (a) P = prefill(S[:-1], keep=T): row j holds the logits that predict tokens[j];
  (b) D[0] = start(prompt_ids), D[j] = step(tokens[j-1]): teacher-forced on the reference's
      tokens, so both paths and the original see the same prefix at every step;
  (c) decode consistency: max |D[j] - P[j]| over every logit of every step, and the share of
      steps whose argmax agree (a KV cache fed at a wrong position moves both);
  (d) generation agreement: the share of steps where argmax D[j] is the reference's token, the
      first step where it is not, the mean KL divergence of D[j] from the reference's top-TOPK
      (coarsened as ppl_scoring.Comparison: those tokens and the rest of the vocabulary as one
      bucket), and, where the reference stopped at EOS, whether D's last step picks an EOS too.

Only numpy is needed here; TorchRuntime wraps a transformers causal LM and its KV cache.
"""

import json

TOPK = 32


def load_reference(path):
    """reference.json, with each sequence's fields checked enough to compare against."""
    with open(path, encoding="utf-8") as f:
        ref = json.load(f)
    for s in ref["sequences"]:
        n = len(s["tokens"])
        if n == 0:
            raise ValueError(f"reference sequence {s['id']} has no tokens")
        if len(s["topk"]["ids"]) != n or len(s["topk"]["logp"]) != n:
            raise ValueError(f"reference sequence {s['id']}: {n} tokens but {len(s['topk']['ids'])} top-k rows")
    return ref


def log_softmax(logits, np):
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def top_k(logp, np, k=TOPK):
    """The k most likely tokens of one step's log-probabilities and theirs, most likely first."""
    part = np.argpartition(logp, -k)[-k:]
    order = np.argsort(-logp[part], kind="stable")
    ids = part[order]
    return ids.astype(np.int64), logp[ids]


def coarse_kl(p_log, q_log, np):
    """KL(P || Q) over P's top tokens and the rest of the vocabulary as one bucket, per row: the
    divergence ppl_scoring.Comparison takes (p_log, q_log: [rows, k] log-probabilities of the
    same tokens)."""
    p, q = np.exp(p_log), np.exp(q_log)
    p_rest = np.clip(1.0 - p.sum(axis=-1), 1e-12, 1.0)
    q_rest = np.clip(1.0 - q.sum(axis=-1), 1e-12, 1.0)
    kl = (p * (p_log - q_log)).sum(axis=-1) + p_rest * (np.log(p_rest) - np.log(q_rest))
    return np.maximum(kl, 0.0)


def compare_sequence(runtime, seq, eos_ids, np):
    """One reference sequence through both paths of runtime: its measurements (a dict)."""
    prompt, tokens = list(seq["prompt_ids"]), list(seq["tokens"])
    n = len(tokens)
    full = prompt + tokens[:-1]
    p_rows = np.asarray(runtime.prefill(full, n), dtype=np.float32)
    if p_rows.shape[0] != n:
        raise ValueError(f"prefill kept {p_rows.shape[0]} rows, asked for {n}")
    max_abs, same_top1, agree, first, kl_sum = 0.0, 0, 0, None, 0.0
    ref_ids = np.asarray(seq["topk"]["ids"], dtype=np.int64)
    ref_logp = np.asarray(seq["topk"]["logp"], dtype=np.float64)
    last = None
    for j in range(n):
        d = runtime.start(prompt) if j == 0 else runtime.step(tokens[j - 1])
        d = np.asarray(d, dtype=np.float32).reshape(-1)
        max_abs = max(max_abs, float(np.abs(d.astype(np.float64) - p_rows[j].astype(np.float64)).max()))
        top = int(d.argmax())
        same_top1 += int(top == int(p_rows[j].argmax()))
        if top == tokens[j]:
            agree += 1
        elif first is None:
            first = j
        logp = log_softmax(d, np)
        kl_sum += float(coarse_kl(ref_logp[j], logp[ref_ids[j]], np))
        last = top
    stops = None
    if seq["stopped_at_eos"]:
        stops = last in eos_ids
    return {"id": seq["id"], "prompt_tokens": len(prompt), "steps": n, "decode_max_abs": max_abs,
            "decode_top1": same_top1 / n, "token_agreement": agree / n, "first_divergence": first,
            "mean_kl": kl_sum / n, "stopped_at_eos": bool(seq["stopped_at_eos"]), "stops_like_original": stops,
            "crosses_window": seq.get("crosses_window")}


def compare(runtime, ref, np, log=None):
    """Every sequence of the reference through runtime: (summary, per-sequence list). The summary's
    rates are over all steps of all sequences, its first divergence the earliest step at which
    any sequence diverged (None: none did), stops_like_original None when no sequence of the
    reference stopped at EOS, crosses_window None when the model has no sliding window."""
    eos = set(int(e) for e in ref["eos_ids"])
    per = []
    for seq in ref["sequences"]:
        r = compare_sequence(runtime, seq, eos, np)
        per.append(r)
        if log is not None:
            print(f"decode {r['id']}: {r['steps']} steps, max |D-P| {r['decode_max_abs']:.3g}, "
                  f"top-1 D=P {r['decode_top1']:.3f}, agreement {r['token_agreement']:.3f}, "
                  f"first divergence {r['first_divergence']}, mean KL {r['mean_kl']:.4f}", file=log, flush=True)
    steps = sum(r["steps"] for r in per)
    firsts = [r["first_divergence"] for r in per if r["first_divergence"] is not None]
    stops = [r["stops_like_original"] for r in per if r["stops_like_original"] is not None]
    windows = [r["crosses_window"] for r in per if r["crosses_window"] is not None]
    summary = {
        "sequences": len(per), "steps": steps,
        "decode_max_abs": max(r["decode_max_abs"] for r in per),
        "decode_top1": sum(r["decode_top1"] * r["steps"] for r in per) / steps,
        "token_agreement": sum(r["token_agreement"] * r["steps"] for r in per) / steps,
        "first_divergence": min(firsts) if firsts else None,
        "mean_kl": sum(r["mean_kl"] * r["steps"] for r in per) / steps,
        "stops_like_original": all(stops) if stops else None,
        "crosses_window": any(windows) if windows else None,
    }
    return summary, per


class TorchRuntime:
    """A transformers causal LM as a runtime: prefill is one forward pass keeping the last rows'
    logits; start and step go through the model's own KV cache (past_key_values), the positions
    following from the cache's length, as generate() decodes."""

    def __init__(self, model, torch):
        self.model, self.torch, self.cache = model, torch, None

    def forward(self, ids, keep, **kw):
        """The model on ids, the logits of the last keep positions only where the model can skip
        the rest (logits_to_keep: a 262K-word vocabulary at every position of a long prompt is
        gigabytes)."""
        with self.torch.inference_mode():
            try:
                out = self.model(input_ids=self.torch.tensor([ids]), logits_to_keep=keep, **kw)
            except TypeError:
                out = self.model(input_ids=self.torch.tensor([ids]), **kw)
        return out, out.logits[0, -keep:].float().numpy()

    def prefill(self, ids, keep):
        return self.forward(ids, keep, use_cache=False)[1]

    def start(self, prompt_ids):
        out, logits = self.forward(prompt_ids, 1, use_cache=True)
        self.cache = out.past_key_values
        return logits[-1]

    def step(self, token):
        out, logits = self.forward([token], 1, past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        return logits[-1]

    def cache_name(self):
        return type(self.cache).__name__ if self.cache is not None else "none"
