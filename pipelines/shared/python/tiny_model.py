"""Build a tiny model of one common architecture from its transformers config class.

    python tiny_model.py --arch llama --tokenizer TOKENIZER_DIR --text calibration.txt --out DIR

The built-in models builtin:tiny-ARCH (ARCHS below) test conversion mechanics and numerics,
not quality: each has a real tokenizer (copied from TOKENIZER_DIR: SmolLM2's, or Gemma 3's
for tiny-gemma3), the architecture's features at a tiny size (>= 4 layers, grouped-query
attention, head_dim 16, max_position_embeddings 4096; ARCHS lists the rest), and weights made
here, never downloaded or trained.

Bit-identical on every host: every weight is an integer of at most 256 in magnitude times a
power of two, (base + k) * 2**-e. k comes from SplitMix64 over the tensor's index, seeded by
a SHA-256 of the architecture and the tensor's name; the integer is converted to float and
scaled by ldexp, both exact. No floating-point rounding, random-number library, BLAS, SIMD
path, thread count or libm is involved, so the bytes depend only on this script, the
tokenizer and the text. Such values are exact in float32, float16 and bfloat16 alike: a
conversion to any of the three loses nothing in the weights.

Not degenerate, not trained: the text's token counts (an integer log2, exact) go into one
hidden dimension of the output embedding, a channel the random layers leave alone, so the
model predicts like a unigram model of the text plus context-dependent noise from its layers:
perplexity a tenth of the vocabulary's size or less on the built-in evaluation text (a
uniform guess scores the vocabulary's size), greedy generations of frequent tokens. The
attention is peaked (q and k four times the variance-preserving scale, or q/k norms of 1.75),
so that the logits depend on it far more than on 8-bit rounding: a conversion that breaks
attention cannot hide in quantization noise.

The script then loads the checkpoint back with transformers (strictly: no missing, unexpected
or mismatched tensor) and checks that the logits are finite. Its report is report() below
(reports/tiny_model.json).
"""

import argparse
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

import edgepipe_env
import edgepipe_report

SEED = "edgepipe tiny models v1"

# The shape every architecture shares (Gemma's vocabulary is 5x larger: its width is halved).
HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 64, 128, 4, 4, 2, 16
MAX_POSITIONS = 4096
# A window smaller than any evaluation context, so a runtime that ignores it is caught.
WINDOW = 64

# name -> the final norm's gain on the unigram channel (set so that perplexity is near its
# lowest while the predictions still vary with the context), the config class, the tokenizer
# source, the stored dtype, the config's settings and the features they exercise.
ARCHS = {
    "llama": dict(gain=1.0, config="LlamaConfig", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=False, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
        head_dim=HEAD_DIM),
        features=["gqa", "untied-embeddings", "llama3-rope-scaling"]),
    "qwen2": dict(gain=1.5, config="Qwen2Config", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=True, rope_theta=1000000.0, use_sliding_window=False),
        features=["gqa", "tied-embeddings", "qkv-bias"]),
    "qwen3": dict(gain=1.5, config="Qwen3Config", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=True, rope_theta=1000000.0, head_dim=HEAD_DIM, use_sliding_window=False),
        features=["gqa", "tied-embeddings", "qk-norm"]),
    # Gemma 3's layout: five sliding-window layers, then a global one (llama.cpp assumes
    # that pattern), query_pre_attn_scalar = head_dim as in the 270M and 1B models.
    "gemma3": dict(gain=2.5, config="Gemma3TextConfig", tokenizer="gemma3", dtype="bfloat16", settings=dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_key_value_heads=1,
        head_dim=HEAD_DIM, query_pre_attn_scalar=HEAD_DIM, sliding_window=WINDOW,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True),
        features=["mqa", "tied-embeddings", "qk-norm", "sliding-window", "sandwich-norms",
                  "embedding-scale", "gelu-tanh"]),
    "phi3": dict(gain=1.0, config="Phi3Config", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=False, original_max_position_embeddings=MAX_POSITIONS),
        features=["gqa", "untied-embeddings", "fused-qkv", "fused-gate-up"]),
    "mistral": dict(gain=1.0, config="MistralConfig", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=False, head_dim=HEAD_DIM, sliding_window=WINDOW),
        features=["gqa", "untied-embeddings", "sliding-window"]),
    "qwen3-moe": dict(gain=1.0, config="Qwen3MoeConfig", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=False, rope_theta=1000000.0, head_dim=HEAD_DIM, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=64, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], use_sliding_window=False),
        features=["gqa", "untied-embeddings", "qk-norm", "moe-4-experts-top-2"]),
    "mixtral": dict(gain=1.0, config="MixtralConfig", tokenizer="smollm2", dtype="float32", settings=dict(
        tie_word_embeddings=False, head_dim=HEAD_DIM, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=None),
        features=["gqa", "untied-embeddings", "moe-4-experts-top-2"]),
}

