"""Quantize an ONNX model's MatMul weights to 4 bits with ONNX Runtime's MatMulNBits quantizer.

    python onnx_quantize.py --in DIR/model.onnx --out DIR [--method hqq|rtn] [--block-size 32]
        [--asymmetric] [--keep-lm-head | --lm-head-bits 4|8] [--v-down-bits 4|8]

Weight-only (onnxruntime.quantization.matmul_nbits_quantizer): every MatMul whose B input is a
constant becomes a com.microsoft MatMulNBits node holding 4-bit weights with one scale (and a
zero point) per block of --block-size along K. Activations stay fp32.

--method hqq (the default) is Half-Quadratic Quantization (HQQWeightOnlyQuantConfig): per
block it alternates between rounding the weights and solving for the scale and a float zero
point that minimise an outlier-robust (lp, p < 1) error of the dequantized weights, starting
from min/max. It needs no calibration data. --method rtn is round-to-nearest
(DefaultWeightOnlyQuantConfig), symmetric unless --asymmetric.

The block size must be a power of two of at least 16 (the MatMulNBits kernels' rule); a K that
the block does not divide is zero-padded, so pick a block that divides the model's widths
(SmolLM2: 576 = 18 x 32).

--lm-head-bits 8 quantizes the output projection in a second pass to 8 bits (round to nearest,
a zero point per block): with a large vocabulary it is most of the model's weights and the
layer 4 bits hurt most (Gemma 3 270M: +4.70 perplexity at 4 bits, +3.34 at 8 or in fp32).
--v-down-bits 8 does the same for every layer's v_proj and down_proj, the layers llama.cpp's
Q4_K_M gives more bits (Gemma 3 270M: +1.97 with both, for 11 MB).

The model's config and tokenizer files from the export's folder are copied beside the result.

Its report is report() below (reports/onnx_quantize.json): "lm_head_bits" is what the output
projection became (4, 8, 32 for float, null without one), "lm_head_tied" says it is float
because its weight is the tied embedding's table, read through a Transpose, and
"eight_bit_layers" counts the 8-bit MatMulNBits besides the output projection.
"""

import argparse
import os
import shutil
import sys

