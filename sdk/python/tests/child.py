"""A running tests/worker.py as a real child process, with its stdout parsed
into messages: the harness of the SDK's tests. Every wait has a deadline."""

import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
DEADLINE = 10.0  # seconds: a bound, never a sleep


class Worker:
    """A running tests/worker.py, with its stdout parsed into messages."""

    def __init__(self, framing, env=None):
        self.framing = framing
        full_env = dict(os.environ, KENNEL_FRAMING=framing, PYTHONUNBUFFERED="1")
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
        )
        self.messages = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        out = self.proc.stdout
        try:
            if self.framing == "content-length":
                while True:
                    headers = {}
                    while True:
                        line = out.readline()
                        if not line:
                            return
                        line = line.rstrip(b"\r\n")
                        if not line:
                            break
                        name, _, value = line.partition(b":")
                        headers[name.strip().lower()] = value.strip()
                    body = out.read(int(headers[b"content-length"]))
                    self.messages.put(("json", json.loads(body)))
            else:
                for line in out:
                    try:
                        self.messages.put(("json", json.loads(line)))
                    except ValueError:
                        self.messages.put(("text", line))
        finally:
            self.messages.put(("eof", None))

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def write_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        body = json.dumps(message).encode()
        if self.framing == "content-length":
            self.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        else:
            self.write_raw(body + b"\n")

    def read(self, timeout=DEADLINE):
        try:
            kind, value = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message within {timeout} s; stderr: {''.join(self.stderr)}") from None
        if kind != "json":
            raise AssertionError(f"expected a JSON message, got {kind}: {value!r}")
        return value

    def assert_quiet(self, timeout=0.2):
        """No message arrives within `timeout` (used after a line that needs no answer)."""
        try:
            kind, value = self.messages.get(timeout=timeout)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected output: {kind} {value!r}")

    def wait(self, timeout=DEADLINE):
        return self.proc.wait(timeout=timeout)

    def stderr_text(self, expect, timeout=DEADLINE):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = "".join(self.stderr)
            if expect in text:
                return text
            time.sleep(0.01)
        raise AssertionError(f"{expect!r} never appeared on stderr: {''.join(self.stderr)!r}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=DEADLINE)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
