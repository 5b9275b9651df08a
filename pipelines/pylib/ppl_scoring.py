"""llama.cpp's perplexity scheme: the one scorer every edgepipe helper that reports a perplexity uses.

The quality gate compares numbers from different backends (llama-perplexity on a GGUF,
transformers on a checkpoint, ONNX Runtime, the Core ML package's weights in PyTorch), so
they must all tokenize, chunk and score exactly alike. The scheme follows
tools/perplexity/perplexity.cpp (perplexity(), ppl_stride 0):

  * the whole text is tokenized once, without parsing special-token text, with a BOS token
    in front only if the tokenizer adds one (llama.cpp: add_bos of the vocab);
  * it is cut into floor(tokens / ctx) chunks of ctx tokens (max_chunks caps that), the
    remainder dropped;
  * each chunk is evaluated on its own from an empty cache; if add_bos, its first token is
    replaced by BOS for the forward pass;
  * only the second half is scored: the logits at positions ctx/2 .. ctx-2 predict the
    tokens at ctx/2+1 .. ctx-1, i.e. ctx-1-ctx/2 tokens per chunk;
  * ppl = exp(mean negative log-likelihood over all scored tokens).

Only numpy is needed here; callers hand in logits as numpy arrays (a torch tensor's
.double().numpy()).
"""

import math
import sys


class EvalError(ValueError):
    """The text or the settings cannot be scored (too short a text, an odd context)."""


def tokenize(tokenizer, text, add_bos=None):
    """Returns (tokens, add_bos, bos) as llama-perplexity tokenizes the evaluation text.

    add_bos None: BOS first exactly when the tokenizer adds it itself."""
    bos = tokenizer.bos_token_id
    if add_bos is None:
        probe = tokenizer("a").input_ids
        add_bos = bos is not None and len(probe) > 1 and probe[0] == bos
    elif add_bos and bos is None:
        raise EvalError("BOS asked for, but the tokenizer has no BOS token")
    # llama.cpp tokenizes with parse_special=false: "<|im_end|>" in the text is plain text.
    tokens = list(tokenizer(text, add_special_tokens=False, split_special_tokens=True).input_ids)
    if add_bos:
        tokens = [bos] + tokens
    return tokens, add_bos, bos


def chunk_count(n_tokens, n_ctx, max_chunks=-1):
    """How many chunks of n_ctx tokens are scored."""
    if n_ctx < 4 or n_ctx % 2:
        raise EvalError(f"the context must be an even number of at least 4, not {n_ctx}")
    if n_tokens < 2 * n_ctx:
        raise EvalError(f"need at least {2 * n_ctx} tokens for a context of {n_ctx}, the text has {n_tokens}")
    n = n_tokens // n_ctx
    if max_chunks is not None and max_chunks > 0:
        n = min(n, max_chunks)
    return n


def chunk(tokens, i, n_ctx, add_bos, bos):
    """Chunk i: (the tokens scored against, the tokens fed to the model)."""
    tokens_i = list(tokens[i * n_ctx:(i + 1) * n_ctx])
    inputs = list(tokens_i)
    if add_bos:
        inputs[0] = bos
    return tokens_i, inputs


def chunk_logp(logits, n_ctx):
    """Log-probabilities of a chunk's scored half: [n_ctx - 1 - n_ctx/2, vocab], float64.

    logits: [n_ctx or more, vocab], a numpy array or anything numpy reads (a CPU torch
    tensor); rows past n_ctx (padding) are ignored; logits[j] predicts tokens_i[j + 1]. Only
    the scored half is converted to float64, which matters for a 262K-word vocabulary."""
    import numpy as np

    first = n_ctx // 2
    scored = np.asarray(logits[first:n_ctx - 1], dtype=np.float64)
    scored = scored - scored.max(axis=-1, keepdims=True)
    return scored - np.log(np.exp(scored).sum(axis=-1, keepdims=True))


