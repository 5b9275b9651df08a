"""Compress an exported OpenVINO IR's weights with NNCF through optimum-intel (INT4 or INT8, weight-only).

    python openvino_quantize.py --in EXPORT_DIR --out DIR --weight-format int4|int8
        [--sym] [--group-size N] [--group-size-fallback error|adjust|ignore] [--ratio R] [--all-layers]
        [--awq] [--scale-estimation] [--gptq] [--calibration TEXT --samples N --seq-len L]
        [--trust-remote-code]

The settings are optimum-cli's (`optimum-cli export openvino --weight-format int4 --sym
--group-size 128 --ratio 1.0 [--awq --scale-estimation --dataset ...]`), applied the way its
CLI does after the export: OVModelForCausalLM loads the IR uncompiled and OVQuantizer runs
nncf.compress_weights with an OVWeightQuantizationConfig. The data-aware methods calibrate on
the recipe's text: it is tokenized, cut into --samples pieces of --seq-len tokens, and each
piece decoded back to a string (optimum-intel takes causal-LM calibration data as strings).
NNCF keeps the embedding and the last MatMul (lm_head) in 8 bits unless --all-layers.

The compressed IR is read back and its constants counted by element type, so the step reports
what the file holds, not what was asked for.

Its report is report() below (reports/openvino_quantize.json): "weights" counts the constants,
elements and bytes of each element type.
"""

import argparse
import os
import shutil
import sys

import edgepipe_env
import edgepipe_report
import edgepipe_tokenizer
import openvino_census

MODEL_FILES = ("openvino_model.xml", "openvino_model.bin")


def calibration_strings(tokenizer, path, samples, seq_len):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ids = tokenizer(text, add_special_tokens=False).input_ids
    if len(ids) < seq_len:
        raise SystemExit(f"openvino_quantize: the calibration text has {len(ids)} tokens, fewer than --seq-len {seq_len}")
    pieces = [ids[i * seq_len:(i + 1) * seq_len] for i in range(min(samples, len(ids) // seq_len))]
    return [tokenizer.decode(p) for p in pieces]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="folder of the uncompressed export")
    ap.add_argument("--out", required=True)
    ap.add_argument("--weight-format", choices=["int4", "int8"], required=True)
    ap.add_argument("--sym", action="store_true", help="symmetric weights (no zero points)")
    ap.add_argument("--group-size", type=int, default=128, help="int4: -1 is one scale per output channel")
    ap.add_argument("--group-size-fallback", choices=["error", "adjust", "ignore"], default="error",
                    help="int4: what NNCF does where the group size does not divide a layer's input width")
    ap.add_argument("--ratio", type=float, default=1.0, help="int4: share of the weights in 4 bits (the rest 8)")
    ap.add_argument("--all-layers", action="store_true", help="int4: embeddings and lm_head in 4 bits too")
    ap.add_argument("--awq", action="store_true")
    ap.add_argument("--scale-estimation", action="store_true")
    ap.add_argument("--gptq", action="store_true")
    ap.add_argument("--calibration", help="UTF-8 text for the data-aware methods")
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    edgepipe_env.offline()
    data_aware = args.awq or args.scale_estimation or args.gptq
    if data_aware and not args.calibration:
        print("openvino_quantize: --awq, --scale-estimation and --gptq need --calibration", file=sys.stderr)
        return 2
    if args.weight_format == "int8" and (data_aware or args.all_layers):
        print("openvino_quantize: the data-aware methods and --all-layers are 4-bit options", file=sys.stderr)
        return 2

    import torch
    from optimum.intel import OVConfig, OVModelForCausalLM, OVQuantizer, OVWeightQuantizationConfig

    torch.set_num_threads(edgepipe_env.threads(args.threads))

    q = {"bits": 4 if args.weight_format == "int4" else 8, "sym": args.sym, "ratio": args.ratio}
    if args.weight_format == "int4":
        q["group_size"] = args.group_size
        if args.group_size_fallback != "error":
            q["group_size_fallback"] = args.group_size_fallback
        if args.all_layers:
            q["all_layers"] = True
    n_samples = 0
    if data_aware:
        tok = edgepipe_tokenizer.load(args.src, trust_remote_code=args.trust_remote_code)
        q["dataset"] = calibration_strings(tok, args.calibration, args.samples, args.seq_len)
        q["num_samples"] = n_samples = len(q["dataset"])
        q["tokenizer"] = args.src
        if args.awq:
            q["quant_method"] = "awq"
        if args.scale_estimation:
            q["scale_estimation"] = True
        if args.gptq:
            q["gptq"] = True
    config = OVWeightQuantizationConfig(**q)
    shown = {k: v for k, v in q.items() if k not in ("dataset", "tokenizer")}
    print(f"openvino_quantize: {shown}", file=sys.stderr, flush=True)

    # Everything but the model itself (tokenizers, config) is the export's.
    os.makedirs(args.out, exist_ok=True)
    for f in os.listdir(args.src):
        p = os.path.join(args.src, f)
        if os.path.isfile(p) and f not in MODEL_FILES and f not in ("result.json", "step.log"):
            shutil.copy2(p, os.path.join(args.out, f))
    model = OVModelForCausalLM.from_pretrained(args.src, compile=False, trust_remote_code=args.trust_remote_code)
    OVQuantizer(model).quantize(ov_config=OVConfig(quantization_config=config), save_directory=args.out)

    ir = openvino_census.describe(args.out)
    if ir is None:
        return 1
    edgepipe_report.emit(report(ir, shown, n_samples))
    return 0


def report(ir, config, calibration_samples):
    """ir: openvino_census.describe's reading of the IR; config: the quantization settings, less
    the calibration strings."""
    return {"model": ir["model"], "files": ir["files"], "inputs": ir["inputs"], "outputs": ir["outputs"],
            "stateful": ir["stateful"], "weights": ir["weights"], "low_bit_fraction": ir["low_bit_fraction"],
            "versions": ir["versions"], "config": config, "calibration_samples": calibration_samples}


if __name__ == "__main__":
    sys.exit(main())
