"""Compile a QNN QDQ model into a Hexagon context binary with Qualcomm's QNN HTP backend, and gate it
on the HTP simulator.

    python qnn_htp.py --qdq model.onnx --hf DIR --text eval.txt --out DIR --ctx N [--chunks K]
                      --soc-model 57 --htp-arch 75 [--compile-only]
                      [--scores-out DIR] [--baseline-scores DIR]

The QNN HTP backend is the one the registry package onnxruntime-qnn ships (libQnnHtp.so,
libHtpPrepare.so; on x86-64 Linux its graphs run on Qualcomm's HTP simulator), loaded into
ONNX Runtime through the plugin execution-provider API
(onnxruntime.register_execution_provider_library). Every session has CPU fallback disabled
(session.disable_cpu_ep_fallback=1): a node the backend does not take is an error that names
it, never a node silently run on the CPU.

1. compile: a session on the QDQ model with ep.context_enable=1, ep.context_embed_mode=0 and
   the target SoC's soc_model / htp_arch provider options writes OUT/model_ctx.onnx (the
   EPContext wrapper ONNX Runtime loads) and its context binary OUT/model_ctx_qnn.bin;
2. gate (unless --compile-only): the EPContext model is loaded the way a phone loads it
   (ONNX Runtime + QNN EP + the context binary) and run on the HTP simulator: chunk 1's logits
   against the unconverted PyTorch model (fp32, transformers), then perplexity over --chunks
   chunks, scored as every other scorer does (ppl_scoring.py). Seconds per chunk are
   measured and printed. --scores-out keeps every scored token's negative log-likelihood
   (the delta's interval against the baseline's); --baseline-scores, the hf_perplexity.py
   baseline's folder, adds the KL divergence and top-1 agreement against its top tokens over
   every scored position (gate.kl_divergence, gate.baseline_top1_agreement; gate.top1_agreement
   is the logits check's, on the first chunk against PyTorch).

Its report is report() below (reports/qnn_htp.json): what was compiled, and the gate's
numbers under "gate" (null with --compile-only).
"""

import argparse
import os
import re
import sys
import time

import edgepipe_env
import edgepipe_report
import edgepipe_threads
import logits_check
import ppl_scoring

EP = "QNNExecutionProvider"


def qnn_session(ort, qnn, path, soc_model, htp_arch, context_out=None, verbose=False):
    """An ONNX Runtime session whose every node runs on QNN's HTP backend."""
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if context_out:
        so.add_session_config_entry("ep.context_enable", "1")
        so.add_session_config_entry("ep.context_file_path", context_out)
        so.add_session_config_entry("ep.context_embed_mode", "0")
    so.log_severity_level = 0 if verbose else 2
    devices = [d for d in ort.get_ep_devices() if d.ep_name == EP]
    if not devices:
        raise SystemExit(f"qnn_htp: onnxruntime-qnn registered no {EP} device")
    so.add_provider_for_devices(devices, {"backend_path": qnn.get_qnn_htp_path(), "soc_model": str(soc_model),
                                          "htp_arch": str(htp_arch)})
    return ort.InferenceSession(path, sess_options=so)


