"""contract.py on the built-in SmolLM2: its checkpoint (EDGEPIPE_CONTRACT_MODEL), its source GGUF
(EDGEPIPE_CONTRACT_GGUF) and llama.cpp's llama-tokenize (EDGEPIPE_CONTRACT_TOKENIZE), with a few
lines of the built-in corpus (EDGEPIPE_CONTRACT_CORPUS). An artifact made of the checkpoint's own
files passes every check; each deliberately broken one fails its own check, saying what differs:
a wrong EOS id in generation_config.json, a tokenizer.json with one merge rule dropped, the chat
template removed, no tokenizer at all, a copy of the GGUF whose tokenizer.ggml.eos_token_id was
rewritten with gguf-py, and an MLC folder whose conversation template is another model's."""

import argparse
import json
import os
import shutil
import tempfile
import unittest

import contract
import mlc_native

MODEL = os.environ.get("EDGEPIPE_CONTRACT_MODEL", "")
GGUF = os.environ.get("EDGEPIPE_CONTRACT_GGUF", "")
TOKENIZE = os.environ.get("EDGEPIPE_CONTRACT_TOKENIZE", "")
CORPUS = os.environ.get("EDGEPIPE_CONTRACT_CORPUS", "")

# A handful of the corpus's lines: prose, accents, CJK, emoji with a ZWJ, code with a tab, runs of
# spaces, digits and special tokens' text; the whole of them is one more text, as in a step.
LINES = (1, 2, 9, 11, 13, 25, 27, 29)
SMALL = "small-corpus.txt"


