"""edgepipe_tokenizer: a tokenizer.json's own pipeline survives loading and saving on
transformers 5, where AutoTokenizer rebuilds a known class's pipeline and drops parts of it."""
import json
import os
import tempfile
import unittest

import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

import edgepipe_tokenizer


def digits_tokenizer(folder):
    """A GPT-2-class byte-level BPE whose pipeline splits digits one by one first (SmolLM2's)."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(alphabet))}
    vocab["12"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("1", "2")]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>",
                   "bos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2"}, f)
    return vocab["12"]


class Load(unittest.TestCase):
    def test_the_files_pipeline_is_kept(self):
        with tempfile.TemporaryDirectory() as d:
            merged = digits_tokenizer(d)
            tok = edgepipe_tokenizer.load(d)
            # Digits one by one: "12" never becomes its merged token.
            self.assertNotIn(merged, tok("a12", add_special_tokens=False).input_ids)
            self.assertIn("Digits", json.dumps(json.loads(tok.backend_tokenizer.to_str())["pre_tokenizer"]))
            # What it saves keeps the pipeline too.
            with tempfile.TemporaryDirectory() as out:
                tok.save_pretrained(out)
                with open(os.path.join(out, "tokenizer.json")) as f:
                    self.assertIn("Digits", json.dumps(json.load(f)["pre_tokenizer"]))

    def test_auto_tokenizer_on_transformers_5_is_why(self):
        # The reason for load(): if AutoTokenizer ever keeps the pipeline, this fails and load()
        # can go back to it.
        if int(transformers.__version__.split(".")[0]) < 5:
            self.skipTest("transformers 4 honours tokenizer.json")
        with tempfile.TemporaryDirectory() as d:
            merged = digits_tokenizer(d)
            tok = transformers.AutoTokenizer.from_pretrained(d)
            self.assertIn(merged, tok("a12", add_special_tokens=False).input_ids)


class CopyFiles(unittest.TestCase):
    def test_copies_tokenizer_files_not_the_config(self):
        with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as out:
            for name in ("tokenizer.json", "chat_template.jinja", "config.json", "model.safetensors"):
                with open(os.path.join(src, name), "w") as f:
                    f.write("source " + name)
            for name in ("tokenizer.json", "config.json"):
                with open(os.path.join(out, name), "w") as f:
                    f.write("exporter " + name)
            os.symlink("/etc/passwd", os.path.join(src, "vocab.json"))
            self.assertEqual(edgepipe_tokenizer.copy_files(src, out), ["tokenizer.json", "chat_template.jinja"])
            with open(os.path.join(out, "tokenizer.json")) as f:
                self.assertEqual(f.read(), "source tokenizer.json")
            with open(os.path.join(out, "config.json")) as f:
                self.assertEqual(f.read(), "exporter config.json")
            self.assertFalse(os.path.exists(os.path.join(out, "vocab.json")))


if __name__ == "__main__":
    unittest.main()
