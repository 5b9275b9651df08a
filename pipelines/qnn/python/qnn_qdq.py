"""Quantize an fp32 ONNX LLM graph to a QDQ model for Qualcomm's QNN HTP (Hexagon), with ONNX Runtime's QNN flow.

    python qnn_qdq.py --onnx model.onnx --tokenizer DIR --calibration text.txt --out DIR
                      --seq-len 256 [--samples 4] [--weight-type uint8|int4|uint4] [--activation-type uint16]

Steps (onnxruntime.quantization.execution_providers.qnn):
  1. fix every symbolic input dimension (onnxruntime.tools.onnx_model_utils, what
     `python -m onnxruntime.tools.make_dynamic_shape_fixed` does): batch -> 1, every other
     dimension -> --seq-len; HTP graphs have static shapes;
  2. the attention masks' -inf (or float-min) constants become --mask-value (-1000): a tensor
     holding -inf cannot be quantized (its scale is inf, its zero point NaN) and one holding
     -3.4e38 leaves 16 bits no resolution for the real scores; exp(-1000) is still exactly 0,
     so the fp32 graph computes the same;
  3. qnn_preprocess_model; the RMSNorm statistics chains (Pow, ReduceMean, Add, Sqrt, Div)
     are left unquantized (see rms_norm_nodes); (fuses LayerNorm/Gelu patterns QNN has ops for);
  4. calibration: --samples windows of --seq-len tokens from the calibration text, BOS first
     like the evaluation chunks;
  5. get_qnn_qdq_config(activation_type, weight_type, MinMax) and quantize(): QuantizeLinear /
     DequantizeLinear pairs around every op, 16-bit activations and 8- or 4-bit weights
     (per-tensor for MatMul, which QNN does not support per-channel; opsets below 21 get the
     com.microsoft Q/DQ ops for the 16- and 4-bit types).
The QDQ model runs on ONNX Runtime's CPU provider (onnx_validate.py scores it there) and is
what QNN EP, qnn-onnx-converter or Qualcomm AI Hub take to build a Hexagon context binary.

Its report is report() below (reports/qnn_qdq.json).
"""

import argparse
import os
import shutil
import sys
import tempfile

import edgepipe_env
import edgepipe_report
import edgepipe_threads
import ppl_scoring

TYPES = {"uint8": "QUInt8", "int8": "QInt8", "uint16": "QUInt16", "int16": "QInt16", "int4": "QInt4", "uint4": "QUInt4"}


def clamp_mask_constants(model, floor):
    """Replace -inf and values below floor in float Constant / ConstantOfShape tensors and initializers."""
    import numpy as np
    from onnx import numpy_helper

    count = 0
    for init in model.graph.initializer:
        if init.data_type != 1 or init.data_location == 1:
            continue
        v = numpy_helper.to_array(init)
        low = v < floor
        if v.size and v.size < 1 << 24 and low.any():
            init.CopyFrom(numpy_helper.from_array(np.where(low, np.float32(floor), v).astype(np.float32), init.name))
            count += 1
    for node in model.graph.node:
        if node.op_type not in ("Constant", "ConstantOfShape"):
            continue
        for attr in node.attribute:
            if attr.name != "value" or attr.t.data_type != 1:
                continue
            v = numpy_helper.to_array(attr.t)
            low = v < floor
            if v.size and low.any():
                v = np.where(low, np.float32(floor), v).astype(np.float32)
                attr.t.CopyFrom(numpy_helper.from_array(v, attr.t.name))
                count += 1
    return count


