"""Tests of ppl_scoring.py, the one perplexity scorer of every helper (numpy only).

    EDGEPIPE_REAL=1 go test ./pipelines -run TestRealPythonModules/test_ppl_scoring

TestScheme checks the scheme against a literal transcription of llama.cpp's
tools/perplexity/perplexity.cpp loop on synthetic logits. TestPinnedToLlamaPerplexity (run
when EDGEPIPE_PPL_MODEL names a Hugging Face checkpoint) scores it chunk by chunk and compares
every running perplexity with the ones llama-perplexity printed for the same model's F16 GGUF
on the same text (EDGEPIPE_PPL_LOG, EDGEPIPE_PPL_TEXT).
"""

import math
import os
import re
import unittest

import numpy as np

import ppl_scoring


class FakeTokenizer:
    """Characters as tokens; BOS 1 added in front, like a Llama tokenizer."""

    bos_token_id = 1

    def __init__(self, adds_bos=True):
        self.adds_bos = adds_bos

    def __call__(self, text, add_special_tokens=True, split_special_tokens=False):
        ids = [2 + (ord(c) % 50) for c in text]
        if add_special_tokens and self.adds_bos:
            ids = [self.bos_token_id] + ids

        class Out:
            input_ids = ids

        return Out()


def reference_ppl(logits_of, tokens, n_ctx, n_chunk, add_bos, bos):
    """perplexity.cpp's perplexity() with ppl_stride 0, transcribed: every chunk from an
    empty cache, BOS first when the vocabulary adds it, positions first .. n_ctx-2 scored
    (first = n_ctx/2), log-softmax in double precision, one token at a time."""
    first = n_ctx // 2
    nll, count = 0.0, 0
    for i in range(n_chunk):
        start = i * n_ctx
        batch = list(tokens[start:start + n_ctx])
        if add_bos:
            batch[0] = bos
        logits = logits_of(batch)
        for j in range(first, n_ctx - 1):
            row = [float(x) for x in logits[j]]
            m = max(row)
            lse = m + math.log(sum(math.exp(x - m) for x in row))
            nll += lse - row[tokens[start + j + 1]]
            count += 1
    return math.exp(nll / count), count


def fake_model(vocab, seed=0):
    """Logits that depend on the whole prefix, so chunking and BOS replacement matter."""
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(vocab, vocab))

    def logits_of(inputs):
        out, acc = [], np.zeros(vocab)
        for t in inputs:
            acc = 0.7 * acc + table[t]
            out.append(acc.copy())
        return np.array(out)

    return logits_of


