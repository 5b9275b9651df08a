"""architectures.txt, which plan reads to refuse an architecture before a run,
against the pinned exporter's own registry: a toolchain update that adds or
drops an architecture fails here until the list follows it."""
import unittest
from pathlib import Path

from architecture_lists import listed, text_generation_exports


class ExportArchitectures(unittest.TestCase):
    def test_list_is_the_registry(self):
        have = sorted(l[0] for l in listed(Path(__file__).resolve().parents[2] / "architectures.txt"))
        self.assertEqual(have, text_generation_exports("openvino"))


if __name__ == "__main__":
    unittest.main()
