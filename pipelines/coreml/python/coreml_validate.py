"""Validate a Core ML INT4 package without Core ML's runtime, and with it on macOS.

    python coreml_validate.py --package M.mlpackage --model HF_DIR --text eval.txt
                              [--ctx 512] [--chunks N] [--block-size 32]
                              [--mode affine|symmetric] [--quantize-embeddings] [--v-down-bits 4|8]
                              [--scores-out DIR]

Checks (each one reported with its outcome):
  * structure: the package reloads with skip_model_load=True (no compilation), is an
    ML program for iOS 18 or later, and every quantized weight is a
    constexpr_blockwise_shift_scale op whose scales cover blocks of --block-size along
    the input axis, with --mode affine uint4 data and an fp16 offset, with --mode
    symmetric int4 data and no offset (with --v-down-bits 8, every layer's v_proj and
    down_proj uint8 / int8 on the same layout, and no other); no float weight of more than 2048 elements is left
    unquantized (biases aside, and the vocabulary-sized ones unless
    --quantize-embeddings);
  * the package's codes agree with the same per-block quantization computed from the
    checkpoint in PyTorch (affine: scale = (max - min) / 15 and offset = -min / scale in
    fp16, q = round(w / scale + offset) in 0..15; symmetric: scale = max|w| / 7 in fp16,
    q = round(w / scale), |q| <= 7; 255 and 127 for the 8-bit weights);
  * perplexity: the package's own INT4 weights (codes x scales, read from the package)
    are loaded into the PyTorch model and scored against the unconverted checkpoint on
    the same tokens and chunks as hf_perplexity.py (ppl_scoring.py, llama-perplexity's
    scheme: each chunk from an empty cache, only its second half scored). Compute is float32 on the CPU;
    Core ML computes in float16, which this does not reproduce.
  * on macOS only: the Core ML model itself is scored on the same chunks.
  * the unconverted model's top tokens at every scored position are kept, and each
    converted model's distributions are compared with them (ppl_scoring.Scorer): KL
    divergence and top-1 agreement. --scores-out keeps every scored token's negative
    log-likelihood for the delta's interval: DIR/baseline/ the unconverted model's (and its
    top tokens), DIR/ the simulated INT4 model's, DIR/coreml/ Core ML's when it ran. The
    baseline is this script's own, not the hf-perplexity step's: both numbers come from one
    backend and one tokenization.

Its report is report() below (reports/coreml_validate.json): the checks, the perplexities, the
KL divergences and top-1 agreements, the package's weights and whether Core ML itself ran.
"""

import argparse
import math
import os
import platform
import re
import sys
import tempfile

import edgepipe_env
import edgepipe_report
import ppl_scoring


# Every layer's value and down projections, by their checkpoint names.
V_DOWN = re.compile(r"\.(?:v_proj|down_proj)\.weight$")


def package_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def read_package(path):
    import coremltools as ct
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load

    m = ct.models.MLModel(path, skip_model_load=True)
    spec = m.get_spec()
    prog = milproto_load(spec, specification_version=spec.specificationVersion, file_weights_dir=m.weights_dir)
    return m, spec, prog


def all_ops(block):
    for op in block.operations:
        yield op
        for b in getattr(op, "blocks", []) or []:
            yield from all_ops(b)


