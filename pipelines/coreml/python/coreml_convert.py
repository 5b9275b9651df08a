"""Convert a Hugging Face causal LM to a Core ML ML program with INT4 per-block weights.

    python coreml_convert.py --model DIR --out OUT.mlpackage --context N [--block-size 32]
                             [--mode affine|symmetric] [--quantize-embeddings] [--v-down-bits 4|8]

Steps (coremltools 9.0):
  * load the checkpoint in float32 with eager attention (the traceable path);
  * with --kv-cache stateful (the default), wrap it so the KV cache lives in registered
    buffers that Core ML turns into model state (ct.StateType, iOS 18): inputs input_ids
    [1, 1..N] and causal_mask [1, 1, q, end] (0 where a query may attend, a large
    negative number where not), states key_cache / value_cache [layers, 1, kv_heads, N,
    head_dim]; if tracing or converting that fails, or with --kv-cache none, convert a
    fixed-shape model instead: input_ids [1, N] and causal_mask [1, 1, N, N] -> logits
    [1, N, vocab], no cache (the result line says which, and why);
  * a model with sliding-window attention layers (Gemma 3: every layer of
    config.layer_types that is "sliding_attention" sees only the last sliding_window
    tokens) gets a second mask input of the causal mask's shape, sliding_mask, which the
    caller builds like causal_mask but also masks keys sliding_window or more positions
    behind the query; the sliding layers read it, the others causal_mask. Without it the
    exported graph would let those layers attend to the whole context, which is a
    different model past the window;
  * ct.convert to an ML program, minimum_deployment_target iOS18, FP16 compute;
  * 4-bit weights per block of --block-size along the input axis, through coremltools'
    linear_quantize_weights graph pass (OpLinearQuantizerConfig, granularity per_block):
      --mode affine (the default): uint4 codes 0..15, an fp16 scale and an fp16 offset per
        block fitted to the block's min and max (w = scale * (q - offset)), stored as
        constexpr_blockwise_shift_scale, whose offset may be fp16 (iOS 18). coremltools'
        own mode="linear" rounds the offset to an integer code, which shifts every block's
        grid by up to half a step; the float offset is how llama.cpp's Q4_1 and HQQ
        store it;
      --mode symmetric: coremltools' mode="linear_symmetric", codes -7..7 and a scale;
    with --v-down-bits 8, every layer's v_proj and down_proj get 8 bits on the same layout
    (uint8 codes with an fp16 scale and offset per block, or int8 -127..127 and a scale),
    as llama.cpp's Q4_K_M gives attn_v and ffn_down more bits: on Gemma 3 270M, whose
    checkpoint holds Q5_0 and Q6_K blocks that a 4-bit grid cannot represent, that took
    perplexity from +5.31 to +1.14 (8 x 256 tokens) for about 11 MB;
    the token embedding and the output projection (any weight with a vocabulary-sized
    axis) stay fp16 unless --quantize-embeddings;
  * save the .mlpackage, then make it reproducible: coremltools names the package's items
    by random UUIDs (Manifest.json), serializes the spec's metadata map in hash order and
    records the conversion date; the items get UUIDs derived from their paths, the spec is
    re-serialized deterministically without the date, and the script runs with a fixed
    PYTHONHASHSEED (it re-executes itself with PYTHONHASHSEED=0), so the same checkpoint
    gives the same bytes. The weights are not touched.

Its report is report() below (reports/coreml_convert.json): which KV cache the package has and
why, its inputs and outputs, the weights kept fp16, how many got 8 bits, the versions.
"""

import argparse
import json
import os
import re
import sys
import time
import traceback

import edgepipe_env
import edgepipe_report


def normalize_package(path):
    """Make a saved .mlpackage a function of the model alone (see the module doc)."""
    import uuid
    from coremltools.proto import Model_pb2

    manifest_path = os.path.join(path, "Manifest.json")
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    renamed = {}
    for old, item in manifest.get("itemInfoEntries", {}).items():
        renamed[old] = str(uuid.uuid5(uuid.NAMESPACE_URL, "edgepipe-coreml:" + item["path"])).upper()
    manifest["itemInfoEntries"] = {renamed[k]: v for k, v in sorted(manifest["itemInfoEntries"].items(),
                                                                    key=lambda kv: renamed[kv[0]])}
    if manifest.get("rootModelIdentifier") in renamed:
        manifest["rootModelIdentifier"] = renamed[manifest["rootModelIdentifier"]]
    with open(manifest_path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=4, sort_keys=True)
        f.write("\n")

    root = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]["path"]
    spec_path = os.path.join(path, "Data", root)
    spec = Model_pb2.Model()
    with open(spec_path, "rb") as f:
        spec.ParseFromString(f.read())
    meta = spec.description.metadata.userDefined
    if "com.github.apple.coremltools.conversion_date" in meta:
        del meta["com.github.apple.coremltools.conversion_date"]
    with open(spec_path, "wb") as f:
        f.write(spec.SerializeToString(deterministic=True))


