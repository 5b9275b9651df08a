"""Turn a GGUF file into a Hugging Face checkpoint (safetensors, config, tokenizer).

    python gguf_to_hf.py --gguf path/model.gguf --out OUT_DIR

Weights: transformers' GGUF loader dequantizes every tensor to float32, so the
checkpoint holds the GGUF's (already rounded) weights exactly; nothing is retrained.

Tokenizer: transformers' GGUF tokenizer converter turns a "gpt2"-type vocabulary into a
Llama/SentencePiece-style tokenizer (byte fallback, wrong EOS, no digit splitting, BOS
added), which tokenizes differently from llama.cpp and fails convert_hf_to_gguf.py's
pre-tokenizer check. So for the pre-tokenizers listed in PRE_TOKENIZERS the tokenizer
is rebuilt here from the GGUF's own vocabulary, merges and flags, the way the original
Hugging Face tokenizer was defined.

A SentencePiece ("llama"-type) vocabulary of the architectures in SPM_TOKENIZERS (Gemma)
is written back as the tokenizer.model it came from: every piece with its score and type,
BPE with byte fallback, no dummy prefix (the GGUF's add_space_prefix). From that file
convert_hf_to_gguf.py reads the same pieces, scores and types back (so llama.cpp tokenizes
as the original GGUF did), and transformers builds its fast tokenizer with its own Gemma
converter.

Other GGUFs fall back to transformers' converter, reported as "tokenizer":
"transformers-gguf" in the output line.

Its report is report() below (reports/gguf_to_hf.json), printed and written to --info.
"""

import argparse
import os
import sys
from pathlib import Path

import edgepipe_env
import edgepipe_report

# llama.cpp pre-tokenizer name (tokenizer.ggml.pre) -> Hugging Face pre-tokenizer steps
# before the byte-level split. "smollm" splits every digit on its own
# (llama.cpp: LLAMA_VOCAB_PRE_TYPE_SMOLLM, regex "\p{N}" then the GPT-2 regex).
PRE_TOKENIZERS = {
    "smollm": ["digits"],
    "gpt-2": [],
}

TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4
SPM_TYPE_UNKNOWN = 2
SPM_MODEL_BPE = 2

# general.architecture -> the transformers tokenizer class built from a tokenizer.model.
SPM_TOKENIZERS = {
    "gemma": "GemmaTokenizerFast",
    "gemma2": "GemmaTokenizerFast",
    "gemma3": "GemmaTokenizerFast",
}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def build_tokenizer(gguf_path: Path):
    """A GPT2TokenizerFast equal to the GGUF's tokenizer, or None if its kind is not supported."""
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import GPT2TokenizerFast

    reader = gguf.GGUFReader(str(gguf_path))
    if field(reader, "tokenizer.ggml.model") != "gpt2":
        return None, None
    pre = field(reader, "tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        return None, None

    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}

    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None,
                              fuse_unk=False, byte_fallback=False))
    steps = []
    if "digits" in PRE_TOKENIZERS[pre]:
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tk.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)

    special = [i for i, t in enumerate(types) if t in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED)]
    tk.add_special_tokens([AddedToken(tokens[i], special=types[i] == TOKEN_TYPE_CONTROL, normalized=False)
                           for i in special])

    def tok(key):
        i = field(reader, key)
        return None if i is None else tokens[int(i)]

    bos, eos = tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")
    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token", False))
    if add_bos and bos is not None:
        tk.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])])
    else:
        tk.post_processor = processors.ByteLevel(trim_offsets=False)

    kwargs = dict(tokenizer_object=tk, bos_token=bos, eos_token=eos,
                  unk_token=tok("tokenizer.ggml.unknown_token_id"),
                  pad_token=tok("tokenizer.ggml.padding_token_id"),
                  add_prefix_space=False, clean_up_tokenization_spaces=False)
    ctx = field(reader, "llama.context_length") or field(reader, f"{field(reader, 'general.architecture')}.context_length")
    if ctx:
        kwargs["model_max_length"] = int(ctx)
    hf = GPT2TokenizerFast(**{k: v for k, v in kwargs.items() if v is not None})
    hf.add_bos_token = add_bos
    template = field(reader, "tokenizer.chat_template")
    if template:
        hf.chat_template = template
    return hf, add_bos


def sentencepiece_proto():
    """transformers' own copy of SentencePiece's model proto.

    sentencepiece 0.2.x's generated sentencepiece_model_pb2 needs protobuf >= 5, and
    llama.cpp's requirements pin protobuf < 5; transformers ships the same proto compiled
    for protobuf 4 and uses it when asked through import_protobuf, which is patched here to
    return it (transformers would otherwise pick sentencepiece's and fail to import it).
    """
    from transformers.utils import sentencepiece_model_pb2_new as pb
    import transformers.convert_slow_tokenizer as cst
    cst.import_protobuf = lambda *args, **kwargs: pb
    return pb


