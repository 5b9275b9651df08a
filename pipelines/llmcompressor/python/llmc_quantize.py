"""INT4 weight quantization (W4A16) of a Hugging Face causal LM with llmcompressor's oneshot.

    python llmc_quantize.py --model DIR --calibration TEXT --out DIR --scheme gptq|awq
                            --group-size N [--samples 32] [--seq-len 512] [--n-grid 20] [--threads 1]
                            [--symmetric] [--observer minmax|mse] [--actorder static|group|none]
                            [--rounding gptq|rtn] [--v-down-bits 4|8]

Calibration data is built here from the text, with no hub access: the whole text is
tokenized once (no special tokens), cut into consecutive windows of --seq-len tokens,
and --samples windows spread evenly over the text are kept, in text order.

Schemes (every Linear but lm_head, 4-bit integer weights, one scale per group of
--group-size input columns, activations left at 16 bits):
  gptq  GPTQModifier: each layer's columns are rounded one at a time and the error is
        spread over the columns not yet rounded, weighted by the calibration inputs'
        Hessian; --actorder picks the column order (static: by activation size);
  awq   AWQModifier (activation-aware scaling, --n-grid candidate scales per layer; in
        llmcompressor 0.14 a transform of its own) followed by the rounding --rounding
        names: gptq (GPTQModifier, as above, on the rescaled weights) or rtn
        (QuantizationModifier, round to nearest).
With --v-down-bits 8, every layer's v_proj and down_proj get 8-bit weights in a second
config group (same group size and zero points), as llama.cpp's Q4_K_M gives attn_v and
ffn_down more bits; a regex target outranks the "Linear" class target in compressed-tensors'
matching, so those layers take the 8-bit scheme and every other Linear the 4-bit one.
Weights are asymmetric, with a zero point per group (the W4A16_ASYM preset), unless
--symmetric (the W4A16 preset). --observer picks each group's range: minmax, or mse
(a clipped range that minimises the rounding error).
The group size is not a preset's 128 because a group must divide every layer's input
width (SmolLM2-135M: 576); the caller passes one that does, and this script refuses
one that does not before calibrating.

Output: --out holds a compressed-tensors checkpoint (config.json with a
quantization_config, pack-quantized safetensors, tokenizer files) that vLLM and
transformers load. Its report is report() below (reports/llmc_quantize.json).
"""

import argparse
import json
import os
import re
import sys
import time

import edgepipe_env
import edgepipe_report
import edgepipe_tokenizer

