"""The model of bench/model.sh: RapidOCR (ONNX Runtime) loaded once, one
receipt image read per call. Shared by the kennel worker, the
ProcessPoolExecutor peer and the cold-process peer, so that all three run the
same code.

The thread budget: when `KENNEL_THREADS` is set (kennel's `threads = "auto"`
or `threads = N`), the ONNX Runtime sessions and OpenCV use that many threads,
as docs/PROTOCOL.md asks of a worker; without it they keep their defaults
(one thread per core), as a user who does not tune threads gets.
"""

import os

_engine = None


def threads():
    """The thread budget kennel gave this process, if any."""
    value = os.environ.get("KENNEL_THREADS")
    return int(value) if value else None


def load():
    """Loads the model once; returns what the worker says of itself."""
    global _engine
    from rapidocr_onnxruntime import RapidOCR

    budget = threads()
    if budget:
        import cv2

        cv2.setNumThreads(budget)
        _engine = RapidOCR(intra_op_num_threads=budget, inter_op_num_threads=1)
    else:
        _engine = RapidOCR()
    return {"threads": budget or "default", "pid": os.getpid()}


def read(path):
    """The text lines of the image at `path`."""
    if _engine is None:
        load()
    result, _ = _engine(path)
    lines = [item[1] for item in (result or [])]
    return {"lines": len(lines), "first": lines[0] if lines else ""}
