"""Time an OpenVINO IR causal LM on OpenVINO's CPU plugin: prompt and decode.

    python openvino_bench.py --ir DIR --prompt-tokens 128 --runs 60 [--threads N]

The same measurement as onnx_bench.py, on the stateful IR optimum-intel exports (the KV cache
lives in the model's state). Each prompt run resets the state and feeds --prompt-tokens tokens.
Each decode run feeds one token with --prompt-tokens tokens already in the cache: the state
after one prompt run is saved, and restored (untimed) before every decode run, so every run
times the same decode step at the same depth. Token ids are 1..N modulo the vocabulary.
INFERENCE_PRECISION_HINT is left to the plugin (what a user gets) and reported.

This is the host CPU's speed with OpenVINO, not an NPU's.

Every run is timed, warm-up runs included (the caller drops those); times are wall-clock
nanoseconds around InferRequest.infer with the inputs already built.

Its report is report() below (reports/openvino_bench.json).
"""

import argparse
import json
import os
import sys
import time

import edgepipe_env
import edgepipe_report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ir", required=True, help="folder with openvino_model.xml/.bin (or the .xml itself)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=60, help="prompt runs and decode runs, warm-up included")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    args = ap.parse_args()
    if args.prompt_tokens < 1 or args.runs < 1:
        print("openvino_bench: --prompt-tokens and --runs must be at least 1", file=sys.stderr)
        return 2

    import numpy as np
    import openvino as ov

    folder = args.ir if os.path.isdir(args.ir) else os.path.dirname(os.path.abspath(args.ir))
    threads = edgepipe_env.threads(args.threads)
    core = ov.Core()
    model = core.read_model(os.path.join(folder, "openvino_model.xml"))
    if not model.get_sinks():
        print("openvino_bench: the IR is not stateful: per-token decode needs the KV cache in its state "
              "(optimum-intel's default export)", file=sys.stderr)
        return 2
    names = {p.get_any_name() for p in model.inputs}
    unknown = names - {"input_ids", "attention_mask", "position_ids", "beam_idx"}
    if unknown or "input_ids" not in names:
        print(f"openvino_bench: the IR takes {sorted(names)}; this script fills input_ids, attention_mask, "
              "position_ids and beam_idx", file=sys.stderr)
        return 2
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads})
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    precision = precision.get_type_name() if hasattr(precision, "get_type_name") else str(precision)
    request = compiled.create_infer_request()

    vocab = 0
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            vocab = int(json.load(f).get("vocab_size") or 0)
    except (OSError, ValueError):
        pass
    n = args.prompt_tokens
    ids = [(i % (vocab - 1)) + 1 if vocab > 1 else i + 1 for i in range(n + 1)]

    def feeds(tokens, start):
        k = len(tokens)
        out = {"input_ids": np.array([tokens], dtype=np.int64)}
        if "attention_mask" in names:
            out["attention_mask"] = np.ones((1, start + k), dtype=np.int64)
        if "position_ids" in names:
            out["position_ids"] = np.arange(start, start + k, dtype=np.int64)[None, :]
        if "beam_idx" in names:
            out["beam_idx"] = np.zeros((1,), dtype=np.int32)
        return out

    prompt = feeds(ids[:n], 0)
    prompt_ns = []
    for _ in range(args.runs):
        request.reset_state()
        t0 = time.perf_counter_ns()
        request.infer(prompt)
        prompt_ns.append(time.perf_counter_ns() - t0)
    saved = [(s, np.array(s.state.data, copy=True)) for s in request.query_state()]

    decode = feeds([ids[n]], n)
    decode_ns = []
    for _ in range(args.runs):
        for s, v in saved:
            s.state = ov.Tensor(v.copy())
        t0 = time.perf_counter_ns()
        request.infer(decode)
        decode_ns.append(time.perf_counter_ns() - t0)

    med = sorted(decode_ns)[len(decode_ns) // 2]
    print(f"openvino_bench: {args.runs} prompt runs of {n} tokens, {args.runs} decode steps at depth {n}, "
          f"median decode {med / 1e6:.3f} ms, {threads} threads, CPU plugin, {precision}", file=sys.stderr, flush=True)
    edgepipe_report.emit(report(prompt_ns, decode_ns, n, threads, "CPU", precision, ov.get_version()))
    return 0


def report(prompt_ns, decode_ns, prompt_tokens, threads, device, precision, version):
    return {"prompt_ns": prompt_ns, "decode_ns": decode_ns, "prompt_tokens": prompt_tokens, "threads": threads,
            "device": device, "inference_precision": precision, "openvino": version}


if __name__ == "__main__":
    sys.exit(main())
