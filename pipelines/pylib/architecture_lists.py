"""The architecture lists plan reads (architectures.txt beside a family's Go),
and the pinned exporters' registries the tests compare them with."""
import importlib
from pathlib import Path


def listed(path):
    """Each line of a list split into its fields, "#" lines and blank lines skipped."""
    return [l.split() for l in Path(path).read_text().splitlines() if l.strip() and not l.startswith("#")]


def text_generation_exports(exporter):
    """The model types optimum's exporter ("onnx", "openvino") exports for
    text-generation-with-past, the task the families export, with the
    transformers installed beside it: a registered config whose
    MIN/MAX_TRANSFORMERS_VERSION excludes it stops the export with "does not
    allow for the export of the model" (Gemma 3 with optimum-intel 2.2.0 and
    transformers 5.5.4), so it is not one."""
    importlib.import_module(f"optimum.exporters.{exporter}.model_configs")  # fills the registry
    import transformers
    from optimum.exporters.tasks import TasksManager
    from packaging import version

    have = version.parse(transformers.__version__)
    out = []
    for model_type in TasksManager.get_supported_model_type_for_task("text-generation-with-past", exporter=exporter):
        ctor = TasksManager.get_exporter_config_constructor(
            exporter=exporter, model_type=model_type, task="text-generation-with-past", library_name="transformers")
        config = getattr(ctor, "func", ctor)
        low, high = (getattr(config, k, None) for k in ("MIN_TRANSFORMERS_VERSION", "MAX_TRANSFORMERS_VERSION"))
        if (low is None or have >= version.parse(str(low))) and (high is None or have <= version.parse(str(high))):
            out.append(model_type)
    return sorted(out)


def pinned(path):
    """The "# pinned: NAME VERSION, ..." line of a list, as {name: version}:
    the packages plan's messages say the list was taken from."""
    for l in Path(path).read_text().splitlines():
        if l.startswith("# pinned: "):
            return dict(p.split() for p in l[len("# pinned: "):].split(", "))
    raise ValueError(f"{path} has no '# pinned:' line")


def installed_versions(names):
    """The versions of the named distributions installed here."""
    from importlib.metadata import version
    return {n: version(n) for n in names}