def torch_name(op_name, params):
    """m_model_layers_0_mlp_up_proj_weight_to_fp16_quantized -> model.layers.0.mlp.up_proj.weight"""
    key = op_name
    for suffix in ("_to_fp16_quantized", "_quantized", "_to_fp16"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
            break
    if key.startswith("m_"):
        key = key[2:]
    return params.get(key)


def coreml_forward(mlmodel, spec, n_ctx, np):
    """forward() for the Core ML model itself (macOS only). A stateful model is prefilled
    with each chunk from a fresh state; a fixed-shape model gets the chunk right-padded to
    its length (padding after the scored tokens cannot change their causal logits)."""
    names = {i.name: i for i in spec.description.input}
    stateful = len(spec.description.state) > 0

    def feed(ids, width):
        mask = np.triu(np.full((width, width), -1e4, dtype=np.float16), 1)[None, None]
        feed = {"input_ids": ids, "causal_mask": mask}
        if "sliding_mask" in names:
            # Keys sliding_window or more positions behind the query are masked too.
            window = int(spec.description.metadata.userDefined.get("sliding_window", width))
            behind = np.subtract.outer(np.arange(width), np.arange(width)) >= window
            feed["sliding_mask"] = np.where(behind, np.float16(-1e4), mask[0, 0])[None, None]
        return feed

    def forward(inputs):
        if stateful:
            ids = np.array([inputs], dtype=np.int32)
            out = mlmodel.predict(feed(ids, n_ctx), state=mlmodel.make_state())
        else:
            width = names["input_ids"].type.multiArrayType.shape[-1]
            ids = np.zeros((1, width), dtype=np.int32)
            ids[0, :n_ctx] = inputs
            out = mlmodel.predict(feed(ids, width))
        return np.asarray(out["logits"])[0]

    return forward


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", required=True)
    ap.add_argument("--model", required=True, help="the unconverted Hugging Face checkpoint")
    ap.add_argument("--text", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--mode", choices=["affine", "symmetric"], default="affine")
    ap.add_argument("--quantize-embeddings", action="store_true")
    ap.add_argument("--v-down-bits", type=int, choices=(4, 8), default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--scores-out", help="write the per-token scores into this folder (baseline/, coreml/ in it)")
    args = ap.parse_args()

    edgepipe_env.offline()
    import numpy as np
    import torch
    from coremltools.converters.mil.mil import types
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    checks = []

    def check(name, passed, detail):
        checks.append({"name": name, "passed": bool(passed), "detail": detail})
        print(f"[{'ok' if passed else 'FAIL'}] {name}: {detail}", file=sys.stderr, flush=True)

    mlmodel, spec, prog = read_package(args.package)
    check("reloads without compiling", True,
          f"skip_model_load=True, specification version {spec.specificationVersion}, "
          f"states {[s.name for s in spec.description.state] or 'none'}")
    check("ML program for iOS 18+", spec.WhichOneof("Type") == "mlProgram" and spec.specificationVersion >= 9,
          f"type {spec.WhichOneof('Type')}, specification version {spec.specificationVersion} (iOS 18 is 9)")

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    params = {n.replace(".", "_"): (n, p) for n, p in model.named_parameters()}

    affine = args.mode == "affine"

    def bits_of(target):
        return 8 if args.v_down_bits == 8 and target is not None and V_DOWN.search(target[0]) else 4
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    quantized, bad, unmapped, big_float, kept = [], [], [], [], []
    for fn in prog.functions.values():
        for op in all_ops(fn):
            if op.op_type == "constexpr_blockwise_shift_scale":
                data, scale = op.data.val, op.scale.val
                offset = op.offset.val if op.offset is not None else None
                dtype = types.builtin_to_string(op.data.dtype)
                blocks = [d // s for d, s in zip(data.shape, scale.shape) if s != d]
                target = torch_name(op.name, params)
                want_dtype = ("uint" if affine else "int") + str(bits_of(target))
                offset_ok = (offset is not None and offset.dtype.kind == "f" and offset.shape == scale.shape) \
                    if affine else offset is None
                if dtype != want_dtype or not offset_ok or blocks != [args.block_size] \
                        or data.shape[-1] // scale.shape[-1] != args.block_size:
                    bad.append(f"{op.name}: {dtype}, offset "
                               f"{'no' if offset is None else f'{offset.dtype} {tuple(offset.shape)}'}, "
                               f"data {tuple(data.shape)} scale {tuple(scale.shape)}")
                if vocab and vocab in data.shape and not args.quantize_embeddings:
                    bad.append(f"{op.name}: a vocabulary-sized weight {tuple(data.shape)} was quantized")
                if target is None:
                    unmapped.append(op.name)
                quantized.append((op.name, target, data, scale, offset))
            elif op.op_type == "const":
                v = op.outputs[0].val
                feeds_constexpr = any(c.op_type.startswith("constexpr") for c in op.outputs[0].child_ops)
                # coremltools quantizes weights of more than 2048 elements (WEIGHT_THRESHOLD in
                # coreml_convert.py): a tiny model's 32x64 projection stays float by design.
                if isinstance(v, np.ndarray) and v.size > 2048 and v.dtype.kind == "f" and "bias" not in op.name \
                        and not feeds_constexpr:
                    if vocab and vocab in v.shape and not args.quantize_embeddings:
                        kept.append(f"{op.name} {tuple(v.shape)} {v.dtype}")
                    else:
                        big_float.append(f"{op.name} {tuple(v.shape)}")
    layout = ("uint4 codes with an fp16 scale and offset" if affine else "int4 codes with an fp16 scale, no offset")
    eight = sum(1 for q in quantized if bits_of(q[1]) == 8)
    if args.v_down_bits == 8:
        layout += f" ({eight} v_proj/down_proj weights {'uint8' if affine else 'int8'})"
    check(f"weights are int4, {args.mode}, per block", bool(quantized) and not bad,
          f"{len(quantized)} constexpr_blockwise_shift_scale weights, {layout}, block {args.block_size} along the "
          f"input axis" + (f"; wrong: {'; '.join(bad[:3])}" if bad else ""))
    check("no large float weight left", not big_float,
          ("none" if not big_float else f"{len(big_float)} left, e.g. {', '.join(big_float[:3])}")
          + (f"; kept at full precision as asked: {', '.join(kept[:3])}" if kept else ""))
    check("every quantized weight maps to a checkpoint tensor", quantized and not unmapped,
          f"{len(quantized) - len(unmapped)} of {len(quantized)} mapped"
          + (f"; unmapped: {', '.join(unmapped[:3])}" if unmapped else ""))

    # The same quantization computed from the checkpoint in PyTorch.
    agree, total = 0, 0
    for _, target, data, scale, _ in quantized:
        if target is None:
            continue
        w = target[1].detach().to(torch.float16).to(torch.float32)
        if tuple(w.shape) != tuple(data.shape):
            continue
        blocks = w.reshape(w.shape[0], -1, args.block_size)
        bits = bits_of(target)
        if affine:
            top = (1 << bits) - 1
            lo, hi = blocks.amin(dim=-1, keepdim=True), blocks.amax(dim=-1, keepdim=True)
            s = ((hi - lo) / top).to(torch.float16)
            s = torch.where(s == 0, torch.ones_like(s), s).to(torch.float32)
            o = (-lo / s).to(torch.float16).to(torch.float32)
            q = torch.round(blocks / s + o).clamp(0, top)
        else:
            top = (1 << (bits - 1)) - 1
            s = (blocks.abs().amax(dim=-1, keepdim=True) / top).to(torch.float16).to(torch.float32)
            q = torch.where(s > 0, torch.round(blocks / s), torch.zeros_like(blocks)).clamp(-top, top)
        agree += int((q.reshape(w.shape).to(torch.int16).numpy() == data.astype(np.int16)).sum())
        total += data.size
    frac = agree / total if total else 0.0
    check("PyTorch per-block quantization reproduces the package's codes", total > 0 and frac >= 0.999,
          f"{frac * 100:.4f}% of {total} codes equal (ties of fp16 rounding may differ)")

    # Tokens, chunks and scoring: ppl_scoring.py's, as every helper's.
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    n_ctx = args.ctx
    try:
        tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
        n_chunk = ppl_scoring.chunk_count(len(tokens), n_ctx, args.chunks)
    except ppl_scoring.EvalError as e:
        print(f"coreml_validate: {e}", file=sys.stderr)
        return 2

    # Without --scores-out the files live as long as this run: the comparisons read the
    # baseline's top tokens from its folder.
    tmp = None if args.scores_out else tempfile.TemporaryDirectory()
    scores_dir = args.scores_out or tmp.name
    base_dir, coreml_dir = os.path.join(scores_dir, "baseline"), os.path.join(scores_dir, "coreml")
    os.makedirs(base_dir, exist_ok=True)
    topk = os.path.join(base_dir, ppl_scoring.TOPK_FILE)

    def score(forward, label, out, **kw):
        s = ppl_scoring.Scorer(n_ctx, label=label, **kw)
        ppl_scoring.score(forward, tokens, n_ctx, n_chunk, add_bos, bos, scorer_=s)
        s.save(out)
        return s

    base = score(ppl_scoring.torch_forward(model, torch), "baseline ", base_dir, keep_topk=True)
    baseline, scored = base.ppl(), base.count
    print(f"baseline (unconverted, float32): ppl {baseline:.4f}", file=sys.stderr, flush=True)
    with torch.no_grad():
        for _, target, data, scale, offset in quantized:
            if target is None:
                continue
            codes = data.astype(np.float32)
            if offset is not None:
                codes = codes - np.repeat(offset.astype(np.float32), args.block_size, axis=-1)
            deq = np.repeat(scale.astype(np.float32), args.block_size, axis=-1) * codes
            target[1].copy_(torch.from_numpy(deq).reshape(target[1].shape))
    simulated = score(ppl_scoring.torch_forward(model, torch), "int4 ", scores_dir, compare=topk)
    ppl, agreement = simulated.ppl(), simulated.agreement()
    print(f"package INT4 weights in PyTorch (float32 compute): ppl {ppl:.4f}, KL divergence {agreement[0]:.5f}, "
          f"top-1 agreement {agreement[1]:.4f}", file=sys.stderr, flush=True)

    ran, reason, coreml_ppl, coreml_agreement = False, "", None, (None, None)
    if platform.system() == "Darwin":
        import coremltools as ct
        compiled = ct.models.MLModel(args.package, compute_units=ct.ComputeUnit.CPU_AND_NE)
        os.makedirs(coreml_dir, exist_ok=True)
        cm = score(coreml_forward(compiled, spec, n_ctx, np), "coreml ", coreml_dir, compare=topk)
        coreml_ppl, coreml_agreement = cm.ppl(), cm.agreement()
        ran = True
        check("Core ML prediction", math.isfinite(coreml_ppl), f"ppl {coreml_ppl:.4f} on CPU_AND_NE")
    else:
        reason = f"Core ML prediction needs macOS; this host is {platform.system()}"
    if tmp is not None:
        tmp.cleanup()

    edgepipe_report.emit(report(checks, ppl, baseline, coreml_ppl, n_chunk, n_ctx, scored, affine, len(quantized), eight,
                                args.block_size, args.mode, kept, package_bytes(args.package), ran, reason,
                                agreement, coreml_agreement))
    return 0


def report(checks, ppl, baseline, coreml_ppl, chunks, ctx, scored, affine, quantized, eight, block_size, mode, kept,
           nbytes, ran, reason, agreement, coreml_agreement):
    """coreml_ppl is None unless Core ML itself ran (macOS); reason says why it did not. agreement
    and coreml_agreement: (KL divergence, top-1 agreement) of the simulated INT4 model and of
    Core ML against the unconverted model's top tokens ((None, None) where it did not run)."""
    return {
        "checks": checks, "ppl": ppl, "baseline_ppl": baseline, "coreml_ppl": coreml_ppl,
        "kl_divergence": agreement[0], "top1_agreement": agreement[1],
        "coreml_kl_divergence": coreml_agreement[0], "coreml_top1_agreement": coreml_agreement[1],
        "chunks": chunks, "ctx": ctx, "scored": scored,
        "compute": "float32 on the CPU (Core ML computes in float16)",
        "simulated": "the package's INT4 codes, fp16 scales and offsets loaded into PyTorch" if affine else "the package's INT4 codes and fp16 scales loaded into PyTorch",
        "quantized_weights": quantized, "eight_bit_weights": eight, "block_size": block_size, "mode": mode,
        "kept_fp16": kept,
        "package_bytes": nbytes, "ran_coreml": ran, "coreml_reason": reason,
    }


if __name__ == "__main__":
    sys.exit(main())
