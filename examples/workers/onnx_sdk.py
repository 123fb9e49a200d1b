#!/usr/bin/env python3
"""An ONNX model served with the Python SDK, with no thread code of its own.

The model (y = relu(x · W), built here so the example needs no file) is
loaded once in `load()`; each job runs it on {"x": [[...4 numbers...], ...]}
and answers {"y": [...], "intra_op_num_threads": n}. The session is made
without options: `serve` has already applied the worker's thread budget
(KENNEL_THREADS) to onnxruntime, so n is the budget, not the machine's core
count. Needs onnxruntime, onnx and numpy (`.ci/run` puts them in
target/threads-venv); see docs/recipes/serve-an-onnx-model.md.
"""
import numpy
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from kennel_worker import WorkerError, serve

session = None


def model_bytes():
    weights = numpy.arange(16, dtype=numpy.float32).reshape(4, 4) / 10
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Relu", ["xw"], ["y"])]
    graph = helper.make_graph(nodes, "model", [x], [y], initializer=[numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def load():
    global session
    session = onnxruntime.InferenceSession(model_bytes())  # no options: the SDK gives it the budget
    return {"intra_op_num_threads": session.get_session_options().intra_op_num_threads}


def handle(request):
    try:
        x = numpy.asarray(request["x"], dtype=numpy.float32).reshape(-1, 4)
    except (KeyError, TypeError, ValueError) as err:
        raise WorkerError(f"x must be rows of 4 numbers: {err}", status=400) from err
    (y,) = session.run(None, {"x": x})
    return {"y": y.tolist(), "intra_op_num_threads": session.get_session_options().intra_op_num_threads}


serve(handle, load=load)