# Weights by role: (base, spread, exponent): (base + k) * 2**-exponent, k uniform in
# [-spread, spread]. Layers read their input through a norm, so only the ratio of what each
# layer adds to the embedding matters: projections into the residual stream are small.
ROLES = {
    "embed": (0, 256, 10),      # std 0.14
    "head": (0, 256, 10),       # untied output embedding
    "in_proj": (0, 256, 10),    # v, gate, up: std 0.14, variance-preserving at width 64
    "qk": (0, 256, 8),          # q, k: std 0.58, attention peaked on a few positions
    "out_proj": (0, 256, 14),   # o, down: std 0.009
    "bias": (0, 256, 12),
    "router": (0, 256, 8),      # router logits std ~4: tokens go to different experts
    "norm": (128, 16, 7),       # 1 +- 0.125
    "norm_zero": (0, 16, 7),    # Gemma's norms scale by 1 + w: w = 0 +- 0.125
    "head_norm": (224, 32, 7),  # q and k norms: 1.75 +- 0.25, attention as peaked as above
    "head_norm_zero": (96, 32, 7),
}

# The unigram channel, hidden dimension 0: the layers barely read it (their norms weigh it
# by 2**-7) or write it (their output projections' row 0 is 2**-QUIET as large as the rest),
# so it reaches the final norm as the embedding put it there, where the architecture's gain
# weighs it. The output embedding's column 0 holds each token's count n in the text: an
# integer log2 of n + 1 (16 steps per octave) plus a bonus for having been seen at all.
# Untied, every token's input embedding carries UNTIED_INPUT there. Tied, the column is both:
# a large common part (TIED_BASE) keeps the final norm's scale of it steady whatever the
# current token, the counts (halved) sit on top.
UNIGRAM_DIM, UNIGRAM_BASE, UNIGRAM_SEEN_BONUS, UNIGRAM_EXPONENT = 0, 16, 48, 8
TIED_BASE, TIED_SHIFT, TIED_EXPONENT = 128, 1, 7
UNTIED_INPUT, QUIET = 2, 8
# Gemma's post-attention and post-MLP norms set what each layer adds: 1 + w = 0.25 +- 0.125.
GEMMA_POST_BASE = -96

IN_PROJ = ("v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj", "w1", "w3")
OUT_PROJ = ("o_proj", "down_proj", "w2")
NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
         "post_feedforward_layernorm")
HEAD_NORMS = ("q_norm", "k_norm")

MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors")


def role_of(name, gemma):
    """The role of a tensor, by its name; a tensor no rule knows is an error, so a new
    transformers that adds one fails here rather than leaving it uninitialised."""
    parts = name.split(".")
    module, kind = parts[-2], parts[-1]
    if name == "model.embed_tokens.weight":
        return "embed"
    if name == "lm_head.weight":
        return "head"
    if name == "model.norm.weight":
        return "final_norm"
    if module in NORMS and kind == "weight":
        return "layer_norm"
    if module in HEAD_NORMS and kind == "weight":
        return "head_norm_zero" if gemma else "head_norm"
    if kind == "bias" and module in ("q_proj", "k_proj", "v_proj"):
        return "bias"
    if module == "gate" and kind == "weight":
        return "router"
    if module in ("q_proj", "k_proj") and kind == "weight":
        return "qk"
    if module in IN_PROJ and kind == "weight":
        return "in_proj"
    if module in OUT_PROJ and kind == "weight":
        return "out_proj"
    raise ValueError(f"tiny_model: no rule initialises {name}")