def load_model(path):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    model.config.use_cache = False
    return model


def sliding_window(model, n_ctx):
    """The window of the model's sliding-attention layers if it has any and the context
    reaches past it, else None."""
    cfg = model.config
    window = getattr(cfg, "sliding_window", None)
    if not window or "sliding_attention" not in (getattr(cfg, "layer_types", None) or []):
        return None
    return int(window) if n_ctx > int(window) else None


def masks(causal_mask, sliding_mask):
    """What the model's attention_mask argument gets: one mask, or the per-layer-type
    mapping transformers' sliding-window models (Gemma 3) accept instead."""
    if sliding_mask is None:
        return causal_mask
    return {"full_attention": causal_mask, "sliding_attention": sliding_mask}


def fixed_shape(model, n_ctx):
    """A model with no cache: every call scores a whole window of n_ctx tokens.

    The causal mask is an input, as in the stateful model: built inside the graph it
    would be folded into a [n_ctx, n_ctx] constant that the weight quantizer then
    quantizes like a weight.
    """
    import numpy as np
    import torch
    import coremltools as ct

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, causal_mask, sliding_mask=None):
            return self.m(input_ids=input_ids, attention_mask=masks(causal_mask, sliding_mask),
                          use_cache=False, return_dict=False)[0]

    ids = torch.zeros((1, n_ctx), dtype=torch.int32)
    mask = torch.zeros((1, 1, n_ctx, n_ctx), dtype=torch.float32)
    example = [ids, mask]
    inputs = [ct.TensorType(name="input_ids", shape=(1, n_ctx), dtype=np.int32),
              ct.TensorType(name="causal_mask", shape=(1, 1, n_ctx, n_ctx), dtype=np.float16)]
    if sliding_window(model, n_ctx):
        example.append(mask.clone())
        inputs.append(ct.TensorType(name="sliding_mask", shape=(1, 1, n_ctx, n_ctx), dtype=np.float16))
    with torch.no_grad():
        traced = torch.jit.trace(Logits(model).eval(), example, check_trace=False)
    return ct.convert(
        traced,
        inputs=inputs,
        outputs=[ct.TensorType(name="logits", dtype=np.float16)],
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.iOS18,
        compute_precision=ct.precision.FLOAT16,
        skip_model_load=True,
    )


def stateful(model, n_ctx):
    """Apple's stateful-KV pattern: the cache is two buffers updated in place by slicing."""
    import numpy as np
    import torch
    import coremltools as ct
    from transformers.cache_utils import Cache

    cfg = model.config
    layers = cfg.num_hidden_layers
    kv_heads = cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    shape = (layers, 1, kv_heads, n_ctx, head_dim)

    class SliceUpdateCache(Cache):
        """Writes each layer's new keys and values into fixed buffers at [begin, end)."""

        is_compileable = False

        def __init__(self, k, v):
            self.k, self.v = k, v
            self.begin = 0
            self.layers = []

        def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
            end = self.begin + key_states.shape[-2]
            self.k[layer_idx, :, :, self.begin:end, :] = key_states
            self.v[layer_idx, :, :, self.begin:end, :] = value_states
            return self.k[layer_idx, :, :, :end, :], self.v[layer_idx, :, :, :end, :]

        def get_seq_length(self, layer_idx=0):
            return self.begin

        def get_mask_sizes(self, cache_position, layer_idx=0):
            return self.begin + cache_position.shape[0], 0

        @property
        def is_sliding(self):
            return [False] * layers

    class Wrapper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m
            # float32 like the traced model; Core ML keeps the state in fp16.
            self.register_buffer("key_cache", torch.zeros(shape, dtype=torch.float32))
            self.register_buffer("value_cache", torch.zeros(shape, dtype=torch.float32))

        def forward(self, input_ids, causal_mask, sliding_mask=None):
            q = input_ids.shape[-1]
            end = causal_mask.shape[-1]
            cache = SliceUpdateCache(self.key_cache, self.value_cache)
            cache.begin = end - q
            position_ids = torch.arange(end - q, end, dtype=torch.long).unsqueeze(0)
            out = self.m(input_ids=input_ids, attention_mask=masks(causal_mask, sliding_mask),
                         position_ids=position_ids, past_key_values=cache, use_cache=True, return_dict=False)
            return out[0]

    wrapper = Wrapper(model).eval()
    ids = torch.zeros((1, 2), dtype=torch.int32)
    mask = torch.zeros((1, 1, 2, 5), dtype=torch.float32)
    q = ct.RangeDim(lower_bound=1, upper_bound=n_ctx, default=1)
    end = ct.RangeDim(lower_bound=1, upper_bound=n_ctx, default=1)
    example = [ids, mask]
    inputs = [ct.TensorType(name="input_ids", shape=(1, q), dtype=np.int32),
              ct.TensorType(name="causal_mask", shape=(1, 1, q, end), dtype=np.float16)]
    if sliding_window(model, n_ctx):
        example.append(mask.clone())
        inputs.append(ct.TensorType(name="sliding_mask", shape=(1, 1, q, end), dtype=np.float16))
    with torch.no_grad():
        traced = torch.jit.trace(wrapper, example, check_trace=False)
    return ct.convert(
        traced,
        inputs=inputs,
        outputs=[ct.TensorType(name="logits", dtype=np.float16)],
        states=[ct.StateType(wrapped_type=ct.TensorType(shape=shape, dtype=np.float16), name="key_cache"),
                ct.StateType(wrapped_type=ct.TensorType(shape=shape, dtype=np.float16), name="value_cache")],
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.iOS18,
        compute_precision=ct.precision.FLOAT16,
        skip_model_load=True,
    )


