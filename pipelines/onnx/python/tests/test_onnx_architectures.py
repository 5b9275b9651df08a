"""architectures.txt, which plan reads to refuse an architecture before a run,
against the pinned exporter's own registry: a toolchain update that adds or
drops an architecture fails here until the list follows it."""
import unittest
from pathlib import Path

from architecture_lists import installed_versions, listed, pinned, text_generation_exports

LIST = Path(__file__).resolve().parents[2] / "architectures.txt"


class ExportArchitectures(unittest.TestCase):
    def test_list_is_the_registry(self):
        have = sorted(l[0] for l in listed(LIST))
        self.assertEqual(have, text_generation_exports("onnx"))

    def test_pinned_line_is_installed(self):
        want = pinned(LIST)
        self.assertEqual(installed_versions(want), want)


if __name__ == "__main__":
    unittest.main()
