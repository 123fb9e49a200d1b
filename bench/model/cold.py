"""One cold process per image, as a shell loop over a CLI would: load the
model, read one image, exit."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ocr  # noqa: E402

if __name__ == "__main__":
    ocr.load()
    print(ocr.read(sys.argv[1])["lines"])
