"""edgepipe_threads.limit_onnxruntime: sessions made by libraries get the step's grant."""
import os
import unittest

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import edgepipe_threads


def tiny_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


class LimitOnnxRuntime(unittest.TestCase):
    def test_sessions_get_the_grant(self):
        os.environ["EDGEPIPE_THREADS"] = "1"
        self.assertEqual(edgepipe_threads.granted(), 1)
        edgepipe_threads.limit_onnxruntime(ort)
        # Made the way onnxruntime.quantization's calibrator makes its own: options without a count.
        plain = ort.InferenceSession(tiny_model(), providers=["CPUExecutionProvider"])
        self.assertEqual(plain.get_session_options().intra_op_num_threads, 1)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        calib = ort.InferenceSession(tiny_model(), sess_options=so, providers=["CPUExecutionProvider"])
        self.assertEqual(calib.get_session_options().intra_op_num_threads, 1)
        # A count the caller chose stands; patching twice does not stack.
        so = ort.SessionOptions()
        so.intra_op_num_threads = 3
        edgepipe_threads.limit_onnxruntime(ort, 2)
        chosen = ort.InferenceSession(tiny_model(), sess_options=so, providers=["CPUExecutionProvider"])
        self.assertEqual(chosen.get_session_options().intra_op_num_threads, 3)
        again = ort.InferenceSession(tiny_model(), providers=["CPUExecutionProvider"])
        self.assertEqual(again.get_session_options().intra_op_num_threads, 2)
        self.assertEqual(again.run(None, {"x": __import__("numpy").array([2.0], dtype="float32")})[0][0], 4.0)


if __name__ == "__main__":
    unittest.main()
