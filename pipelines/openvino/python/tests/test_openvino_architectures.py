"""architectures.txt, which plan reads to refuse an architecture before a run,
against the pinned exporter's own registry: a toolchain update that adds or
drops an architecture fails here until the list follows it."""
import unittest
from pathlib import Path

LIST = Path(__file__).resolve().parents[2] / "architectures.txt"


def listed():
    return sorted(l.strip() for l in LIST.read_text().splitlines() if l.strip() and not l.startswith("#"))


class ExportArchitectures(unittest.TestCase):
    def test_list_is_the_registry(self):
        import optimum.exporters.openvino.model_configs  # noqa: F401 (fills the registry)
        from optimum.exporters.tasks import TasksManager
        have = sorted(TasksManager.get_supported_model_type_for_task("text-generation-with-past", exporter="openvino"))
        self.assertEqual(listed(), have)


if __name__ == "__main__":
    unittest.main()
