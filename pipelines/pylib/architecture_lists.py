"""The architecture lists plan reads (architectures.txt beside a family's Go),
and the pinned exporters' registries the tests compare them with."""
import importlib
from pathlib import Path


def listed(path):
    """Each line of a list split into its fields, "#" lines and blank lines skipped."""
    return [l.split() for l in Path(path).read_text().splitlines() if l.strip() and not l.startswith("#")]


def text_generation_exports(exporter):
    """The model types optimum's exporter ("onnx", "openvino") exports for
    text-generation-with-past, the task the families export."""
    importlib.import_module(f"optimum.exporters.{exporter}.model_configs")  # fills the registry
    from optimum.exporters.tasks import TasksManager
    return sorted(TasksManager.get_supported_model_type_for_task("text-generation-with-past", exporter=exporter))