def integers(np, key, count, spread):
    """count integers uniform in [-spread, spread] from SplitMix64, seeded by key: integer
    arithmetic only (uint64 wraps modulo 2**64 in numpy, as SplitMix64 wants)."""
    seed = np.uint64(int.from_bytes(hashlib.sha256(f"{SEED}/{key}".encode()).digest()[:8], "little"))
    z = np.arange(count, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + seed
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(2 * spread + 1)).astype(np.int64) - spread


def exact(np, ints, exponent):
    """ints * 2**-exponent as float32, exactly (|ints| <= 256 fits any of the three floats)."""
    ints = np.asarray(ints, dtype=np.int64)
    if int(np.abs(ints).max(initial=0)) > 256:
        raise ValueError("tiny_model: a weight's integer is over 256: not exact in bfloat16")
    return np.ldexp(ints.astype(np.float32), -exponent)


def log2_16(n):
    """16 * log2(n) for an integer n >= 1, to the step below, by integer arithmetic
    (linear between powers of two)."""
    b = n.bit_length() - 1
    return 16 * b + ((n - (1 << b)) * 16 >> b)


def unigram(np, counts, base, shift, exponent):
    """The unigram column: log2 of each token's count, more for a seen token."""
    return exact(np, [base + ((log2_16(int(c) + 1) + UNIGRAM_SEEN_BONUS if c else 0) >> shift) for c in counts],
                 exponent)


def tensor(np, arch, name, shape, role, gemma, tied, counts, qk_rows):
    """One tensor as a float32 numpy array."""
    count = 1
    for d in shape:
        count *= d
    key = f"{arch}/{name}"
    if role in ("final_norm", "layer_norm"):
        base, spread, e = ROLES["norm_zero" if gemma else "norm"]
        if name.split(".")[-2].startswith("post_") and gemma:
            base = GEMMA_POST_BASE
        vals = exact(np, base + integers(np, key, count, spread), e)
        # Gemma's norms scale by 1 + w
        scale = ARCHS[arch]["gain"] if role == "final_norm" else 2.0 ** -7
        vals[UNIGRAM_DIM] = scale - 1 if gemma else scale
        return vals.reshape(shape)
    base, spread, e = ROLES[role]
    vals = exact(np, base + integers(np, key, count, spread), e).reshape(shape)
    if name.endswith("qkv_proj.weight"):
        # the fused projection's q and k rows are scaled as q_proj's and k_proj's
        base, spread, e = ROLES["qk"]
        vals[:qk_rows] = exact(np, base + integers(np, key + "/qk", qk_rows * shape[1], spread), e).reshape(qk_rows, shape[1])
    if role == "out_proj":
        vals[UNIGRAM_DIM] = np.ldexp(vals[UNIGRAM_DIM], -QUIET)
    elif role == "head":
        vals[:, UNIGRAM_DIM] = unigram(np, counts, UNIGRAM_BASE, 0, UNIGRAM_EXPONENT)
    elif role == "embed" and tied:
        vals[:, UNIGRAM_DIM] = unigram(np, counts, TIED_BASE, TIED_SHIFT, TIED_EXPONENT)
    elif role == "embed":
        vals[:, UNIGRAM_DIM] = UNTIED_INPUT
    return vals


def weights(np, arch, shapes, gemma, tied, counts, qk_rows):
    """Every tensor of the model, by name (qk_rows: how many rows of a fused qkv
    projection are q's and k's)."""
    return {name: tensor(np, arch, name, shape, role_of(name, gemma), gemma, tied, counts, qk_rows)
            for name, shape in sorted(shapes.items())}


def build_config(transformers, arch, tokenizer):
    """The architecture's config at the tiny size, with the tokenizer's vocabulary and ids."""
    spec = ARCHS[arch]
    cls = getattr(transformers, spec["config"])
    kwargs = dict(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                  num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                  max_position_embeddings=MAX_POSITIONS, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                  dtype=spec["dtype"])
    kwargs.update(spec["settings"])
    return cls(**kwargs)