import edgepipe_report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="fp32 ONNX model")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--method", choices=("hqq", "rtn"), default="hqq")
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--asymmetric", action="store_true", help="rtn: store a zero point per block (hqq always does)")
    ap.add_argument("--keep-lm-head", action="store_true",
                    help="leave the output projection (lm_head) in fp32: small models lose most of their accuracy there")
    ap.add_argument("--v-down-bits", type=int, choices=(4, 8), default=4,
                    help="bits of every layer's v_proj and down_proj (8: round to nearest with a zero point per block, "
                         "in the second pass, as llama.cpp's Q4_K_M gives attn_v and ffn_down more bits)")
    ap.add_argument("--lm-head-bits", type=int, choices=(4, 8), default=4,
                    help="bits of the output projection's weights (8: round to nearest with a zero point per block, "
                         "in a second pass, as llama.cpp's 4-bit types keep the output tensor at 6-8 bits)")
    args = ap.parse_args()
    bs = args.block_size
    if bs < 16 or bs & (bs - 1):
        print(f"onnx_quantize: --block-size {bs} is not a power of two of at least 16, which MatMulNBits needs",
              file=sys.stderr)
        return 2

    import onnx
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import (DefaultWeightOnlyQuantConfig, HQQWeightOnlyQuantConfig,
                                                                MatMulNBitsQuantizer)

    src_dir = os.path.dirname(os.path.abspath(args.src))
    os.makedirs(args.out, exist_ok=True)
    model = onnx.load(args.src)
    inits = {i.name: i for i in model.graph.initializer}
    padded = sorted({int(inits[n.input[1]].dims[0]) for n in model.graph.node
                     if n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2
                     and inits[n.input[1]].dims[0] % bs})

    heads = [n.name for n in model.graph.node if n.op_type == "MatMul" and "lm_head" in n.name]
    # Every layer's value and down projections (optimum's node names hold the module path).
    v_down = [n.name for n in model.graph.node
              if n.op_type == "MatMul" and ("/v_proj/" in n.name or "/down_proj/" in n.name)] if args.v_down_bits == 8 else []
    eight = (heads if args.lm_head_bits == 8 and not args.keep_lm_head else []) + v_down
    exclude = heads if args.keep_lm_head else []
    symmetric = args.method == "rtn" and not args.asymmetric
    if args.method == "hqq":
        config = HQQWeightOnlyQuantConfig(block_size=bs, bits=4, quant_format=QuantFormat.QOperator,
                                          op_types_to_quantize=("MatMul",))
    else:
        config = DefaultWeightOnlyQuantConfig(block_size=bs, is_symmetric=symmetric,
                                              quant_format=QuantFormat.QOperator, op_types_to_quantize=("MatMul",))
    quantizer = MatMulNBitsQuantizer(model, block_size=bs, is_symmetric=symmetric, nodes_to_exclude=exclude + eight,
                                     algo_config=config)
    quantizer.process()
    if eight:
        config8 = DefaultWeightOnlyQuantConfig(block_size=bs, is_symmetric=False, bits=8,
                                               quant_format=QuantFormat.QOperator, op_types_to_quantize=("MatMul",))
        quantizer = MatMulNBitsQuantizer(quantizer.model.model, bits=8, block_size=bs, is_symmetric=False,
                                         nodes_to_include=eight, algo_config=config8)
        quantizer.process()
    qmodel = quantizer.model.model

    name = os.path.basename(args.src)
    out_path = os.path.join(args.out, name)
    external = qmodel.ByteSize() > 1_800_000_000 if hasattr(qmodel, "ByteSize") else False
    quantizer.model.save_model_to_file(out_path, use_external_data_format=external)
    # The model's own files only: the export's folder is a cache entry, which also
    # holds edgepipe's step.log and result.json.
    for f in sorted(os.listdir(src_dir)):
        p = os.path.join(src_dir, f)
        if os.path.isfile(p) and (f.startswith("tokenizer") or f in ("config.json", "generation_config.json",
                                                                     "special_tokens_map.json", "vocab.json",
                                                                     "merges.txt", "chat_template.jinja")):
            shutil.copy2(p, os.path.join(args.out, f))

    qinits = {i.name for i in qmodel.graph.initializer}
    # What the output projection really became: MatMulNBits of some width, or a float MatMul
    # (kept, or tied: optimum exports a tied embedding's projection as a Transpose of the
    # Gather's table, no constant the quantizer can pack).
    head = next((n for n in qmodel.graph.node if "lm_head" in n.name and n.op_type in ("MatMul", "MatMulNBits")), None)
    head_bits, head_tied = None, False
    if head is not None and head.op_type == "MatMulNBits":
        head_bits = next(a.i for a in head.attribute if a.name == "bits")
    elif head is not None and head.op_type == "MatMul":
        head_bits, head_tied = 32, head.input[1] not in qinits
    nbits = sum(1 for n in qmodel.graph.node if n.op_type == "MatMulNBits")
    nbits8 = sum(1 for n in qmodel.graph.node if n.op_type == "MatMulNBits" and "lm_head" not in n.name
                 and any(a.name == "bits" and a.i == 8 for a in n.attribute))
    left = sum(1 for n in qmodel.graph.node if n.op_type == "MatMul" and n.input[1] in qinits)
    if nbits == 0:
        print("onnx_quantize: the quantizer produced no MatMulNBits node: the graph has no MatMul with constant weights",
              file=sys.stderr)
        return 1
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    edgepipe_report.emit(report(name, args.method, bs, symmetric, nbits, left, exclude, padded, size, head_bits, head_tied,
                                nbits8))
    return 0


def report(model, method, block_size, symmetric, nbits, left, kept, padded, size, head_bits, head_tied, nbits8):
    return {"model": model, "method": method, "block_size": block_size, "symmetric": symmetric, "matmulnbits": nbits,
            "matmul_float": left, "kept_fp32": kept, "padded_k": padded, "bytes": size,
            "lm_head_bits": head_bits, "lm_head_tied": head_tied, "eight_bit_layers": nbits8}


if __name__ == "__main__":
    sys.exit(main())
