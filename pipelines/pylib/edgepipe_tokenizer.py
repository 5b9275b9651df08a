"""A checkpoint's tokenizer exactly as its tokenizer.json describes it.

transformers 5 builds the tokenizer of a known class (GPT2Tokenizer, LlamaTokenizer...) from
the class's own pipeline and only the vocabulary and merges of tokenizer.json: SmolLM2's
Digits pre-tokenizer is dropped, so "ＡＢＣ１２３" tokenizes differently, and a
save_pretrained() writes the changed pipeline into the artifact. The toolchains on
transformers 5 (llmcompressor, openvino) load through load() instead: with a tokenizer.json,
the generic fast tokenizer, which keeps the file's pipeline; without one (a SentencePiece model
only, or transformers 4, which honours the file), AutoTokenizer as before.
"""

import os


def load(folder, trust_remote_code=False):
    """The tokenizer of the checkpoint folder, faithful to its tokenizer.json."""
    import transformers

    major = int(transformers.__version__.split(".")[0])
    if major >= 5 and os.path.exists(os.path.join(folder, "tokenizer.json")):
        return transformers.PreTrainedTokenizerFast.from_pretrained(folder)
    return transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)


# What an app reads to tokenize, stop and format chats, besides the model and its config (the
# generation config and config.json are the exporter's: they describe the converted model).
FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
         "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja")


def copy_files(src, out):
    """Copies the source checkpoint's own tokenizer files over what an exporter wrote into
    out (it re-serializes them through transformers), and returns their names."""
    import shutil

    copied = []
    for name in FILES:
        path = os.path.join(src, name)
        if os.path.isfile(path) and not os.path.islink(path):
            shutil.copyfile(path, os.path.join(out, name))
            copied.append(name)
    return copied
