#!/usr/bin/env python3
"""Holds N `/events` subscribers open on a kennel server and reads them all,
counting frames, until SIGTERM; then prints one line:

    subscribers=N frames=F bytes=B lagged=L closed=C

Usage: bench/events_subscribers.py URL N READY_FILE
(READY_FILE is created once every subscriber got its response head.)
"""
import selectors
import signal
import socket
import sys
import urllib.parse

url, count, ready_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
u = urllib.parse.urlparse(url)
sel = selectors.DefaultSelector()
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
state = {}
for _ in range(count):
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(f"GET /events HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n\r\n".encode())
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    state[s] = {"head": False, "frames": 0, "bytes": 0, "lagged": False}

heads = 0
closed = 0
while not stop:
    for key, _ in sel.select(timeout=0.5):
        s = key.fileobj
        st = state[s]
        try:
            data = s.recv(65536)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            s.close()
            closed += 1
            continue
        st["bytes"] += len(data)
        st["frames"] += data.count(b"\nevent: ") + data.startswith(b"event: ")
        if b"event: lagged" in data:
            st["lagged"] = True
        if not st["head"] and b"\r\n\r\n" in data:
            st["head"] = True
            heads += 1
            if heads == count:
                open(ready_file, "w").close()

frames = sum(st["frames"] for st in state.values())
size = sum(st["bytes"] for st in state.values())
lagged = sum(1 for st in state.values() if st["lagged"])
print(f"subscribers={count} frames={frames} bytes={size} lagged={lagged} closed={closed}", flush=True)