# Every layer's value and down projections, by module name; the same pattern as a
# compressed-tensors target.
V_DOWN_TARGET = r"re:.*\.(v_proj|down_proj)$"
V_DOWN = re.compile(V_DOWN_TARGET[3:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--calibration", required=True, help="UTF-8 calibration text")
    ap.add_argument("--out", required=True, help="output directory (compressed-tensors checkpoint)")
    ap.add_argument("--scheme", required=True, choices=["gptq", "awq"])
    ap.add_argument("--group-size", type=int, required=True, help="input columns per scale")
    ap.add_argument("--samples", type=int, default=32, help="calibration samples")
    ap.add_argument("--seq-len", type=int, default=512, help="tokens per calibration sample")
    ap.add_argument("--n-grid", type=int, default=20, help="AWQ: scales tried per layer (AWQModifier's n_grid)")
    ap.add_argument("--symmetric", action="store_true", help="no zero points (default: one per group)")
    ap.add_argument("--observer", choices=["minmax", "mse"], default="minmax", help="how each group's range is chosen")
    ap.add_argument("--actorder", choices=["static", "group", "none"], default="static", help="GPTQ's column order")
    ap.add_argument("--rounding", choices=["gptq", "rtn"], default="gptq", help="AWQ: how the rescaled weights are rounded")
    ap.add_argument("--v-down-bits", type=int, choices=(4, 8), default=4,
                    help="bits of every layer's v_proj and down_proj (8: a second config group)")
    # GPTQ and AWQ run thousands of small tensor ops per layer, each ending at an
    # OpenMP barrier where libgomp spins by default. On a 2-core machine with
    # another process busy, a 1536x576 layer took 34 s with 2 threads against 1.9 s
    # with 1: the spinning thread burned the core its descheduled peer needed.
    # With OMP_WAIT_POLICY=PASSIVE (edgepipe sets it for every tool) two threads
    # are faster than one, so edgepipe passes the cores it granted the step.
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: all cores)")
    args = ap.parse_args()
    if args.group_size <= 0 or args.samples <= 0 or args.seq_len < 8:
        print("llmc_quantize: --group-size and --samples must be positive, --seq-len at least 8", file=sys.stderr)
        return 2

    edgepipe_env.offline(datasets=True)

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    import compressed_tensors
    import llmcompressor
    import transformers
    from llmcompressor import oneshot

    if not torch.cuda.is_available():
        # llmcompressor 0.14.0.1's AWQ pins its cached activations before every grid
        # search (AWQModifier._apply_smoothing -> IntermediatesCache.pin_memory), which
        # needs a CUDA driver and fails on a CPU-only host. Pinning only speeds up
        # host-to-GPU copies, so without a GPU it is skipped.
        from llmcompressor.pipelines.cache import IntermediatesCache
        IntermediatesCache.pin_memory = lambda self, batch_index, input_names=None: None

    torch.manual_seed(0)
    torch.set_num_threads(edgepipe_env.threads(args.threads))
    start = time.monotonic()

    tokenizer = edgepipe_tokenizer.load(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()

    # Refuse a group size that does not divide a layer before spending time on
    # calibration, naming the layers (compressed-tensors would fail on save).
    linears = {name: m.in_features for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and name.split(".")[-1] != "lm_head"}
    bad = sorted({w for w in linears.values() if w % args.group_size})
    if bad:
        print(f"llmc_quantize: group size {args.group_size} does not divide the input width of every "
              f"Linear layer (widths {sorted(set(linears.values()))}; not divisible: {bad})", file=sys.stderr)
        return 2

    with open(args.calibration, encoding="utf-8") as f:
        text = f.read()
    ids = tokenizer(text, add_special_tokens=False).input_ids
    windows = len(ids) // args.seq_len
    if windows == 0:
        print(f"llmc_quantize: the calibration text has {len(ids)} tokens, fewer than one sample of "
              f"{args.seq_len}", file=sys.stderr)
        return 2
    n = min(args.samples, windows)
    picks = [i * windows // n for i in range(n)]
    samples = [ids[p * args.seq_len:(p + 1) * args.seq_len] for p in picks]
    dataset = Dataset.from_dict({"input_ids": samples, "attention_mask": [[1] * args.seq_len for _ in samples]})
    print(f"llmc_quantize: {n} calibration samples of {args.seq_len} tokens from {len(ids)} tokens "
          f"({windows} windows)", file=sys.stderr, flush=True)

    weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": args.group_size,
               "symmetric": args.symmetric, "observer": args.observer}
    groups = {"group_0": {"targets": ["Linear"], "weights": weights}}
    eight = []
    if args.v_down_bits == 8:
        eight = [name for name in linears if V_DOWN.search(name)]
        if eight:
            groups["group_1"] = {"targets": [V_DOWN_TARGET], "weights": dict(weights, num_bits=8)}
        else:
            print("llmc_quantize: --v-down-bits 8, but no Linear is named like a v_proj or down_proj: "
                  "every layer stays 4-bit", file=sys.stderr, flush=True)
    if args.scheme == "gptq":
        from llmcompressor.modifiers.gptq import GPTQModifier
        recipe = [GPTQModifier(ignore=["lm_head"], config_groups=groups,
                               actorder=None if args.actorder == "none" else args.actorder)]
    else:
        from llmcompressor.modifiers.transform.awq import AWQModifier
        if args.rounding == "gptq":
            from llmcompressor.modifiers.gptq import GPTQModifier
            rounding = GPTQModifier(ignore=["lm_head"], config_groups=groups,
                                    actorder=None if args.actorder == "none" else args.actorder)
        else:
            from llmcompressor.modifiers.quantization import QuantizationModifier
            rounding = QuantizationModifier(ignore=["lm_head"], config_groups=groups)
        recipe = [AWQModifier(n_grid=args.n_grid), rounding]

    oneshot(model=model, tokenizer=tokenizer, dataset=dataset, recipe=recipe,
            max_seq_length=args.seq_len, num_calibration_samples=n,
            shuffle_calibration_samples=False, output_dir=args.out)
    # The artifact ships the source's own tokenizer files, byte for byte (edgepipe_tokenizer).
    edgepipe_tokenizer.copy_files(args.model, args.out)

    with open(os.path.join(args.out, "config.json"), encoding="utf-8") as f:
        qc = json.load(f).get("quantization_config")
    if not qc or qc.get("quant_method") != "compressed-tensors":
        print("llmc_quantize: oneshot saved no compressed-tensors quantization_config", file=sys.stderr)
        return 1

    edgepipe_report.emit(report(args, n, len(ids), len(linears), len(eight), qc.get("format"), round(time.monotonic() - start, 1),
                                (llmcompressor.__version__, compressed_tensors.__version__, transformers.__version__,
                                 torch.__version__)))
    return 0


def report(args, samples, calibration_tokens, linears, eight, fmt, seconds, versions):
    """versions: llmcompressor's, compressed-tensors', transformers' and torch's."""
    return {
        "scheme": args.scheme, "group_size": args.group_size, "samples": samples, "seq_len": args.seq_len,
        "symmetric": args.symmetric, "observer": args.observer,
        "actorder": args.actorder if args.scheme == "gptq" or args.rounding == "gptq" else None,
        "rounding": args.rounding if args.scheme == "awq" else None,
        "n_grid": args.n_grid if args.scheme == "awq" else None,
        "calibration_tokens": calibration_tokens, "quantized_linears": linears, "eight_bit_linears": eight,
        "format": fmt, "seconds": seconds,
        "versions": {"llmcompressor": versions[0], "compressed-tensors": versions[1], "transformers": versions[2],
                     "torch": versions[3]},
    }


if __name__ == "__main__":
    sys.exit(main())
