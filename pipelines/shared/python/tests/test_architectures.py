"""The architecture lists plan reads to refuse a source before a run, against
the pinned transformers: causal_lm_architectures.txt is its causal-LM
registry, gguf_architectures.txt what its GGUF loader reads and the
model_type each becomes. A toolchain update that changes either fails here
until the lists follow it."""
import unittest
from pathlib import Path

from architecture_lists import installed_versions, listed, pinned

ROOT = Path(__file__).resolve().parents[2]


def lines(name):
    return listed(ROOT / name)


class Architectures(unittest.TestCase):
    def test_causal_lm_list_is_the_registry(self):
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        self.assertEqual(sorted(l[0] for l in lines("causal_lm_architectures.txt")), sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))

    def test_gguf_list_is_what_the_loader_reads(self):
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
        # Keys of the loader's table that are no model a GGUF names in
        # general.architecture, or not a causal LM.
        not_models = {"general", "tokenizer", "t5", "umt5", "t5encoder"}
        # GGUF files spell the MoE Qwens without the underscore; the loader
        # renames them (modeling_gguf_pytorch_utils.py), and a Gemma 3 GGUF
        # loads as its text model.
        file_name = {"qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe"}
        model_type = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "gemma3": "gemma3_text"}
        want = sorted((file_name.get(k, k), model_type.get(file_name.get(k, k), file_name.get(k, k)))
                      for k in GGUF_SUPPORTED_ARCHITECTURES if k not in not_models)
        self.assertEqual(sorted(tuple(l) for l in lines("gguf_architectures.txt")), want)

    def test_pinned_lines_are_installed(self):
        for name in ("causal_lm_architectures.txt", "gguf_architectures.txt"):
            want = pinned(ROOT / name)
            self.assertEqual(installed_versions(want), want, name)


if __name__ == "__main__":
    unittest.main()