def with_captured_stderr(fn):
    """Runs fn() with file descriptor 2 (where ONNX Runtime and QNN log) copied to a file;
    returns (fn's result or the exception it raised, the text logged)."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            result = fn()
        except Exception as e:  # onnxruntime raises its own exception types
            result = e
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode("utf-8", "replace")
    sys.stderr.write(text)
    return result, text


def refused_lines(text):
    """What QNN's execution provider says about the nodes it refused, from a verbose log: its
    "Validation FAILED for N nodes in OrtNodeUnit (OP)" entries with the operator type, node name
    and reason lines under them, and backendValidateOpConfig failures."""
    out, keep = [], False
    for line in text.splitlines():
        if re.search(r"Validation FAILED|backendValidateOpConfig|failed for node", line):
            keep = True
            out.append(re.sub(r"^.*?\] ", "", line.strip()))
        elif keep and line[:1] in ("\t", " ") and line.strip():
            out.append("  " + line.strip())
        else:
            keep = False
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qdq", required=True, help="the QDQ ONNX model (qnn_qdq.py)")
    ap.add_argument("--hf", required=True, help="the Hugging Face checkpoint it was converted from")
    ap.add_argument("--text", help="UTF-8 text to score")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--ctx", type=int, required=True, help="the static sequence length of the graph")
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--soc-model", type=int, required=True, help="QNN SoC model id (QnnTypes.h QNN_SOC_MODEL_*)")
    ap.add_argument("--htp-arch", type=int, required=True, help="Hexagon HTP architecture (73, 75, 79, ...)")
    ap.add_argument("--compile-only", action="store_true")
    ppl_scoring.add_score_args(ap)
    args = ap.parse_args()

    edgepipe_env.offline()

    import numpy as np
    import onnxruntime as ort
    import onnxruntime_qnn as qnn

    ort.register_execution_provider_library(EP, qnn.get_library_path())
    edgepipe_threads.limit_onnxruntime(ort)
    versions = {"qnn_version": qnn.build_and_package_info.qnn_version, "onnxruntime_qnn": qnn.__version__,
                "onnxruntime": ort.__version__, "soc_model": args.soc_model, "htp_arch": args.htp_arch}
    print(f"QNN {versions['qnn_version']} (onnxruntime-qnn {qnn.__version__}, onnxruntime {ort.__version__}), "
          f"soc_model {args.soc_model}, htp_arch v{args.htp_arch}", file=sys.stderr, flush=True)

    os.makedirs(args.out, exist_ok=True)
    ctx_model = os.path.join(args.out, "model_ctx.onnx")
    t0 = time.monotonic()
    s, logged = with_captured_stderr(
        lambda: qnn_session(ort, qnn, args.qdq, args.soc_model, args.htp_arch, context_out=ctx_model))
    if isinstance(s, Exception):
        print(f"qnn_htp: the QNN HTP backend refused the graph (CPU fallback is disabled, so no node may run on "
              f"the CPU): {s}", file=sys.stderr)
        # QNN's execution provider names the nodes it refuses only in its verbose log: ask again.
        _, logged = with_captured_stderr(lambda: qnn_session(ort, qnn, args.qdq, args.soc_model, args.htp_arch,
                                                             verbose=True))
        lines = refused_lines(logged)
        for line in lines[:40]:
            print(f"qnn_htp: refused: {line}", file=sys.stderr)
        if not lines:
            print("qnn_htp: the verbose log names no refused node", file=sys.stderr)
        return 3
    compile_s = time.monotonic() - t0
    del s
    bins = sorted(f for f in os.listdir(args.out) if f.endswith(".bin"))
    if not os.path.isfile(ctx_model) or not bins:
        print(f"qnn_htp: the session compiled but wrote no EPContext model and context binary in {args.out}",
              file=sys.stderr)
        return 1
    print(f"compiled on the QNN HTP backend in {compile_s:.1f} s: {os.path.basename(ctx_model)} + {', '.join(bins)}",
          file=sys.stderr, flush=True)
    compiled = (os.path.basename(ctx_model), bins[0], round(compile_s, 2))
    if args.compile_only:
        edgepipe_report.emit(report(*compiled, versions))
        return 0
    if not args.text:
        print("qnn_htp: --text is needed unless --compile-only", file=sys.stderr)
        return 2

    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(edgepipe_threads.granted())

    tokenizer = AutoTokenizer.from_pretrained(args.hf)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        n_chunk = ppl_scoring.chunk_count(len(tokens), args.ctx, args.chunks)
    except ppl_scoring.EvalError as e:
        print(f"qnn_htp: {e}", file=sys.stderr)
        return 2

    # The published wrapper and binary, loaded as a device loads them.
    t0 = time.monotonic()
    session = qnn_session(ort, qnn, ctx_model, args.soc_model, args.htp_arch)
    load_s = time.monotonic() - t0
    names = [i.name for i in session.get_inputs()]
    n = args.ctx

    def feeds(ids):
        f = {"input_ids": np.array([ids], dtype=np.int64), "attention_mask": np.ones((1, n), dtype=np.int64),
             "position_ids": np.arange(n, dtype=np.int64)[None, :]}
        return {k: v for k, v in f.items() if k in names}

    scorer = ppl_scoring.scorer(args, n)
    check, times = {}, []
    try:
        for i in range(n_chunk):
            chunk, inputs = ppl_scoring.chunk(tokens, i, n, add_bos, bos)
            t0 = time.monotonic()
            logits = session.run(None, feeds(inputs))[0][0].astype(np.float64)
            times.append(time.monotonic() - t0)
            print(f"chunk {i + 1}/{n_chunk} on the HTP simulator: {times[-1]:.1f} s", file=sys.stderr, flush=True)
            if i == 0:
                check = logits_check.against_reference(args.hf, inputs, logits, torch, np)
            scorer.add(logits, chunk, total=n_chunk)
        kl, top1 = scorer.agreement()
    except ppl_scoring.EvalError as e:
        print(f"qnn_htp: {e}", file=sys.stderr)
        return 2
    scorer.save(args.scores_out)

    edgepipe_report.emit(report(*compiled, versions, gate=(scorer.ppl(), n_chunk, n, scorer.count, len(tokens), round(load_s, 2),
                                                          round(sum(times) / len(times), 2), session.get_providers(), check,
                                                          kl, top1)))
    return 0


def report(model, context_binary, compile_s, versions, gate=None):
    """versions: main's QNN and ONNX Runtime versions and SoC; gate: None (--compile-only) or the
    gate's (ppl, chunks, ctx, scored, tokens, load_s, seconds_per_chunk, providers, logits check, KL divergence and
    top-1 agreement against the baseline's scores: None without --baseline-scores)."""
    if gate is None:
        return {"model": model, "context_binary": context_binary, "compile_s": compile_s,
                "qnn_version": versions["qnn_version"], "onnxruntime_qnn": versions["onnxruntime_qnn"],
                "onnxruntime": versions["onnxruntime"], "soc_model": versions["soc_model"], "htp_arch": versions["htp_arch"],
                "gate": None}
    ppl, chunks, ctx, scored, tokens, load_s, seconds_per_chunk, providers, check, kl, top1 = gate
    return {"model": model, "context_binary": context_binary, "compile_s": compile_s,
            "qnn_version": versions["qnn_version"], "onnxruntime_qnn": versions["onnxruntime_qnn"],
            "onnxruntime": versions["onnxruntime"], "soc_model": versions["soc_model"], "htp_arch": versions["htp_arch"],
            "gate": {"ppl": ppl, "chunks": chunks, "ctx": ctx, "scored": scored, "tokens": tokens, "load_s": load_s,
                     "seconds_per_chunk": seconds_per_chunk,
                     "ran_on": "QNN HTP backend (HTP simulator on x86-64), CPU fallback disabled", "providers": providers,
                     "max_abs_logit_diff": check.get("max_abs_logit_diff"),
                     "mean_abs_logit_diff": check.get("mean_abs_logit_diff"),
                     "top1_agreement": check.get("top1_agreement"), "logit_positions": check.get("logit_positions"),
                     "kl_divergence": kl, "baseline_top1_agreement": top1}}


if __name__ == "__main__":
    sys.exit(main())
