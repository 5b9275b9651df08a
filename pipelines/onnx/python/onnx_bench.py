"""Time an ONNX causal LM with a KV cache on ONNX Runtime's CPU provider: prompt and decode.

    python onnx_bench.py --onnx model.onnx --prompt-tokens 128 --runs 60 [--threads N]

The input shape is fixed. Each prompt run feeds --prompt-tokens tokens from an empty KV cache
(the forward pass that yields the first generated token's logits). Each decode run feeds one
token with --prompt-tokens tokens already in the KV cache: the cache comes from one prompt run
and is fed unchanged to every decode run, so every run times the same decode step, as
llama-bench's depth runs do. Token ids are 1..N modulo the vocabulary (config.json beside the
model, if any): latency does not depend on which tokens they are.

Every run is timed, warm-up runs included (the caller drops those); times are wall-clock
nanoseconds around InferenceSession.run with the inputs already built.

Its report is report() below (reports/onnx_bench.json).
"""

import argparse
import json
import os
import sys
import time

import edgepipe_env
import edgepipe_report


def empty_past_shape(inp):
    """Shape of an empty past tensor: numeric dims kept, batch 1, every other symbol 0."""
    return [d if isinstance(d, int) else (1 if i == 0 else 0) for i, d in enumerate(inp.shape)]


def vocab_size(model_path):
    cfg = os.path.join(os.path.dirname(os.path.abspath(model_path)), "config.json")
    try:
        with open(cfg, encoding="utf-8") as f:
            return int(json.load(f).get("vocab_size") or 0)
    except (OSError, ValueError):
        return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True, help="ONNX model file (exported with a KV cache)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=60, help="prompt runs and decode runs, warm-up included")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    args = ap.parse_args()
    if args.prompt_tokens < 1 or args.runs < 1:
        print("onnx_bench: --prompt-tokens and --runs must be at least 1", file=sys.stderr)
        return 2

    import numpy as np
    import onnxruntime as ort

    threads = edgepipe_env.threads(args.threads)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(args.onnx, sess_options=so, providers=["CPUExecutionProvider"])

    inputs = {i.name: i for i in session.get_inputs()}
    past_names = [n for n in inputs if n.startswith("past_key_values.")]
    if not past_names:
        print("onnx_bench: the graph has no past_key_values inputs: per-token decode needs a model exported "
              "with a KV cache (onnx-export with past: true)", file=sys.stderr)
        return 2
    for name, inp in inputs.items():
        if name not in ("input_ids", "attention_mask", "position_ids") and name not in past_names:
            print(f"onnx_bench: the graph has an input {name!r} this script does not know how to fill", file=sys.stderr)
            return 2
    outputs = [o.name for o in session.get_outputs()]
    present = {n: "past_key_values." + n[len("present."):] for n in outputs if n.startswith("present.")}
    if sorted(present.values()) != sorted(past_names):
        print(f"onnx_bench: the graph's present outputs {sorted(present)} do not match its past inputs {sorted(past_names)}",
              file=sys.stderr)
        return 2

    n = args.prompt_tokens
    vocab = vocab_size(args.onnx)
    ids = [(i % (vocab - 1)) + 1 if vocab > 1 else i + 1 for i in range(n + 1)]

    def past_dtype(inp):
        return np.float16 if "float16" in inp.type else np.float32

    prompt = {}
    for name, inp in inputs.items():
        if name == "input_ids":
            prompt[name] = np.array([ids[:n]], dtype=np.int64)
        elif name == "attention_mask":
            prompt[name] = np.ones((1, n), dtype=np.int64)
        elif name == "position_ids":
            prompt[name] = np.arange(n, dtype=np.int64)[None, :]
        else:
            prompt[name] = np.zeros(empty_past_shape(inp), dtype=past_dtype(inp))

    prompt_ns = []
    result = None
    for _ in range(args.runs):
        t0 = time.perf_counter_ns()
        result = session.run(None, prompt)
        prompt_ns.append(time.perf_counter_ns() - t0)
    by_name = dict(zip(outputs, result))

    decode = {}
    for name in inputs:
        if name == "input_ids":
            decode[name] = np.array([[ids[n]]], dtype=np.int64)
        elif name == "attention_mask":
            decode[name] = np.ones((1, n + 1), dtype=np.int64)
        elif name == "position_ids":
            decode[name] = np.array([[n]], dtype=np.int64)
    for out_name, in_name in present.items():
        decode[in_name] = by_name[out_name]

    decode_ns = []
    for _ in range(args.runs):
        t0 = time.perf_counter_ns()
        session.run(None, decode)
        decode_ns.append(time.perf_counter_ns() - t0)

    med = sorted(decode_ns)[len(decode_ns) // 2]
    print(f"onnx_bench: {args.runs} prompt runs of {n} tokens, {args.runs} decode steps at depth {n}, "
          f"median decode {med / 1e6:.3f} ms, {threads} threads", file=sys.stderr, flush=True)
    edgepipe_report.emit(report(prompt_ns, decode_ns, n, threads, len(past_names) // 2, session.get_providers()))
    return 0


def report(prompt_ns, decode_ns, prompt_tokens, threads, kv_layers, providers):
    return {"prompt_ns": prompt_ns, "decode_ns": decode_ns, "prompt_tokens": prompt_tokens, "threads": threads,
            "kv_layers": kv_layers, "providers": providers}


if __name__ == "__main__":
    sys.exit(main())