class TestScheme(unittest.TestCase):
    def test_matches_perplexity_cpp(self):
        text = "the quick brown fox jumps over the lazy dog; " * 4
        for adds_bos in (True, False):
            tok = FakeTokenizer(adds_bos)
            tokens, add_bos, bos = ppl_scoring.tokenize(tok, text)
            self.assertEqual(add_bos, adds_bos)
            self.assertEqual(tokens[0] == 1, adds_bos)
            n_ctx = 16
            n_chunk = ppl_scoring.chunk_count(len(tokens), n_ctx)
            self.assertEqual(n_chunk, len(tokens) // n_ctx)
            model = fake_model(52)
            got, count = ppl_scoring.score(model, tokens, n_ctx, n_chunk, add_bos, bos, log=None)
            want, want_count = reference_ppl(model, tokens, n_ctx, n_chunk, add_bos, bos)
            self.assertEqual(count, want_count)
            self.assertEqual(count, n_chunk * (n_ctx - 1 - n_ctx // 2))
            self.assertAlmostEqual(got, want, places=9)

    def test_only_the_second_half_counts(self):
        n_ctx = 8
        tokens = list(range(2, 2 + 2 * n_ctx))
        base = np.zeros((n_ctx, 20))
        changed = base.copy()
        changed[: n_ctx // 2] = 100.0  # logits of the first half: not scored
        changed[n_ctx - 1] = 100.0     # the last position predicts nothing in the chunk
        a = ppl_scoring.score(lambda _: base, tokens, n_ctx, 2, False, None, log=None)
        b = ppl_scoring.score(lambda _: changed, tokens, n_ctx, 2, False, None, log=None)
        self.assertEqual(a, b)

    def test_bos_replaces_the_first_input(self):
        seen = []
        tokens = list(range(10, 26))
        ppl_scoring.score(lambda inputs: (seen.append(inputs), np.zeros((8, 40)))[1], tokens, 8, 2, True, 1, log=None)
        self.assertEqual([s[0] for s in seen], [1, 1])
        self.assertEqual(seen[1][1:], tokens[9:16])

    def test_chunk_count(self):
        self.assertEqual(ppl_scoring.chunk_count(100, 16), 6)
        self.assertEqual(ppl_scoring.chunk_count(100, 16, max_chunks=2), 2)
        for n, ctx in ((31, 16), (100, 15), (100, 2)):
            with self.assertRaises(ppl_scoring.EvalError):
                ppl_scoring.chunk_count(n, ctx)

    def test_padding_rows_are_ignored(self):
        tokens = list(range(2, 34))
        logits = fake_model(40, seed=3)
        padded = lambda inputs: np.vstack([logits(inputs), np.full((5, 40), 1e6)])
        self.assertEqual(ppl_scoring.score(logits, tokens, 16, 2, False, None, log=None),
                         ppl_scoring.score(padded, tokens, 16, 2, False, None, log=None))


class TestPerTokenFiles(unittest.TestCase):
    """scores.nll pairs token for token; the comparison with a baseline's top tokens."""

    def setUp(self):
        import tempfile
        self.dir = tempfile.mkdtemp()

    def test_nll_file_sums_to_the_perplexity(self):
        tokens = list(range(2, 50))
        model = fake_model(60, seed=5)
        s = ppl_scoring.Scorer(16, log=None, keep_topk=True)
        ppl, count = ppl_scoring.score(model, tokens, 16, 3, False, None, scorer_=s)
        s.save(self.dir)
        nll = np.fromfile(os.path.join(self.dir, ppl_scoring.NLL_FILE), dtype="<f8")
        self.assertEqual(len(nll), count)
        self.assertAlmostEqual(math.exp(nll.mean()), ppl, places=9)
        with np.load(os.path.join(self.dir, ppl_scoring.TOPK_FILE)) as z:
            self.assertEqual(z["ids"].shape, (count, ppl_scoring.TOPK))
            self.assertTrue((np.diff(z["logp"], axis=1) <= 0).all(), "top tokens in order, most likely first")
            ids, logp = z["ids"], z["logp"]
        # The same tokens a full sort picks: every kept one at least as likely as any other.
        for i, inputs in enumerate([ppl_scoring.chunk(tokens, c, 16, False, None)[1] for c in range(3)]):
            lp = ppl_scoring.chunk_logp(model(inputs), 16)
            for r in range(lp.shape[0]):
                row = i * lp.shape[0] + r
                want = np.sort(lp[r])[::-1][:ppl_scoring.TOPK]
                np.testing.assert_allclose(logp[row], want, rtol=1e-6)
                self.assertEqual(lp[r][ids[row][0]], lp[r].max())

    def test_the_same_model_agrees_fully_and_another_does_not(self):
        tokens = list(range(2, 50))
        base = fake_model(60, seed=5)
        b = ppl_scoring.Scorer(16, log=None, keep_topk=True)
        ppl_scoring.score(base, tokens, 16, 3, False, None, scorer_=b)
        b.save(self.dir)
        topk = os.path.join(self.dir, ppl_scoring.TOPK_FILE)
        same = ppl_scoring.Scorer(16, log=None, compare=topk)
        ppl_scoring.score(base, tokens, 16, 3, False, None, scorer_=same)
        kl, top1 = same.agreement()
        self.assertAlmostEqual(kl, 0.0, places=6)
        self.assertEqual(top1, 1.0)
        noisy = lambda inputs: base(inputs) + np.random.default_rng(9).normal(0, 2.0, (16, 60))
        other = ppl_scoring.Scorer(16, log=None, compare=topk)
        ppl_scoring.score(noisy, tokens, 16, 3, False, None, scorer_=other)
        kl, top1 = other.agreement()
        self.assertGreater(kl, 0.05)
        self.assertLess(top1, 1.0)
        short = ppl_scoring.Scorer(16, log=None, compare=topk)
        ppl_scoring.score(base, tokens, 16, 2, False, None, scorer_=short)
        with self.assertRaises(ppl_scoring.EvalError):
            short.agreement()


def llama_running_ppl(log):
    """The running perplexities llama-perplexity prints: [1]26.4644,[2]24.4887,..."""
    return [float(v) for _, v in re.findall(r"\[(\d+)\]([0-9.]+),", log)]


@unittest.skipUnless(os.environ.get("EDGEPIPE_PPL_MODEL"), "set EDGEPIPE_PPL_MODEL, EDGEPIPE_PPL_TEXT and EDGEPIPE_PPL_LOG")
class TestPinnedToLlamaPerplexity(unittest.TestCase):
    def test_running_perplexity_per_chunk(self):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model_dir = os.environ["EDGEPIPE_PPL_MODEL"]
        with open(os.environ["EDGEPIPE_PPL_TEXT"], encoding="utf-8") as f:
            text = f.read()
        with open(os.environ["EDGEPIPE_PPL_LOG"], encoding="utf-8") as f:
            want = llama_running_ppl(f.read())
        n_ctx = int(os.environ.get("EDGEPIPE_PPL_CTX", "512"))
        n = min(len(want), int(os.environ.get("EDGEPIPE_PPL_CHUNKS", "4")))
        self.assertGreater(n, 0, "no running perplexities in the log")
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model.eval()
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        forward = ppl_scoring.torch_forward(model, torch)
        scorer = ppl_scoring.Scorer(n_ctx)
        for i in range(n):
            tokens_i, inputs = ppl_scoring.chunk(tokens, i, n_ctx, add_bos, bos)
            scorer.add(forward(inputs), tokens_i, total=n)
            # The GGUF is F16, the checkpoint F32: agreement to 0.1%, chunk by chunk.
            rel = abs(scorer.ppl() - want[i]) / want[i]
            self.assertLess(rel, 1e-3, f"chunk {i + 1}: {scorer.ppl():.4f} here, {want[i]:.4f} from llama-perplexity")


if __name__ == "__main__":
    unittest.main()