def link_or_copy(src, dst):
    """The tokenizer files are the source model's, byte for byte: linked when they can be."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", required=True, choices=sorted(ARCHS))
    ap.add_argument("--tokenizer", required=True, help="folder of the tokenizer to copy (a built-in model's)")
    ap.add_argument("--text", required=True, help="UTF-8 text whose token counts shape the output layer")
    ap.add_argument("--out", required=True, help="folder to write the checkpoint into (created)")
    args = ap.parse_args()
    start = time.monotonic()

    edgepipe_env.offline()
    os.environ.setdefault("TQDM_DISABLE", "1")

    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import save_file

    torch.set_num_threads(1)
    src, out = Path(args.tokenizer), Path(args.out)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(src))
    cfg = build_config(transformers, args.arch, tokenizer)
    with torch.device("meta"):
        skeleton = transformers.AutoModelForCausalLM.from_config(cfg)
    shapes = {n: tuple(p.shape) for n, p in skeleton.named_parameters()}
    cfg.architectures = [type(skeleton).__name__]

    text = Path(args.text).read_text(encoding="utf-8")
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=cfg.vocab_size)
    if len(counts) != cfg.vocab_size:
        print(f"tiny_model: the tokenizer gave ids up to {len(counts) - 1}, over its vocabulary of {cfg.vocab_size}", file=sys.stderr)
        return 2

    gemma = cfg.model_type.startswith("gemma")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    qk_rows = (cfg.num_attention_heads + cfg.num_key_value_heads) * head_dim
    tensors = weights(np, args.arch, shapes, gemma, cfg.tie_word_embeddings, counts, qk_rows)
    dtype = ARCHS[args.arch]["dtype"]
    out.mkdir(parents=True, exist_ok=True)
    if dtype == "bfloat16":
        save_bfloat16(torch, tensors, out / "model.safetensors")
    else:
        save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(str(out))
    transformers.GenerationConfig.from_model_config(cfg).save_pretrained(str(out))
    for f in sorted(src.iterdir()):
        if f.is_file() and f.name not in MODEL_FILES:
            link_or_copy(f, out / f.name)

    parameters = check(torch, transformers, out, ids[:64])
    sha = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    edgepipe_report.emit(report(args.arch, cfg.architectures[0], parameters, dtype, cfg.vocab_size, len(ids),
                                ARCHS[args.arch]["features"], (out / "model.safetensors").stat().st_size, sha,
                                round(time.monotonic() - start, 2), sorted(p.name for p in out.iterdir())))
    return 0


def save_bfloat16(torch, tensors, path):
    """The tensors as bfloat16 (numpy has none): exact, checked, since every value has at
    most 8 significant bits."""
    from safetensors.torch import save_file
    bf = {k: torch.from_numpy(v).to(torch.bfloat16) for k, v in tensors.items()}
    for k, v in bf.items():
        if not torch.equal(v.float(), torch.from_numpy(tensors[k])):
            raise ValueError(f"tiny_model: {k} is not exact in bfloat16")
    save_file(bf, str(path), metadata={"format": "pt"})


def check(torch, transformers, out, ids):
    """Load the checkpoint back strictly and run it: every tensor found, the logits finite."""
    model, info = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32,
                                                                    output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise ValueError(f"tiny_model: transformers loaded the checkpoint with {bad}")
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("tiny_model: the model's logits are not finite")
    return sum(p.numel() for p in model.parameters())


def report(arch, architecture, parameters, dtype, vocab_size, text_tokens, features, size, sha256, seconds, files):
    return {
        "arch": arch,
        "architecture": architecture,
        "parameters": parameters,
        "dtype": dtype,
        "vocab_size": vocab_size,
        "text_tokens": text_tokens,
        "features": features,
        "bytes": size,
        "sha256": sha256,
        "seconds": seconds,
        "files": files,
    }


if __name__ == "__main__":
    sys.exit(main())
