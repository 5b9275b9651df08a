"""edgepipe_report.emit: one JSON line, sorted keys, never NaN (standard library only)."""
import io
import json
import unittest

import edgepipe_report


class Emit(unittest.TestCase):
    def test_one_line_of_json_with_non_finite_numbers_as_null(self):
        out = io.StringIO()
        edgepipe_report.emit({"ppl": float("nan"), "b": [1.5, float("inf")], "a": {"x": -float("inf"), "y": 2}}, out)
        text = out.getvalue()
        self.assertTrue(text.endswith("\n"))
        self.assertEqual(text.count("\n"), 1)
        self.assertEqual(json.loads(text), {"a": {"x": None, "y": 2}, "b": [1.5, None], "ppl": None})
        self.assertLess(text.index('"a"'), text.index('"b"'))


if __name__ == "__main__":
    unittest.main()