def build_spm_tokenizer(gguf_path: Path, out: Path):
    """A fast tokenizer plus tokenizer.model rebuilt from a "llama"-type GGUF vocabulary,
    or (None, None) if its architecture is not in SPM_TOKENIZERS."""
    import gguf
    import transformers

    reader = gguf.GGUFReader(str(gguf_path))
    arch = field(reader, "general.architecture")
    if field(reader, "tokenizer.ggml.model") != "llama" or arch not in SPM_TOKENIZERS:
        return None, None
    tokens = field(reader, "tokenizer.ggml.tokens")
    scores = field(reader, "tokenizer.ggml.scores")
    types = field(reader, "tokenizer.ggml.token_type")
    unk = int(field(reader, "tokenizer.ggml.unknown_token_id"))

    pb = sentencepiece_proto()
    proto = pb.ModelProto()
    spec = proto.trainer_spec
    spec.model_type = SPM_MODEL_BPE
    spec.vocab_size = len(tokens)
    spec.byte_fallback = True
    spec.split_digits = True
    spec.unk_id = unk
    for key, attr in (("bos", "bos_id"), ("eos", "eos_id"), ("padding", "pad_id")):
        i = field(reader, f"tokenizer.ggml.{key}_token_id")
        setattr(spec, attr, -1 if i is None else int(i))
    norm = proto.normalizer_spec
    norm.name = "identity"
    norm.add_dummy_prefix = bool(field(reader, "tokenizer.ggml.add_space_prefix", False))
    norm.remove_extra_whitespaces = False
    norm.escape_whitespaces = True
    for i, (tok, score, typ) in enumerate(zip(tokens, scores, types)):
        piece = proto.pieces.add()
        piece.piece = tok
        piece.score = float(score)
        # SentencePiece needs exactly one UNKNOWN piece; llama.cpp's Gemma GGUFs
        # mark <unk> as a control token.
        piece.type = SPM_TYPE_UNKNOWN if i == unk else int(typ)
    out.mkdir(parents=True, exist_ok=True)
    model_file = out / "tokenizer.model"
    model_file.write_bytes(proto.SerializeToString())

    def tok(key):
        i = field(reader, key)
        return None if i is None else tokens[int(i)]

    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token", False))
    cls = getattr(transformers, SPM_TOKENIZERS[arch])
    kwargs = dict(vocab_file=str(model_file), bos_token=tok("tokenizer.ggml.bos_token_id"),
                  eos_token=tok("tokenizer.ggml.eos_token_id"), unk_token=tokens[unk],
                  pad_token=tok("tokenizer.ggml.padding_token_id"), add_bos_token=add_bos,
                  add_eos_token=bool(field(reader, "tokenizer.ggml.add_eos_token", False)))
    ctx = field(reader, f"{arch}.context_length")
    if ctx:
        kwargs["model_max_length"] = int(ctx)
    hf = cls(**{k: v for k, v in kwargs.items() if v is not None})
    template = field(reader, "tokenizer.chat_template")
    if template:
        hf.chat_template = template
    return hf, add_bos


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, help="path to the .gguf file")
    ap.add_argument("--out", required=True, help="directory to write the checkpoint into (created)")
    ap.add_argument("--info", help="also write the output line's JSON to this file")
    args = ap.parse_args()

    # Never reach the Hub: everything comes from the local file.
    edgepipe_env.offline()
    os.environ.setdefault("TQDM_DISABLE", "1")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(args.gguf).resolve()
    if not gguf_path.is_file():
        print(f"gguf_to_hf: {gguf_path} is not a file", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer, add_bos = build_tokenizer(gguf_path)
    kind = "rebuilt-from-gguf"
    if tokenizer is None:
        tokenizer, add_bos = build_spm_tokenizer(gguf_path, out)
        kind = "sentencepiece-from-gguf"
    if tokenizer is None:
        kind = "transformers-gguf"
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        add_bos = bool(getattr(tokenizer, "add_bos_token", False))
        # The converter records the GGUF itself as the SentencePiece model file; do not copy it.
        tokenizer.vocab_file = None

    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 dtype=torch.float32)
    model.eval()
    model.config.bos_token_id = tokenizer.bos_token_id
    model.config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))

    file_type, tensor_types = quantization_of(gguf_path)
    rep = report(str(out), sum(p.numel() for p in model.parameters()),
                 (model.config.architectures or [model.config.model_type])[0], kind, add_bos,
                 file_type, tensor_types, sorted(p.name for p in out.iterdir()))
    edgepipe_report.emit(rep)
    if args.info:
        with open(args.info, "w", encoding="utf-8") as f:
            edgepipe_report.emit(rep, f)
    return 0


def report(out, parameters, architecture, tokenizer, add_bos, file_type, tensor_types, files):
    return {
        "out": out,
        "parameters": parameters,
        "architecture": architecture,
        "tokenizer": tokenizer,
        "add_bos": add_bos,
        "file_type": file_type,
        "tensor_types": tensor_types,
        "files": files,
    }


def quantization_of(gguf_path: Path):
    """The GGUF's declared file type (llama.cpp's name, e.g. Q4_K_M) and how many tensors
    of each type it really holds: a mix is the rule, not the exception."""
    import gguf
    from collections import Counter

    reader = gguf.GGUFReader(str(gguf_path))
    ft = field(reader, "general.file_type")
    name = None
    if ft is not None:
        try:
            name = gguf.LlamaFileType(int(ft)).name.removeprefix("MOSTLY_")
        except ValueError:
            name = f"file type {int(ft)}"
    return name, dict(sorted(Counter(t.tensor_type.name for t in reader.tensors).items()))


if __name__ == "__main__":
    sys.exit(main())
