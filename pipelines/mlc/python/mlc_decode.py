"""Decode-path consistency and generation agreement of an MLC model folder's weights.

    python mlc_decode.py --mlc DIR --model DIR --reference reference.json [--threads N]

The published shards are read back and dequantized into the unconverted model exactly as the
gate does (mlc_gate.load_model: the reference implementation of MLC's kernels in PyTorch,
float32), which then runs with transformers' own KV cache. decode_check.py compares, for every
sequence of generate_reference.py's reference.json, the one-pass prefill's logits with the
token-by-token decode's, and the decode with the unconverted model's greedy tokens and top-32
log-probabilities. WebLLM's own paged KV cache and its float16 kernels are not exercised here.
Its report is report() below (reports/mlc_decode.json).
"""

import argparse
import sys

import decode_check
import edgepipe_env
import edgepipe_report
import mlc_gate


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlc", required=True, help="the MLC model folder (tensor-cache.json and shards)")
    ap.add_argument("--model", required=True, help="the unconverted Hugging Face checkpoint")
    ap.add_argument("--reference", required=True, help="generate_reference.py's reference.json")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    edgepipe_env.offline()

    import numpy as np
    import torch
    import transformers

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    ref = decode_check.load_reference(args.reference)
    model, _, _ = mlc_gate.load_model(args.mlc, args.model, [], None, torch)
    runtime = decode_check.TorchRuntime(model, torch)
    summary, per = decode_check.compare(runtime, ref, np, log=sys.stderr)
    name = (f"the MLC shards dequantized in PyTorch {torch.__version__} (float32, mlc_gate's reference implementation), "
            f"transformers {transformers.__version__}'s {runtime.cache_name()} KV cache")
    edgepipe_report.emit(report(name, summary, per, ref["max_new_tokens"]))
    return 0


def report(runtime, s, per_sequence, max_new_tokens):
    """s is decode_check.compare's summary, per_sequence its list."""
    return {"runtime": runtime, "sequences": s["sequences"], "steps": s["steps"], "max_new_tokens": max_new_tokens,
            "decode_max_abs": s["decode_max_abs"], "decode_top1": s["decode_top1"],
            "token_agreement": s["token_agreement"], "first_divergence": s["first_divergence"],
            "mean_kl": s["mean_kl"], "stops_like_original": s["stops_like_original"],
            "crosses_window": s["crosses_window"], "not_applicable": None, "per_sequence": per_sequence}


if __name__ == "__main__":
    sys.exit(main())
