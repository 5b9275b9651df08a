"""Decode-path consistency and generation agreement of a stateful OpenVINO IR on OpenVINO's CPU plugin.

    python openvino_decode.py --ir DIR --reference reference.json [--threads N]

The IR is optimum-intel's stateful export (or NNCF's compression of it): the KV cache lives in the
model's state, and every inference appends its tokens to it. OpenVINORuntime below runs it as
openvino_bench.py does: the state reset, the prompt fed whole, then one token at a time, each at
the next position (input_ids, attention_mask over every cached token, position_ids, beam_idx).
decode_check.py compares, for every sequence of generate_reference.py's reference.json, the
one-pass prefill's logits with the token-by-token decode's, and the decode with the unconverted
model's greedy tokens and top-32 log-probabilities.

The CPU plugin computes in f32 (INFERENCE_PRECISION_HINT, as openvino_validate.py scores), keeps
its KV cache in f32 (KV_CACHE_PRECISION) and does not quantize activations on the fly
(DYNAMIC_QUANTIZATION_GROUP_SIZE 0). Its x86 defaults do both (a u8 cache, int8 activations),
and the activations' quantization alone, which treats one token otherwise than a prompt, moved a
correct decode's logits a unit and more off its prefill (docs/results/decode.md): what is checked
is the IR's decode path, not those approximations. An Intel NPU computes in FP16 with a
cache of its own: this is not that. Its report is report() below (reports/openvino_decode.json).
"""

import argparse
import os
import sys

import decode_check
import edgepipe_env
import edgepipe_report

# What the CPU plugin computes in here (see the docstring).
CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0,
          "PERFORMANCE_HINT": "LATENCY"}


class IRError(Exception):
    """The IR is not one this runtime can decode through its state."""


def type_name(t):
    """OpenVINO element types print as <Type: 'float32'>; their names are f32, u8, bf16."""
    return t.get_type_name() if hasattr(t, "get_type_name") else str(t)


def compile_ir(folder, threads, config=None):
    """(compiled model, what it computes in (its inference precision, its KV cache's and its
    dynamic quantization's group, as it reports them), OpenVINO's version)."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(os.path.join(folder, "openvino_model.xml"))
    if not model.get_sinks():
        raise IRError("the IR is not stateful: a decode through the KV cache needs it in the model's state "
                      "(optimum-intel's default export)")
    names = {p.get_any_name() for p in model.inputs}
    unknown = names - {"input_ids", "attention_mask", "position_ids", "beam_idx"}
    if unknown or "input_ids" not in names or "logits" not in {p.get_any_name() for p in model.outputs}:
        raise IRError(f"the IR takes {sorted(names)}: this runtime fills input_ids, attention_mask, position_ids and "
                      f"beam_idx, and reads logits")
    cfg = dict(CONFIG if config is None else config)
    if threads:
        cfg["INFERENCE_NUM_THREADS"] = threads
    compiled = core.compile_model(model, "CPU", cfg)
    computes = (f"{type_name(compiled.get_property('INFERENCE_PRECISION_HINT'))}, "
                f"KV cache {type_name(compiled.get_property('KV_CACHE_PRECISION'))}, "
                f"dynamic quantization group {compiled.get_property('DYNAMIC_QUANTIZATION_GROUP_SIZE')}")
    return compiled, computes, ov.get_version()


class OpenVINORuntime:
    """A compiled stateful IR as decode_check's runtime: its infer request's state is the KV
    cache, reset before a prefill and before a prompt; pos counts the tokens it holds."""

    def __init__(self, compiled, np):
        self.np = np
        self.names = {p.get_any_name() for p in compiled.inputs}
        self.request = compiled.create_infer_request()
        self.pos = 0

    def positions(self, start, n):
        """The position ids of n tokens that follow start cached ones."""
        return self.np.arange(start, start + n, dtype=self.np.int64)[None, :]

    def infer(self, tokens):
        """logits [len(tokens), vocab] after appending tokens to the state."""
        np = self.np
        k = len(tokens)
        feeds = {"input_ids": np.array([tokens], dtype=np.int64)}
        if "attention_mask" in self.names:
            feeds["attention_mask"] = np.ones((1, self.pos + k), dtype=np.int64)
        if "position_ids" in self.names:
            feeds["position_ids"] = self.positions(self.pos, k)
        if "beam_idx" in self.names:
            feeds["beam_idx"] = np.zeros((1,), dtype=np.int32)
        self.request.infer(feeds)
        self.pos += k
        return np.array(self.request.get_tensor("logits").data[0], copy=True)

    def reset(self):
        self.request.reset_state()
        self.pos = 0

    def prefill(self, ids, keep):
        self.reset()
        return self.infer(ids)[-keep:]

    def start(self, prompt_ids):
        self.reset()
        return self.infer(prompt_ids)[-1]

    def step(self, token):
        return self.infer([token])[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ir", required=True, help="folder with openvino_model.xml/.bin")
    ap.add_argument("--reference", required=True, help="generate_reference.py's reference.json")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    args = ap.parse_args()
    edgepipe_env.offline()

    import numpy as np

    ref = decode_check.load_reference(args.reference)
    threads = edgepipe_env.threads(args.threads)
    try:
        compiled, computes, version = compile_ir(args.ir, threads)
    except IRError as e:
        print(f"openvino_decode: {e}", file=sys.stderr)
        return 2
    print(f"openvino_decode: OpenVINO {version}, CPU ({computes}), {threads} threads", file=sys.stderr, flush=True)
    summary, per = decode_check.compare(OpenVINORuntime(compiled, np), ref, np, log=sys.stderr)
    name = f"OpenVINO {version} CPU plugin ({computes}), the stateful IR's KV cache"
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