def fold_static_inputs(model, n, work):
    """The graph for exactly n tokens from position 0, unpadded: attention_mask (ones) and
    position_ids (0..n-1) become constants and ONNX Runtime's basic optimizations fold what
    depends on them (the causal mask, the rotary cos/sin tables), so the graph takes input_ids
    only. QNN's HTP backend refuses the rotary embedding's float MatMul of inv_freq by the
    positions (backendValidateOpConfig, error 3110); folded, it is a constant table.
    Returns (path of the folded model, names of the inputs made constant)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    values = {"attention_mask": np.ones((1, n), dtype=np.int64),
              "position_ids": np.arange(n, dtype=np.int64)[None, :]}
    folded = []
    for inp in list(model.graph.input):
        if inp.name in values:
            model.graph.input.remove(inp)
            model.graph.initializer.append(numpy_helper.from_array(values[inp.name], inp.name))
            folded.append(inp.name)
    src = os.path.join(work, "static.onnx")
    onnx.save_model(model, src)
    out = os.path.join(work, "folded.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = out
    ort.InferenceSession(src, sess_options=so, providers=["CPUExecutionProvider"])
    return out, folded


def fuse_rms_norms(model):
    """Replaces each RMSNorm chain, Pow(x, 2) -> ReduceMean -> Add(eps) -> Sqrt -> Div(1, .)
    -> Mul(x, .) (or Div(x, .)) [-> Cast] -> Mul(gamma, .), with one SimplifiedLayerNormalization(x, gamma)
    node, which QNN runs as its RmsNorm op. Left as separate float nodes, the HTP backend
    computes the chain in fp16, where the square of an activation outlier (over 256)
    overflows; quantized separately, 16 bits cannot hold a mean of squares spanning many
    orders of magnitude. Returns how many it fused."""
    from onnx import helper, numpy_helper

    consumers = {}
    for node in model.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    producers = {o: node for node in model.graph.node for o in node.output}
    inits = {i.name: i for i in model.graph.initializer}

    def const(name):
        if name in inits:
            return numpy_helper.to_array(inits[name])
        node = producers.get(name)
        if node is not None and node.op_type == "Constant":
            return numpy_helper.to_array(node.attribute[0].t)
        return None

    def only(name, *ops):
        nxt = consumers.get(name, [])
        return nxt[0] if len(nxt) == 1 and nxt[0].op_type in ops else None

    drop, add, fused = set(), {}, 0
    for rm in [n for n in model.graph.node if n.op_type == "ReduceMean"]:
        pw = producers.get(rm.input[0])
        if pw is None or pw.op_type != "Pow":
            continue
        x = pw.input[0]
        ad = only(rm.output[0], "Add")
        sq = ad and only(ad.output[0], "Sqrt")
        dv = sq and only(sq.output[0], "Div", "Reciprocal")
        if not dv:
            continue
        if dv.op_type == "Div" and dv.input[0] == x:
            # x / sqrt(...): ONNX Runtime's optimizer folds Div(1, .) -> Mul(x, .) into this.
            mx, chain = dv, [pw, rm, ad, sq, dv]
        else:
            mx = only(dv.output[0], "Mul")
            if not mx or x not in mx.input:
                continue
            chain = [pw, rm, ad, sq, dv, mx]
        eps = const(ad.input[1] if ad.input[0] == rm.output[0] else ad.input[0])
        nxt = only(mx.output[0], "Cast", "Mul")
        if nxt is not None and nxt.op_type == "Cast":
            chain.append(nxt)
            nxt = only(nxt.output[0], "Mul")
        if nxt is None or eps is None:
            continue
        gamma = [i for i in nxt.input if i in inits]
        if len(gamma) != 1:
            continue
        chain.append(nxt)
        node = helper.make_node("SimplifiedLayerNormalization", [x, gamma[0]], [nxt.output[0]],
                                name=rm.name.rsplit("/", 1)[0] + "/SimplifiedLayerNormalization",
                                axis=-1, epsilon=float(eps.reshape(-1)[0]), stash_type=1)
        add[pw.name] = node
        drop.update(n.name for n in chain)
        fused += 1
    nodes = []
    for node in model.graph.node:
        if node.name in add:
            nodes.append(add[node.name])
        if node.name not in drop:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return fused


def matmuls_as_convs(model, n):
    """Rewrites each MatMul of an activation [1, n, K] by a weight initializer [K, N] as
    Reshape [1, 1, n, K] -> Transpose to [1, K, 1, n] -> Conv (weight [N, K, 1, 1]) -> Transpose
    -> Reshape [1, n, N]: the same product, with the tokens as the image's width (QNN's NHWC
    layout cancels both Transposes). With the tokens as the batch instead ([n, K, 1, 1], no
    Transposes) the HTP backend had not compiled the W8A16 graph after 20 minutes; this form
    compiled in 64 s. QNN takes per-channel weights only on Conv (ONNX Runtime's
    QNN config quantizes MatMul weights per tensor, which at 4 bits breaks an LLM), so this is
    the form in which the HTP backend gets one scale per output channel.
    Returns the names of the new Conv weights."""
    import numpy as np
    from onnx import helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    nodes, weights, done = [], [], {}
    for node in model.graph.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is None or len(w.dims) != 2 or node.input[0] in inits:
            nodes.append(node)
            continue
        k, out_ch = w.dims
        cname = done.get(w.name)
        if cname is None:
            cname = w.name + "_conv"
            arr = numpy_helper.to_array(w).T.reshape(out_ch, k, 1, 1).copy()
            model.graph.initializer.append(numpy_helper.from_array(arr, cname))
            done[w.name] = cname
            weights.append(cname)
        base = node.name or node.output[0]
        s_in, s_out = base + "/conv_in_shape", base + "/conv_out_shape"
        y4 = base + "/conv_out"
        # [1, n, K] -> [1, 1, n, K] (NHWC) -> [1, K, 1, n] (NCHW), and back: the tokens are
        # the image's width, and QNN's NHWC layout cancels both Transposes.
        model.graph.initializer.append(numpy_helper.from_array(np.array([1, 1, n, k], dtype=np.int64), s_in))
        model.graph.initializer.append(numpy_helper.from_array(np.array([1, n, out_ch], dtype=np.int64), s_out))
        xh, xc, yc = base + "/conv_in_nhwc", base + "/conv_in_nchw", base + "/conv_out_nhwc"
        nodes.append(helper.make_node("Reshape", [node.input[0], s_in], [xh], name=base + "/ReshapeIn"))
        nodes.append(helper.make_node("Transpose", [xh], [xc], name=base + "/TransposeIn", perm=[0, 3, 1, 2]))
        nodes.append(helper.make_node("Conv", [xc, cname], [y4], name=base + "/Conv", kernel_shape=[1, 1]))
        nodes.append(helper.make_node("Transpose", [y4], [yc], name=base + "/TransposeOut", perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("Reshape", [yc, s_out], [node.output[0]], name=base + "/ReshapeOut"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {i for node in model.graph.node for i in node.input}
    keep = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    return weights


def rms_norm_nodes(model):
    """Names of the nodes of each RMSNorm's statistics chain: Pow(x, 2) -> ReduceMean -> Add(eps)
    -> Sqrt -> Div/Reciprocal. A mean of squares spans many orders of magnitude across tokens
    (the model's activation outliers square to 1e5 and more), so one 16-bit scale per tensor
    rounds every small token's statistic to 0 or one step and its normalization blows up;
    these nodes stay in float (QNN runs RMSNorm as one op, SimplifiedLayerNormalization,
    when a runtime fuses it)."""
    consumers = {}
    for node in model.graph.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    producers = {o: node for node in model.graph.node for o in node.output}
    chain = set()
    for node in model.graph.node:
        if node.op_type != "ReduceMean":
            continue
        pw = producers.get(node.input[0])
        if pw is None or pw.op_type != "Pow":
            continue
        chain.update([pw.name, node.name])
        frontier = [node]
        for want in (("Add",), ("Sqrt",), ("Div", "Reciprocal")):
            nxt = [c for n in frontier for o in n.output for c in consumers.get(o, []) if c.op_type in want]
            chain.update(c.name for c in nxt)
            frontier = nxt
    return sorted(chain)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True, help="fp32 ONNX model without KV cache inputs (onnx_export.py --no-past)")
    ap.add_argument("--tokenizer", required=True, help="folder with the tokenizer (the Hugging Face checkpoint)")
    ap.add_argument("--calibration", required=True, help="UTF-8 calibration text")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--seq-len", type=int, required=True, help="the static sequence length")
    ap.add_argument("--samples", type=int, default=4, help="calibration windows of --seq-len tokens")
    ap.add_argument("--weight-type", choices=sorted(TYPES), default="uint8")
    ap.add_argument("--activation-type", choices=sorted(TYPES), default="uint16")
    ap.add_argument("--static-inputs", action="store_true",
                    help="make attention_mask and position_ids constants and fold them (QNN HTP backend)")
    ap.add_argument("--per-channel", action="store_true",
                    help="MatMul weights per output channel, as 1x1 Convs (QNN HTP backend); the output "
                         "projection (lm_head) and the embedding table stay at 8 bits")
    ap.add_argument("--mask-value", type=float, default=-1000.0,
                    help="replaces -inf and values below it in constant tensors (attention masks)")
    args = ap.parse_args()
    if args.seq_len < 2 or args.samples < 1:
        print("qnn_qdq: --seq-len must be at least 2 and --samples at least 1", file=sys.stderr)
        return 2

    edgepipe_env.offline()

    import numpy as np
    import onnx
    import onnx.version_converter
    import onnxruntime
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config, qnn_preprocess_model
    from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_dim_param_fixed
    from transformers import AutoTokenizer

    edgepipe_threads.limit_onnxruntime(onnxruntime)

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    with open(args.calibration, encoding="utf-8") as f:
        text = f.read()
    # Tokenized as every scorer does (ppl_scoring.py); the windows start at the text's
    # first token, and each gets BOS as its first input, as a scored chunk does.
    tokens, add_bos, bos = ppl_scoring.tokenize(tokenizer, text)
    if add_bos:
        tokens = tokens[1:]
    n = args.seq_len
    if len(tokens) < args.samples * n:
        print(f"qnn_qdq: the calibration text has {len(tokens)} tokens, fewer than --samples {args.samples} x "
              f"--seq-len {n}", file=sys.stderr)
        return 2

    model = onnx.load(args.onnx)
    names = set()
    for inp in model.graph.input:
        for i, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.dim_param:
                names.add((d.dim_param, i))
    for name, axis in sorted(names):
        make_dim_param_fixed(model.graph, name, 1 if axis == 0 or "batch" in name else n)
    fix_output_shapes(model)
    past = [i.name for i in model.graph.input if i.name.startswith("past_key_values.")]
    if past:
        print("qnn_qdq: the graph has KV-cache inputs; export it without them (onnx_export.py --no-past)", file=sys.stderr)
        return 2

    work = tempfile.mkdtemp(prefix="qnn_qdq-")
    try:
        folded = []
        if args.static_inputs:
            path, folded = fold_static_inputs(model, n, work)
            model = onnx.load(path)
        masked = clamp_mask_constants(model, args.mask_value)
        rms = 0
        if args.static_inputs:
            # The quantizer moves models to opset 21 (16-bit Q/DQ) with ONNX's version
            # converter, which does not know SimplifiedLayerNormalization: convert first.
            opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
            if opset < 21:
                model = onnx.version_converter.convert_version(model, 21)
            rms = fuse_rms_norms(model)
        convs = matmuls_as_convs(model, n) if args.per_channel else []
        overrides = {}
        for node in model.graph.node:
            if node.op_type == "SimplifiedLayerNormalization":
                # The RMSNorm scales (gamma) at 8 bits, whatever the weights' type.
                overrides[node.input[1]] = [{"quant_type": QuantType.QUInt8}]
        if convs:
            # The output projection (the last Conv: lm_head, whose 49K rows are the embedding
            # table's) and the embedding table Gather reads keep 8 bits: every logit and every
            # input token goes through them.
            overrides[convs[-1]] = [{"quant_type": QuantType.QInt8, "axis": 0, "symmetric": True}]
            for node in model.graph.node:
                if node.op_type == "Gather" and node.input[0] in {i.name for i in model.graph.initializer}:
                    overrides[node.input[0]] = [{"quant_type": QuantType.QUInt8}]
        fixed = os.path.join(work, "fixed.onnx")
        onnx.save_model(model, fixed)
        del model
        prep = os.path.join(work, "preprocessed.onnx")
        preprocessed = qnn_preprocess_model(fixed, prep, fuse_layernorm=True)
        src = prep if preprocessed else fixed

        input_names = [i.name for i in onnx.load(src, load_external_data=False).graph.input]

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.i = 0

            def get_next(self):
                if self.i >= args.samples:
                    return None
                window = list(tokens[self.i * n:(self.i + 1) * n])
                if add_bos:
                    window[0] = bos
                self.i += 1
                feeds = {"input_ids": np.array([window], dtype=np.int64),
                         "attention_mask": np.ones((1, n), dtype=np.int64),
                         "position_ids": np.arange(n, dtype=np.int64)[None, :]}
                return {k: v for k, v in feeds.items() if k in input_names}

        float_nodes = rms_norm_nodes(onnx.load(src, load_external_data=False))
        config = get_qnn_qdq_config(src, Reader(), activation_type=getattr(QuantType, TYPES[args.activation_type]),
                                    weight_type=getattr(QuantType, TYPES[args.weight_type]),
                                    per_channel=bool(convs), init_overrides=overrides or None,
                                    nodes_to_exclude=float_nodes)
        os.makedirs(args.out, exist_ok=True)
        out_model = os.path.join(args.out, "model.onnx")
        quantize(src, out_model, config)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for f in sorted(os.listdir(args.tokenizer)):
        p = os.path.join(args.tokenizer, f)
        if os.path.isfile(p) and (f.startswith("tokenizer") or f in ("config.json", "generation_config.json",
                                                                     "special_tokens_map.json", "vocab.json",
                                                                     "merges.txt", "chat_template.jinja")):
            shutil.copy2(p, os.path.join(args.out, f))
    q = onnx.load(out_model, load_external_data=False)
    ops = [node.op_type for node in q.graph.node]
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    edgepipe_report.emit(report("model.onnx", n, args.samples, args.weight_type, args.activation_type,
                                ops.count("QuantizeLinear"), ops.count("DequantizeLinear"), bool(preprocessed), masked,
                                len(float_nodes), folded, len(convs), rms, size))
    return 0


def report(model, seq_len, samples, weight_type, activation_type, quantize, dequantize, preprocessed, masked, float_nodes,
           folded, convs, rms, size):
    return {"model": model, "seq_len": seq_len, "samples": samples, "weight_type": weight_type,
            "activation_type": activation_type, "quantize_linear": quantize, "dequantize_linear": dequantize,
            "preprocessed": preprocessed, "mask_constants": masked, "float_nodes": float_nodes, "static_inputs": folded,
            "per_channel_convs": convs, "rms_norms": rms, "bytes": size}


if __name__ == "__main__":
    sys.exit(main())