# The const ops of every layer's value and down projections: the MIL names carry the
# torch module path with dots turned into underscores (model_layers_3_mlp_down_proj_weight...).
V_DOWN = re.compile(r"(?:^|_)(?:v_proj|down_proj)_weight")


# coremltools' OpLinearQuantizerConfig quantizes a weight only when it has more elements than
# this (its default, stated here so the validator's "large float weight" is the same number).
WEIGHT_THRESHOLD = 2048


def quantize(mlmodel, mode, block_size, keep_vocab, v_down_bits=4):
    """Quantizes mlmodel's weights per block: 4 bits, or v_down_bits for the value and down
    projections; weights with an axis of keep_vocab elements (None: none) stay fp16. Returns
    the model, the names of the weights kept and the names of the 8-bit ones."""
    import numpy as np
    import coremltools.optimize as cto
    from coremltools.converters.mil.mil import types
    from coremltools.models import utils as model_utils
    from coremltools.optimize import _utils as optimize_utils
    from coremltools.optimize.coreml._quantization_passes import linear_quantize_weights

    kept, eight = [], []
    # The width of the op being compressed: transform_op sets it, the classmethod below reads it.
    current = {"bits": 4}

    class Pass(linear_quantize_weights):
        def transform_op(self, op):
            val = op.outputs[0].val
            if keep_vocab and isinstance(val, np.ndarray) and keep_vocab in val.shape:
                if val.size > WEIGHT_THRESHOLD:
                    kept.append(op.name)
                return
            current["bits"] = 8 if v_down_bits == 8 and V_DOWN.search(op.name) else 4
            if current["bits"] == 8 and isinstance(val, np.ndarray) and val.size > WEIGHT_THRESHOLD:
                eight.append(op.name)
            super().transform_op(op)

        @classmethod
        def blockwise_compress_by_dtype(cls, original_data, dtype, quant_mode, block_sizes):
            if mode != "affine":
                if current["bits"] == 8:
                    dtype = types.int8
                return super().blockwise_compress_by_dtype(original_data, dtype, quant_mode, block_sizes)
            return affine_float_offset(original_data, block_sizes, current["bits"], np, types, optimize_utils)

    config = cto.coreml.OptimizationConfig(global_config=cto.coreml.OpLinearQuantizerConfig(
        mode="linear" if mode == "affine" else "linear_symmetric",
        dtype="uint4" if mode == "affine" else "int4", granularity="per_block", block_size=block_size,
        weight_threshold=WEIGHT_THRESHOLD))
    return model_utils._apply_graph_pass(mlmodel, Pass(config=config)), kept, eight