def chunk_nll(logits, tokens_i, n_ctx):
    """Negative log-likelihood of a chunk's scored half and how many tokens it covers."""
    import numpy as np

    logp = chunk_logp(logits, n_ctx)
    targets = np.asarray(tokens_i[n_ctx // 2 + 1:n_ctx])
    return -float(logp[np.arange(len(targets)), targets].sum()), len(targets)


# The files a scorer leaves in a quality step's output (scores_dir), read by edgepipe and by
# the steps that compare another model with this one:
#   scores.nll   float64 little-endian, the negative log-likelihood of every scored token, in
#                scoring order: the delta's paired bootstrap interval (internal/pplstat);
#   scores.topk  (a baseline's only) the TOPK most likely tokens at every scored position and
#                their log-probabilities: npz with ids int32 [n, TOPK], logp float32 [n, TOPK].
NLL_FILE = "scores.nll"
TOPK_FILE = "scores.topk"
TOPK = 32


class Comparison:
    """A model's next-token distributions against a baseline's top-TOPK, position by position.

    KL(P_base || Q) is taken over the baseline's TOPK tokens and the rest of the vocabulary as
    one bucket: the KL divergence of the two distributions coarsened that way, a lower bound
    of the full one (llama.cpp's GGUF figure is the full one). Top-1 agreement is exact: the
    baseline's most likely token is its first."""

    def __init__(self, path):
        import numpy as np

        with np.load(path) as z:
            self.ids, self.logp = z["ids"], z["logp"].astype(np.float64)
        self.pos, self.kl, self.same = 0, 0.0, 0

    def add(self, logp):
        import numpy as np

        n = logp.shape[0]
        if self.pos + n > len(self.ids):
            raise EvalError("this model scored more positions than the baseline did: they do not compare")
        ids, p_log = self.ids[self.pos:self.pos + n], self.logp[self.pos:self.pos + n]
        rows = np.arange(n)[:, None]
        q_log = logp[rows, ids]
        p = np.exp(p_log)
        q = np.exp(q_log)
        p_rest = np.clip(1.0 - p.sum(axis=1), 1e-12, 1.0)
        q_rest = np.clip(1.0 - q.sum(axis=1), 1e-12, 1.0)
        kl = (p * (p_log - q_log)).sum(axis=1) + p_rest * (np.log(p_rest) - np.log(q_rest))
        self.kl += float(np.maximum(kl, 0.0).sum())
        self.same += int((logp.argmax(axis=1) == ids[:, 0]).sum())
        self.pos += n

    def result(self):
        if self.pos != len(self.ids):
            raise EvalError(f"this model scored {self.pos} positions, the baseline {len(self.ids)}: they do not compare")
        return self.kl / self.pos, self.same / self.pos


class Scorer:
    """Accumulates chunks; ppl() is the perplexity over every token scored so far.

    It keeps every scored token's negative log-likelihood (save() writes scores.nll), with
    keep_topk the baseline's top tokens (scores.topk), and with compare (a baseline's
    scores.topk) the KL divergence and top-1 agreement against it."""

    def __init__(self, n_ctx, log=sys.stderr, label="", keep_topk=False, compare=None):
        self.n_ctx, self.nll, self.count, self.chunks = n_ctx, 0.0, 0, 0
        self.log, self.label = log, label
        self.token_nll, self.keep_topk, self.topk_ids, self.topk_logp = [], keep_topk, [], []
        self.compare = Comparison(compare) if compare else None

    def add(self, logits, tokens_i, total=None):
        import numpy as np

        logp = chunk_logp(logits, self.n_ctx)
        targets = np.asarray(tokens_i[self.n_ctx // 2 + 1:self.n_ctx])
        nll = -logp[np.arange(len(targets)), targets]
        self.token_nll.extend(nll.tolist())
        self.nll += float(nll.sum())
        self.count += len(targets)
        self.chunks += 1
        if self.keep_topk:
            # argpartition finds the top TOPK in linear time; only they are sorted (a full
            # argsort of a 262K-word vocabulary at every position costs seconds a chunk).
            part = np.argpartition(logp, -TOPK, axis=1)[:, -TOPK:]
            vals = np.take_along_axis(logp, part, axis=1)
            order = np.argsort(-vals, axis=1, kind="stable")
            self.topk_ids.append(np.take_along_axis(part, order, axis=1).astype(np.int32))
            self.topk_logp.append(np.take_along_axis(vals, order, axis=1).astype(np.float32))
        if self.compare is not None:
            self.compare.add(logp)
        if self.log is not None:
            of = f"/{total}" if total else ""
            print(f"{self.label}[{self.chunks}{of}] ppl so far {self.ppl():.4f}", file=self.log, flush=True)

    def ppl(self):
        return math.exp(self.nll / self.count) if self.count else float("nan")

    def agreement(self):
        """(KL divergence, top-1 agreement) against the baseline, or (None, None)."""
        return self.compare.result() if self.compare is not None else (None, None)

    def save(self, scores_dir):
        """Writes scores.nll (and scores.topk for a baseline) into scores_dir."""
        import os

        import numpy as np

        if not scores_dir:
            return
        np.asarray(self.token_nll, dtype="<f8").tofile(os.path.join(scores_dir, NLL_FILE))
        if self.keep_topk:
            with open(os.path.join(scores_dir, TOPK_FILE), "wb") as f:
                np.savez(f, ids=np.concatenate(self.topk_ids), logp=np.concatenate(self.topk_logp))


def add_score_args(ap):
    """The arguments every scoring helper takes for the per-token files."""
    ap.add_argument("--scores-out", help="write scores.nll (and, with --keep-topk, scores.topk) into this folder")
    ap.add_argument("--keep-topk", action="store_true", help="also keep the top tokens at every position (a baseline)")
    ap.add_argument("--baseline-scores", help="a baseline's scores folder: report KL divergence and top-1 agreement against it")


def scorer(args, n_ctx, log=sys.stderr, label=""):
    """A Scorer set up from add_score_args' arguments."""
    compare = None
    if getattr(args, "baseline_scores", None):
        import os

        compare = os.path.join(args.baseline_scores, TOPK_FILE)
    return Scorer(n_ctx, log=log, label=label, keep_topk=getattr(args, "keep_topk", False), compare=compare)


def score(forward, tokens, n_ctx, n_chunk, add_bos, bos, log=sys.stderr, label="", scorer_=None):
    """Scores n_chunk chunks with forward(inputs) -> logits [n_ctx, vocab] (numpy).

    Returns (ppl, tokens scored); scorer_ (a Scorer) keeps what it measured beyond that."""
    s = scorer_ or Scorer(n_ctx, log=log, label=label)
    for i in range(n_chunk):
        tokens_i, inputs = chunk(tokens, i, n_ctx, add_bos, bos)
        s.add(forward(inputs), tokens_i, total=n_chunk)
    return s.ppl(), s.count


def torch_forward(model, torch):
    """forward() for a transformers causal LM: one chunk from an empty cache."""

    def forward(inputs):
        with torch.inference_mode():
            return model(torch.tensor([inputs])).logits[0].float()

    return forward
