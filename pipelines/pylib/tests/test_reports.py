"""Each helper's report writer against its golden (standard library only: the fast tier runs it
on the host's python3, without the helper's toolchain).

A helper that calls edgepipe_report.emit builds its report in report(...), returning dict
literals; every return's keys (and the keys of dict literals nested in it) must be exactly the
golden's, python/reports/NAME.json beside the helper, which edgepipe's Go report type decodes
strictly (steps.DecodeReport): a field renamed or added on one side fails here or there.

    go test ./pipelines -run TestPythonModules/test_reports
"""
import ast
import glob
import json
import os
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def helper_dirs():
    """Every folder of helper scripts: the families' python/, pylib, the Ray bridge's."""
    dirs = glob.glob(os.path.join(ROOT, "pipelines", "*", "python"))
    dirs += [os.path.join(ROOT, "pipelines", "pylib"), os.path.join(ROOT, "internal", "rayexec", "python")]
    return sorted(d for d in dirs if os.path.isdir(d))


def emits(tree):
    """Whether the module calls edgepipe_report.emit (or emit imported from it)."""
    imported = any(isinstance(n, ast.ImportFrom) and n.module == "edgepipe_report" and any(a.name == "emit" for a in n.names)
                   for n in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "emit" and isinstance(f.value, ast.Name) and f.value.id == "edgepipe_report":
                return True
            if imported and isinstance(f, ast.Name) and f.id == "emit":
                return True
    return False


def dict_shape(node, where):
    """A dict literal's keys, with the shape of dict literals nested in it (None for others)."""
    shape = {}
    for k, v in zip(node.keys, node.values):
        if k is None:
            raise AssertionError(f"{where}: report() spreads a dict (**...): write every key out")
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise AssertionError(f"{where}: report() has a key that is not a string literal")
        shape[k.value] = dict_shape(v, where) if isinstance(v, ast.Dict) else None
    return shape


def report_shapes(tree, where):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "report":
            rets = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
            if not rets:
                raise AssertionError(f"{where}: report() returns nothing")
            shapes = []
            for r in rets:
                if not isinstance(r.value, ast.Dict):
                    raise AssertionError(f"{where}:{r.lineno}: report() must return a dict literal")
                shapes.append(dict_shape(r.value, where))
            return shapes
    return None


def differences(shape, golden, path=""):
    """How a report() shape differs from a golden object."""
    out = []
    for k in sorted(set(shape) | set(golden)):
        p = path + k
        if k not in golden:
            out.append(f"{p}: written by report() but not in the golden")
        elif k not in shape:
            out.append(f"{p}: in the golden but report() does not write it")
        elif shape[k] is not None and isinstance(golden[k], dict):
            out += differences(shape[k], golden[k], p + ".")
    return out


class Reports(unittest.TestCase):
    def test_every_writer_matches_its_golden(self):
        checked = 0
        for d in helper_dirs():
            for path in sorted(glob.glob(os.path.join(d, "*.py"))):
                name = os.path.basename(path)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                golden_path = os.path.join(d, "reports", name[:-3] + ".json")
                shapes = report_shapes(tree, path)
                if not emits(tree):
                    self.assertIsNone(shapes, f"{path} has report() but never emits it")
                    self.assertFalse(os.path.exists(golden_path), f"{golden_path} has no helper that emits it")
                    continue
                with self.subTest(helper=name):
                    self.assertIsNotNone(shapes, f"{path} emits a report but has no report() function")
                    self.assertTrue(os.path.exists(golden_path), f"{path} emits a report but has no golden {golden_path}")
                    with open(golden_path, encoding="utf-8") as f:
                        golden = json.load(f)
                    for shape in shapes:
                        self.assertEqual(differences(shape, golden), [], f"{path}'s report() against {golden_path}")
                    checked += 1
        print(f"{checked} helper report writers checked")

    def test_the_check_can_fail(self):
        tree = ast.parse("def report(a):\n    return {'x': a, 'nested': {'y': 1}}\n")
        shape = report_shapes(tree, "t.py")[0]
        self.assertEqual(differences(shape, {"x": 1, "nested": {"y": 2}}), [])
        self.assertEqual(differences(shape, {"x": 1, "nested": {"z": 2}}),
                         ["nested.y: written by report() but not in the golden", "nested.z: in the golden but report() does not write it"])
        self.assertEqual(differences(shape, {"nested": {"y": 1}, "w": 0}),
                         ["w: in the golden but report() does not write it", "x: written by report() but not in the golden"])
        with self.assertRaises(AssertionError):
            report_shapes(ast.parse("def report(a):\n    return dict(x=a)\n"), "t.py")
        with self.assertRaises(AssertionError):
            report_shapes(ast.parse("def report(a):\n    return {**a}\n"), "t.py")


if __name__ == "__main__":
    unittest.main()