def affine_float_offset(w, block_sizes, bits, np, types, optimize_utils):
    """uint codes of the given width with an fp16 scale and fp16 offset per block:
    w ~ scale * (q - offset). None (the weight stays float) when a block size does not
    divide its axis."""
    top = (1 << bits) - 1
    shape, scale_shape, reduce = [], [], []
    for dim, b in zip(w.shape, block_sizes):
        if b > 0:
            if dim % b:
                return None
            shape += [dim // b, b]
            scale_shape.append(dim // b)
            reduce.append(len(shape) - 1)
        else:
            shape.append(dim)
            scale_shape.append(1)
            reduce.append(len(shape) - 1)
    blocks = w.astype(np.float32).reshape(shape)
    lo = blocks.min(axis=tuple(reduce), keepdims=True)
    hi = blocks.max(axis=tuple(reduce), keepdims=True)
    scale = ((hi - lo) / top).astype(np.float16)
    scale = np.where(scale == 0, np.float16(1), scale)  # a constant block: q = offset
    s = scale.astype(np.float32)
    offset = (-lo / s).astype(np.float16)
    q = np.clip(np.round(blocks / s + offset.astype(np.float32)), 0, top)
    np_uint = types.nptype_from_builtin(types.uint4 if bits == 4 else types.uint8)
    return optimize_utils.QuantParams(data=q.reshape(w.shape).astype(np_uint), scale=scale.reshape(scale_shape),
                                      offset=offset.reshape(scale_shape), nbits=np.uint8(bits))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--out", required=True, help="output .mlpackage path")
    ap.add_argument("--context", type=int, required=True, help="context length the package is built for")
    ap.add_argument("--block-size", type=int, default=32, help="weights per INT4 scale")
    ap.add_argument("--mode", choices=["affine", "symmetric"], default="affine")
    ap.add_argument("--v-down-bits", type=int, choices=(4, 8), default=4,
                    help="bits of every layer's v_proj and down_proj (8: uint8/int8 codes on the same layout)")
    ap.add_argument("--quantize-embeddings", action="store_true",
                    help="also quantize weights with a vocabulary-sized axis (embedding, lm_head)")
    ap.add_argument("--kv-cache", choices=["stateful", "none"], default="stateful")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.context < 2:
        print("coreml_convert: --context must be at least 2", file=sys.stderr)
        return 2

    if os.environ.get("PYTHONHASHSEED") != "0":
        # coremltools walks sets while it names and orders ops: fix the hash seed so two
        # conversions of one checkpoint write the same graph.
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    edgepipe_env.offline()
    import torch
    import coremltools as ct

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    model = load_model(args.model)

    start = time.monotonic()
    kv, reason = "none", "asked for a fixed-shape model (--kv-cache none)"
    mlmodel = None
    if args.kv_cache == "stateful":
        try:
            mlmodel = stateful(model, args.context)
            kv, reason = "stateful", "KV cache as Core ML state (iOS 18), written in place by slice updates"
        except Exception as e:  # noqa: BLE001 - any failure falls back, and is reported
            traceback.print_exc()
            reason = f"stateful conversion failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); fixed-shape model instead"
            print(f"coreml_convert: {reason}", file=sys.stderr, flush=True)
            model = load_model(args.model)
    if mlmodel is None:
        mlmodel = fixed_shape(model, args.context)
    convert_s = time.monotonic() - start

    start = time.monotonic()
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    mlmodel, kept, eight = quantize(mlmodel, args.mode, args.block_size, None if args.quantize_embeddings else vocab,
                                    args.v_down_bits)
    if args.v_down_bits == 8 and not eight:
        print("coreml_convert: --v-down-bits 8, but no weight is named like a v_proj or down_proj "
              "(the model's layers are named otherwise): every weight stays 4-bit", file=sys.stderr, flush=True)
    quantize_s = time.monotonic() - start
    window = sliding_window(model, args.context)
    if window:
        mlmodel.user_defined_metadata["sliding_window"] = str(window)
    mlmodel.short_description = (f"{os.path.basename(os.path.normpath(args.model))}: INT4 {args.mode} per-block "
                                 f"({args.block_size}) weights{', v/down 8-bit' if eight else ''}, FP16 compute, context {args.context}")
    mlmodel.save(args.out)
    normalize_package(args.out)

    spec = mlmodel.get_spec()
    edgepipe_report.emit(report(kv, reason, args.context, [i.name for i in spec.description.input],
                                [o.name for o in spec.description.output], convert_s, quantize_s, args.mode, kept,
                                len(eight), window, ct.__version__, torch.__version__.split("+")[0]))
    return 0


def report(kv, reason, context, inputs, outputs, convert_s, quantize_s, mode, kept, eight_bit, window, coremltools,
           torch):
    """window: the sliding-attention window the package masks for, None without one."""
    return {"kv_cache": kv, "kv_cache_reason": reason, "context": context, "inputs": inputs, "outputs": outputs,
            "convert_s": round(convert_s, 2), "quantize_s": round(quantize_s, 2), "mode": mode, "kept_fp16": kept,
            "eight_bit": eight_bit, "sliding_window": window, "coremltools": coremltools, "torch": torch}


if __name__ == "__main__":
    sys.exit(main())
