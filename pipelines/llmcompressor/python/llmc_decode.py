"""Decode-path consistency and generation agreement of a compressed-tensors checkpoint.

    python llmc_decode.py --model DIR --reference reference.json [--threads N]

The checkpoint llmc_quantize.py wrote is loaded through transformers and compressed-tensors
(the INT4 weights unpacked to float32, as llmc_perplexity.py loads it) and run with
transformers' own KV cache, the closest host equivalent of vLLM's paged cache. decode_check.py
compares, for every sequence of generate_reference.py's reference.json, the one-pass prefill's
logits with the token-by-token decode's, and the decode with the unconverted model's greedy
tokens and top-32 log-probabilities. Its report is report() below (reports/llmc_decode.json).
"""

import argparse
import sys

import decode_check
import edgepipe_env
import edgepipe_report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the compressed-tensors checkpoint")
    ap.add_argument("--reference", required=True, help="generate_reference.py's reference.json")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    edgepipe_env.offline()

    import compressed_tensors
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    ref = decode_check.load_reference(args.reference)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    runtime = decode_check.TorchRuntime(model, torch)
    summary, per = decode_check.compare(runtime, ref, np, log=sys.stderr)
    name = (f"transformers {transformers.__version__} with compressed-tensors {compressed_tensors.__version__} "
            f"(INT4 unpacked to float32), its {runtime.cache_name()} KV cache")
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
