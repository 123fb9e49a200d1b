"""A PEP 517 build backend for kennel_worker, standard library only.

It exists so that `pip install ./sdk/python` works offline: with
`requires = []` pip has nothing to download to build the package (a
setuptools backend would be fetched from PyPI into pip's isolated build
environment). It builds a pure-Python wheel of the `kennel_worker` package,
an editable wheel (a .pth file pointing at this folder) and an sdist.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "kennel_worker"
SUMMARY = "Write a kennel worker in a few lines: serve(handle, load=...). No dependencies."
REQUIRES_PYTHON = ">=3.8"


def _version():
    with open(os.path.join(ROOT, NAME, "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {_version()}\n"
        f"Summary: {SUMMARY}\n"
        "License: MIT OR Apache-2.0\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
        # The optional extra: the thread budget reaches numpy's BLAS and OpenMP pools.
        "Provides-Extra: threads\n"
        'Requires-Dist: threadpoolctl>=3; extra == "threads"\n'
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _wheel_name():
    return f"{NAME}-{_version()}-py3-none-any.whl"


def _package_files():
    package = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if filename.endswith(".py") or filename == "py.typed":
                path = os.path.join(dirpath, filename)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), path


def _write_wheel(directory, files):
    """files: (archive name, bytes); adds the dist-info and the RECORD."""
    dist_info = _dist_info()
    files = list(files) + [
        (f"{dist_info}/METADATA", _metadata().encode("utf-8")),
        (f"{dist_info}/WHEEL", (
            "Wheel-Version: 1.0\nGenerator: kennel_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ).encode()),
        (f"{dist_info}/top_level.txt", f"{NAME}\n".encode()),
    ]
    record = []
    path = os.path.join(directory, _wheel_name())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files:
            wheel.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        wheel.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)),
                       "\n".join(record) + "\n")
    return os.path.basename(path)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    target = os.path.join(metadata_directory, _dist_info())
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, ((name, _read(path)) for name, path in _package_files()))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(f"{NAME}.pth", (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    names = ["pyproject.toml", "README.md", "build_backend/kennel_build.py"]
    names += [name for name, _ in _package_files()]
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for name in names + ["PKG-INFO"]:
            data = _metadata().encode("utf-8") if name == "PKG-INFO" else _read(os.path.join(ROOT, name))
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size = len(data)
            info.mode = 0o644
            sdist.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
