"""Shared helpers of the openvino_*.py scripts (and openvino_vision_quantize.py): what an exported IR holds."""

import importlib.metadata
import os
import sys

LOW_BIT = ("u4", "i4", "nf4", "u8", "i8")


def versions():
    out = {}
    for pkg in ("openvino", "nncf", "optimum-intel", "openvino-tokenizers", "transformers", "torch"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def weight_census(model):
    """The model's large constants (weights, their scales and zero points) by element type."""
    census = {}
    for op in model.get_ordered_ops():
        if op.get_type_name() != "Constant":
            continue
        n = 1
        for d in op.get_output_shape(0):
            n *= d
        if n < 1024:  # scalars, shapes and small tables are not weights
            continue
        c = census.setdefault(op.get_element_type().get_type_name(), {"constants": 0, "elements": 0, "bytes": 0})
        c["constants"] += 1
        c["elements"] += n
        c["bytes"] += op.get_byte_size()
    return census


def describe(folder, xml_name="openvino_model.xml"):
    """Reads the IR back and returns what the steps report about it (the helpers' report() take
    its fields), or None (with a message) if it is missing."""
    import openvino as ov

    xml = os.path.join(folder, xml_name)
    if not os.path.isfile(xml) or not os.path.isfile(xml[:-4] + ".bin"):
        print(f"openvino: no {xml_name} with its .bin in {folder}", file=sys.stderr)
        return None
    model = ov.Core().read_model(xml)
    census = weight_census(model)
    total = sum(c["elements"] for c in census.values()) or 1
    low = sum(c["elements"] for et, c in census.items() if et in LOW_BIT)
    files = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))
    return {"model": xml_name, "files": files, "weights": census, "low_bit_fraction": low / total,
            "inputs": [p.get_any_name() for p in model.inputs], "outputs": [p.get_any_name() for p in model.outputs],
            "stateful": len(model.get_sinks()) > 0, "versions": versions()}