@unittest.skipUnless(MODEL and GGUF and TOKENIZE and CORPUS, "needs EDGEPIPE_CONTRACT_MODEL, _GGUF, _TOKENIZE and _CORPUS")
class Contract(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="test-contract-")
        with open(CORPUS, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
        cls.corpus = os.path.join(cls.tmp, SMALL)
        with open(cls.corpus, "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(lines[n - 1] for n in LINES) + "\n\n\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def folder(self, name, skip=()):
        """A folder artifact made of the checkpoint's files but its weights."""
        out = os.path.join(self.tmp, name)
        os.makedirs(out)
        for f in os.listdir(MODEL):
            if f not in skip and not f.endswith(".safetensors"):
                shutil.copy(os.path.join(MODEL, f), os.path.join(out, f))
        return out

    def contract(self, artifact, reader="folder", source=MODEL, source_gguf=None):
        args = argparse.Namespace(source=source, artifact=artifact, reader=reader, corpus=self.corpus,
                                  source_gguf=source_gguf, llama_tokenize=TOKENIZE)
        r = contract.run(args)
        json.dumps(r)  # the report is JSON as it stands
        return r

    def assertChecks(self, r, **want):
        for name, status in want.items():
            c = r[name]
            self.assertEqual(c["status"], status, f"{name}: {c}")

    def test_unchanged_folder_passes_every_check(self):
        r = self.contract(self.folder("same"))
        self.assertChecks(r, tokenizer="passed", eos="passed", bos="passed", chat_template="passed")
        self.assertIsNone(r["source_gguf"])
        self.assertEqual(r["corpus_texts"], len(LINES) + 1)

    def test_wrong_eos_in_generation_config_fails_the_eos_check(self):
        out = self.folder("eos")
        with open(os.path.join(out, "generation_config.json"), encoding="utf-8") as f:
            gen = json.load(f)
        gen["eos_token_id"] = 5
        with open(os.path.join(out, "generation_config.json"), "w", encoding="utf-8") as f:
            json.dump(gen, f)
        r = self.contract(out)
        self.assertChecks(r, tokenizer="passed", eos="failed", bos="passed", chat_template="passed")
        self.assertIn("declares 5 as EOS, which the source does not", r["eos"]["detail"])
        self.assertIn("generation_config.json eos_token_id 5", r["eos"]["artifact"])

    def test_dropped_merge_fails_the_tokenizer_check(self):
        out = self.folder("merge")
        path = os.path.join(out, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        # The merge that makes the first corpus line's longest word-token: without it that word
        # splits into more tokens.
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(MODEL)
        pieces = tok.convert_ids_to_tokens(tok(contract.corpus_texts(self.corpus)[0][1], add_special_tokens=False)["input_ids"])
        target = max(pieces, key=len)
        merges = tj["model"]["merges"]
        joined = [m if isinstance(m, str) else " ".join(m) for m in merges]
        i = next(i for i, m in enumerate(joined) if m.replace(" ", "") == target)
        del merges[i]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        r = self.contract(out)
        self.assertChecks(r, tokenizer="failed", eos="passed", chat_template="passed")
        t = r["tokenizer"]
        self.assertIn("the artifact tokenizes line 1 differently", t["detail"])
        first = t["differing"][0]
        self.assertEqual(first["line"], 1)
        self.assertNotEqual(first["source_ids"], first["artifact_ids"])

    def test_removed_chat_template_fails_the_template_check(self):
        r = self.contract(self.folder("template", skip=("chat_template.jinja",)))
        self.assertChecks(r, tokenizer="passed", eos="passed", chat_template="failed")
        self.assertIn("the artifact has no 'default' chat template: the source's is lost", r["chat_template"]["detail"])
        self.assertIn("sha256", r["chat_template"]["source"])

    def test_an_artifact_without_a_tokenizer_fails(self):
        out = self.folder("none", skip=("tokenizer.json", "vocab.json", "merges.txt"))
        r = self.contract(out)
        self.assertChecks(r, tokenizer="failed", bos="failed")
        self.assertIn("the artifact ships no tokenizer", r["tokenizer"]["detail"])

    def test_a_source_without_template_or_eos_is_skipped_not_passed(self):
        src = self.folder("bare-source", skip=("chat_template.jinja", "generation_config.json", "tokenizer.json", "vocab.json",
                                               "merges.txt", "tokenizer_config.json", "special_tokens_map.json"))
        with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        cfg.pop("eos_token_id")
        with open(os.path.join(src, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        r = self.contract(self.folder("art-of-bare"), source=src)
        self.assertChecks(r, tokenizer="skipped", eos="skipped", bos="skipped", chat_template="skipped")
        for name in ("tokenizer", "eos", "bos", "chat_template"):
            self.assertTrue(r[name]["detail"], name)

    def mlc_folder(self, name, conv):
        """An MLC folder as mlc_native.py writes it: its tokenizer files and mlc-chat-config.json."""
        out = os.path.join(self.tmp, name)
        os.makedirs(out)
        for f in mlc_native.TOKENIZER_FILES:
            if os.path.exists(os.path.join(MODEL, f)):
                shutil.copy(os.path.join(MODEL, f), os.path.join(out, f))
        with open(os.path.join(out, "mlc-chat-config.json"), "w", encoding="utf-8") as f:
            json.dump({"conv_template": conv, "eos_token_id": 2, "bos_token_id": 1}, f)
        return out

    def test_mlc_folder_is_read_as_its_runtime_reads_it(self):
        r = self.contract(self.mlc_folder("mlc", mlc_native.CHATML), reader="mlc")
        self.assertChecks(r, tokenizer="passed", eos="passed", bos="passed", chat_template="passed")
        self.assertIn("tokenizers on mlc/tokenizer.json", r["tokenizer"]["artifact"])
        self.assertIn("conv_template 'chatml'", r["chat_template"]["artifact"])

    def test_mlc_conversation_template_of_another_model_fails(self):
        conv = dict(mlc_native.CHATML, name="llama-3", system_template="<|start_header_id|>system<|end_header_id|>\n\n{system_message}<|eot_id|>")
        r = self.contract(self.mlc_folder("mlc-llama3", conv), reader="mlc")
        self.assertChecks(r, tokenizer="passed", chat_template="failed")
        self.assertIn("the conversation template renders a chat differently from character 2", r["chat_template"]["detail"])
        named = self.contract(self.mlc_folder("mlc-named", {"name": "llama-3"}), reader="mlc")
        self.assertChecks(named, chat_template="skipped")
        self.assertIn("mlc_llm's registry", named["chat_template"]["detail"])

    def test_gguf_and_its_source_gguf_pass(self):
        r = self.contract(GGUF, reader="gguf", source_gguf=GGUF)
        self.assertChecks(r, tokenizer="passed", source_gguf="passed", eos="passed", bos="passed", chat_template="passed")
        self.assertIn("llama.cpp (llama-tokenize)", r["tokenizer"]["artifact"])
        self.assertIn("llama.cpp stops on", r["eos"]["artifact"])

    def test_gguf_with_a_rewritten_eos_fails_the_eos_check(self):
        import gguf

        path = os.path.join(self.tmp, "eos5.gguf")
        shutil.copy(GGUF, path)
        reader = gguf.GGUFReader(path, "r+")
        field = reader.fields["tokenizer.ggml.eos_token_id"]
        field.parts[field.data[0]][0] = 5
        del reader
        r = self.contract(path, reader="gguf")
        self.assertChecks(r, tokenizer="passed", eos="failed", bos="passed", chat_template="passed")
        self.assertIn("tokenizer.ggml.eos_token_id 5", r["eos"]["artifact"])
        self.assertIn("declares 5 as EOS, which the source does not", r["eos"]["detail"])

    def test_parse_pieces_cuts_at_the_count(self):
        out = b"    10 -> 'a'\n'\n    11 -> ''\n'\nTotal number of tokens: 2\n"
        self.assertEqual(contract.parse_pieces(out), ([10, 11], b"a'\n'\n"))
        with self.assertRaises(contract.ContractError):
            contract.parse_pieces(b"    10 -> 'a'\nTotal number of tokens: 3\n")


if __name__ == "__main__":
    unittest.main()
