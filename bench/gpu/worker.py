#!/usr/bin/env python3
"""A worker that holds GPU memory, standard library only (bench/gpu.sh).

It opens a CUDA context through the driver's own library (libcuda.so.1,
installed with NVIDIA's driver, through ctypes: no package to install),
allocates KENNEL_GPU_HOLD bytes (default 1 GiB) on the one device CUDA
shows it, and says in its ready line what it was told and what CUDA sees:
CUDA_VISIBLE_DEVICES, KENNEL_GPU, the device's name and UUID. It answers
each request with the same, and its pid. It speaks the JSON-lines protocol
of docs/PROTOCOL.md.
"""

import ctypes
import json
import os
import sys

OUT = sys.stdout
sys.stdout = sys.stderr


def send(message):
    OUT.write(json.dumps(message, separators=(",", ":")) + "\n")
    OUT.flush()


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUDA error {result}")


def open_device():
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    count = ctypes.c_int()
    check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    name = ctypes.create_string_buffer(128)
    check(cuda.cuDeviceGetName(name, 128, device), "cuDeviceGetName")
    uuid = (ctypes.c_ubyte * 16)()
    check(cuda.cuDeviceGetUuid(uuid, device), "cuDeviceGetUuid")
    hexed = bytes(uuid).hex()
    text = f"GPU-{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"
    context = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    held = ctypes.c_uint64()
    size = int(os.environ.get("KENNEL_GPU_HOLD", str(1 << 30)))
    check(cuda.cuMemAlloc_v2(ctypes.byref(held), ctypes.c_size_t(size)), "cuMemAlloc")
    return {
        "devices_seen": count.value,
        "device": name.value.decode(),
        "device_uuid": text,
        "held_bytes": size,
    }


def main():
    told = {
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "kennel_gpu": os.environ.get("KENNEL_GPU"),
        "pid": os.getpid(),
    }
    told.update(open_device())
    send({"ready": True, "kennel_id": True, **told})
    for line in sys.stdin:
        request = json.loads(line)
        reply = {"kennel_id": request.get("kennel_id"), **told} if isinstance(request, dict) else told
        send(reply)


if __name__ == "__main__":
    main()
