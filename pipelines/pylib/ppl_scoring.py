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


def chunk_nll(logits, tokens_i, n_ctx):
    """Negative log-likelihood of a chunk's scored half and how many tokens it covers.

    logits: [n_ctx or more, vocab], a numpy array or anything numpy reads (a CPU torch
    tensor); rows past n_ctx (padding) are ignored; logits[j] predicts tokens_i[j + 1]. Only
    the scored half is converted to float64, which matters for a 262K-word vocabulary."""
    import numpy as np

    first = n_ctx // 2
    scored = np.asarray(logits[first:n_ctx - 1], dtype=np.float64)
    scored = scored - scored.max(axis=-1, keepdims=True)
    logp = scored - np.log(np.exp(scored).sum(axis=-1, keepdims=True))
    targets = np.asarray(tokens_i[first + 1:n_ctx])
    return -float(logp[np.arange(len(targets)), targets].sum()), len(targets)


class Scorer:
    """Accumulates chunks; ppl() is the perplexity over every token scored so far."""

    def __init__(self, n_ctx, log=sys.stderr, label=""):
        self.n_ctx, self.nll, self.count, self.chunks = n_ctx, 0.0, 0, 0
        self.log, self.label = log, label

    def add(self, logits, tokens_i, total=None):
        nll, n = chunk_nll(logits, tokens_i, self.n_ctx)
        self.nll += nll
        self.count += n
        self.chunks += 1
        if self.log is not None:
            of = f"/{total}" if total else ""
            print(f"{self.label}[{self.chunks}{of}] ppl so far {self.ppl():.4f}", file=self.log, flush=True)

    def ppl(self):
        return math.exp(self.nll / self.count) if self.count else float("nan")


def score(forward, tokens, n_ctx, n_chunk, add_bos, bos, log=sys.stderr, label=""):
    """Scores n_chunk chunks with forward(inputs) -> logits [n_ctx, vocab] (numpy).

    Returns (ppl, tokens scored)."""
    s = Scorer(n_ctx, log=log, label=label)
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
