"""Score an OpenVINO IR causal LM with the OpenVINO runtime on this CPU, and compare its logits with PyTorch's.

    python openvino_validate.py --ir DIR --hf DIR --text eval.txt [--ctx 512] [--chunks N]
        [--precision f32|bf16|f16] [--threads N] [--scores-out DIR] [--baseline-scores DIR]

Tokens, chunks and scoring are ppl_scoring.py's (llama.cpp's llama-perplexity scheme, each
chunk run from an empty KV cache), with the unconverted checkpoint's tokenizer, so the
perplexity compares with hf_perplexity.py's on the same tokens.

The IR runs on OpenVINO's CPU plugin through its own API (openvino.Core, no optimum wrapper):
the stateful model's state (its KV cache) is reset before each chunk and the chunk is fed
whole (input_ids, attention_mask, position_ids, beam_idx). INFERENCE_PRECISION_HINT is f32
by default, so what moves the perplexity is the weight compression, not the CPU's bf16
arithmetic; the precision the compiled model reports is printed. An Intel NPU computes in
FP16: this is the IR's quality on this CPU, not a measurement on an NPU.

Logits check: the first chunk also runs through the PyTorch model (fp32, transformers) and
the two are compared position by position (max and mean |difference|, same top-1 token).

Per-token scores (ppl_scoring.add_score_args): --scores-out keeps every scored token's
negative log-likelihood (the delta's interval against the baseline's); --baseline-scores, the
hf_perplexity.py baseline's folder, adds the KL divergence and top-1 agreement against its top
tokens over every scored position (kl_divergence, baseline_top1_agreement; null without it).
top1_agreement is the logits check's, on the first chunk against PyTorch.

Its report is report() below (reports/openvino_validate.json); the logits check's fields are
null with --no-logits-check.
"""

import argparse
import os
import sys

import edgepipe_env
import edgepipe_report
import edgepipe_tokenizer
import logits_check
import ppl_scoring


def feeds(model, ids, np):
    n = len(ids)
    out = {}
    for port in model.inputs:
        name = port.get_any_name()
        if name == "input_ids":
            out[name] = np.array([ids], dtype=np.int64)
        elif name == "attention_mask":
            out[name] = np.ones((1, n), dtype=np.int64)
        elif name == "position_ids":
            out[name] = np.arange(n, dtype=np.int64)[None, :]
        elif name == "beam_idx":
            out[name] = np.zeros((1,), dtype=np.int32)
        else:
            raise SystemExit(f"openvino: the IR has an input {name!r} this script does not know how to fill")
    return out


def precision_name(t):
    """OpenVINO element types print as <Type: 'float32'>; their names are f32, bf16, f16."""
    return t.get_type_name() if hasattr(t, "get_type_name") else str(t)


def compile_ir(folder, precision, threads):
    """Returns (compiled model, infer request, the precision it reports, OpenVINO's version)."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(os.path.join(folder, "openvino_model.xml"))
    names = {p.get_any_name() for p in model.inputs}
    if "input_ids" not in names or "logits" not in {p.get_any_name() for p in model.outputs}:
        raise SystemExit(f"openvino: the IR takes {sorted(names)} and has no input_ids or no logits output")
    config = {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = core.compile_model(model, "CPU", config)
    return compiled, compiled.create_infer_request(), precision_name(compiled.get_property("INFERENCE_PRECISION_HINT")), ov.get_version()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ir", required=True, help="folder with openvino_model.xml/.bin")
    ap.add_argument("--hf", required=True, help="the Hugging Face checkpoint it was converted from")
    ap.add_argument("--text", required=True, help="UTF-8 text to score")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--no-logits-check", action="store_true")
    ppl_scoring.add_score_args(ap)
    args = ap.parse_args()
    edgepipe_env.offline()

    import numpy as np
    import torch

    threads = edgepipe_env.threads(args.threads)
    torch.set_num_threads(threads)
    tokenizer = edgepipe_tokenizer.load(args.hf)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        n_chunk = ppl_scoring.chunk_count(len(tokens), args.ctx, args.chunks)
    except ppl_scoring.EvalError as e:
        print(f"openvino_validate: {e}", file=sys.stderr)
        return 2
    n_ctx = args.ctx

    compiled, request, precision, version = compile_ir(args.ir, args.precision, threads)
    print(f"openvino_validate: OpenVINO {version}, CPU, inference precision {precision}, {threads} threads",
          file=sys.stderr, flush=True)
    scorer = ppl_scoring.scorer(args, n_ctx)
    check = {}
    try:
        for i in range(n_chunk):
            chunk, inputs = ppl_scoring.chunk(tokens, i, n_ctx, add_bos, bos)
            request.reset_state()
            request.infer(feeds(compiled, inputs, np))
            logits = np.asarray(request.get_tensor("logits").data)[0].astype(np.float64)
            if i == 0 and not args.no_logits_check:
                check = logits_check.against_reference(args.hf, inputs, logits, torch, np)
            scorer.add(logits, chunk, total=n_chunk)
        kl, top1 = scorer.agreement()
    except ppl_scoring.EvalError as e:
        print(f"openvino_validate: {e}", file=sys.stderr)
        return 2
    scorer.save(args.scores_out)

    edgepipe_report.emit(report(scorer.ppl(), n_chunk, n_ctx, scorer.count, len(tokens), "CPU", precision, version, check,
                                kl, top1))
    return 0


def report(ppl, chunks, ctx, scored, tokens, device, precision, version, check, kl, top1):
    """check: logits_check's fields, or {} with --no-logits-check (null in the report); kl, top1:
    against the baseline's scores (None without --baseline-scores)."""
    return {"ppl": ppl, "chunks": chunks, "ctx": ctx, "scored": scored, "tokens": tokens, "device": device,
            "inference_precision": precision, "openvino": version,
            "max_abs_logit_diff": check.get("max_abs_logit_diff"), "mean_abs_logit_diff": check.get("mean_abs_logit_diff"),
            "top1_agreement": check.get("top1_agreement"), "logit_positions": check.get("logit_positions"),
            "kl_divergence": kl, "baseline_top1_agreement": top1}


if __name__ == "__main__":
    sys.exit(main())
