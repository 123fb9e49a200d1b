"""A kennel worker (sdk/python) that reads receipts with RapidOCR: each job is
{"image": "/path/to/receipt.png"}, each reply {"lines": n, "first": "...",
"seconds": its own time}. BENCH_SDK_BUDGET=off serves with
apply_threads=False: the runtimes keep their defaults."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ocr  # noqa: E402
from kennel_worker import serve  # noqa: E402


def handle(request):
    return ocr.read(request["image"])


if __name__ == "__main__":
    serve(handle, load=ocr.load, apply_threads=os.environ.get("BENCH_SDK_BUDGET") != "off")
