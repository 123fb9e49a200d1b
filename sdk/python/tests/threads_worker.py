"""A worker that reports how many threads its runtimes run: onnxruntime,
numpy's BLAS (through threadpoolctl) and OpenCV. The harness of
tests/test_threads.py; run by the interpreter of a venv that has them.

THREADS_IMPORT=early imports the runtimes before `serve`; otherwise the
first job imports them. THREADS_APPLY=off passes apply_threads=False.
"""

import os

if os.environ.get("THREADS_IMPORT") == "early":
    import cv2  # noqa: F401
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401

from kennel_worker import serve, threads


def tasks():
    return len(os.listdir("/proc/self/task"))


def model():
    """A one-node ONNX model (Relu over a batch of 4-vectors), as bytes."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    made.ir_version = 8
    return made.SerializeToString()


def handle(request):
    import cv2
    import numpy
    import onnxruntime as ort
    from threadpoolctl import threadpool_info

    before = tasks()
    if request.get("own"):
        options = ort.SessionOptions()
        options.intra_op_num_threads = request["own"]
        session = ort.InferenceSession(model(), options)
    else:
        session = ort.InferenceSession(model())
    started = tasks() - before
    session.run(None, {"x": numpy.ones((2, 4), dtype=numpy.float32)})
    return {
        "budget": threads(),
        "intra_op_num_threads": session.get_session_options().intra_op_num_threads,
        "threads_started": started,
        "blas": sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}),
        "opencv": cv2.getNumThreads(),
    }


serve(handle, apply_threads=os.environ.get("THREADS_APPLY") != "off")
