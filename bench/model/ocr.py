"""The model of bench/model.sh: RapidOCR (ONNX Runtime) loaded once, one
receipt image read per call. Shared by the kennel worker, the
ProcessPoolExecutor peer and the cold-process peer, so that all three run the
same code.

It has no thread code of its own, as a user's model would not: under
kennel the Python SDK applies the worker's thread budget (`KENNEL_THREADS`)
to onnxruntime and OpenCV before `load()`; the executor's processes keep
each runtime's defaults (one thread per core), as a user who does not tune
threads gets. Each read says how long it took in its own process
(`seconds`), so a gap between contenders at one size is found in the worker
or in what is around it.
"""

import os
import time

_engine = None


def load():
    """Loads the model once; returns what the worker says of itself."""
    global _engine
    from rapidocr_onnxruntime import RapidOCR

    _engine = RapidOCR()
    return {"threads": os.environ.get("KENNEL_THREADS", "default"), "pid": os.getpid()}


def read(path):
    """The text lines of the image at `path`."""
    if _engine is None:
        load()
    started = time.perf_counter()
    result, _ = _engine(path)
    lines = [item[1] for item in (result or [])]
    return {"lines": len(lines), "first": lines[0] if lines else "",
            "seconds": time.perf_counter() - started}
