"""Decode-path consistency and generation agreement of an ONNX causal LM on ONNX Runtime's CPU provider.

    python onnx_decode.py --onnx model.onnx --reference reference.json [--threads N]

The model is the export with its KV cache (onnx-export with past: true) or the MatMulNBits model
made of it: it takes input_ids, attention_mask, position_ids and past_key_values.N.key/value and
returns logits and present.N.key/value. OnnxRuntime below runs it as onnx_bench.py does: a
prefill from empty past tensors, then one token at a time with the previous run's present
tensors fed back as the past, the position being the past's length. decode_check.py compares,
for every sequence of generate_reference.py's reference.json, the one-pass prefill's logits with
the token-by-token decode's, and the decode with the unconverted model's greedy tokens and
top-32 log-probabilities. Its report is report() below (reports/onnx_decode.json).
"""

import argparse
import sys

import decode_check
import edgepipe_env
import edgepipe_report


class GraphError(Exception):
    """The graph is not one this runtime can decode through its KV cache."""


class OnnxRuntime:
    """An ONNX Runtime session of a graph exported with its past key/values, as decode_check's
    runtime. The past is the present tensors the previous run returned; a fresh one has no
    positions (empty tensors, batch 1)."""

    def __init__(self, session, np):
        self.session, self.np = session, np
        self.inputs = {i.name: i for i in session.get_inputs()}
        self.past_names = sorted(n for n in self.inputs if n.startswith("past_key_values."))
        if not self.past_names:
            raise GraphError("the graph has no past_key_values inputs: a decode through the KV cache needs a model "
                             "exported with it (onnx-export with past: true)")
        unknown = sorted(set(self.inputs) - {"input_ids", "attention_mask", "position_ids"} - set(self.past_names))
        if unknown or "input_ids" not in self.inputs:
            raise GraphError(f"the graph takes {sorted(self.inputs)}: this runtime fills input_ids, attention_mask, "
                             f"position_ids and past_key_values.N")
        self.outputs = [o.name for o in session.get_outputs()]
        self.present = {n: "past_key_values." + n[len("present."):] for n in self.outputs if n.startswith("present.")}
        if sorted(self.present.values()) != self.past_names or "logits" not in self.outputs:
            raise GraphError(f"the graph's outputs {self.outputs} are not logits and a present tensor for each of its "
                             f"past inputs {self.past_names}")
        self.past = None

    def empty_past(self):
        past = {}
        for name in self.past_names:
            inp = self.inputs[name]
            dims = [d if isinstance(d, int) else (1 if i == 0 else 0) for i, d in enumerate(inp.shape)]
            past[name] = self.np.zeros(dims, dtype=self.np.float16 if "float16" in inp.type else self.np.float32)
        return past

    def past_length(self, past):
        """Positions the past holds: its sequence axis ([batch, kv_heads, past, head_dim])."""
        return int(past[self.past_names[0]].shape[2])

    def positions(self, start, n):
        """The position ids of n tokens that follow start cached ones."""
        return self.np.arange(start, start + n, dtype=self.np.int64)[None, :]

    def run(self, ids, past):
        """logits [len(ids), vocab] and the present tensors, as the next run's past."""
        np = self.np
        start = self.past_length(past)
        feeds = {"input_ids": np.array([ids], dtype=np.int64)}
        if "attention_mask" in self.inputs:
            feeds["attention_mask"] = np.ones((1, start + len(ids)), dtype=np.int64)
        if "position_ids" in self.inputs:
            feeds["position_ids"] = self.positions(start, len(ids))
        feeds.update(past)
        out = dict(zip(self.outputs, self.session.run(None, feeds)))
        return out["logits"][0], {self.present[n]: out[n] for n in self.present}

    def prefill(self, ids, keep):
        return self.run(ids, self.empty_past())[0][-keep:]

    def start(self, prompt_ids):
        logits, self.past = self.run(prompt_ids, self.empty_past())
        return logits[-1]

    def step(self, token):
        logits, self.past = self.run([token], self.past)
        return logits[-1]


def session(path, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True, help="ONNX model file (exported with a KV cache)")
    ap.add_argument("--reference", required=True, help="generate_reference.py's reference.json")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    args = ap.parse_args()
    edgepipe_env.offline()

    import numpy as np
    import onnxruntime as ort

    ref = decode_check.load_reference(args.reference)
    sess = session(args.onnx, edgepipe_env.threads(args.threads))
    try:
        runtime = OnnxRuntime(sess, np)
    except GraphError as e:
        print(f"onnx_decode: {e}", file=sys.stderr)
        return 2
    summary, per = decode_check.compare(runtime, ref, np, log=sys.stderr)
    name = (f"ONNX Runtime {ort.__version__} ({', '.join(sess.get_providers())}), the graph's past_key_values fed back "
            f"from its present outputs")
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
