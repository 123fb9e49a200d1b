"""The server behind `serve`: a reader thread takes requests (and cancels)
from stdin, the main thread runs the jobs one at a time and writes the
replies and progress in the chosen framing. Private: kennel_worker
re-exports its protocol constants.
"""

import inspect
import json
import queue
import sys
import threading
import traceback

from . import _job
from ._job import Cancelled, Job, WorkerError, _current_lock, _note

RPC_SERVER_ERROR = -32000
"""The JSON-RPC error code of a failed job, unless `WorkerError(rpc_code=...)` gives one."""
RPC_CANCELLED = -32800
RPC_PARSE_ERROR = -32700
RPC_INVALID_REQUEST = -32600
MCP_PROTOCOL_VERSION = "2025-11-25"
"""The protocolVersion answered to an `initialize` that names none."""
KENNEL_ID = "kennel_id"
"""json-lines: the key of the id kennel adds to a request object; echoed in its reply."""
KENNEL_LOAD = "kennel_load"
"""json-lines: `{"kennel_load": key}` asks the worker to load a key (answered `{"loaded": key}`)."""
KENNEL_UNLOAD = "kennel_unload"
"""json-lines: `{"kennel_unload": key}` asks it to let go of one (answered `{"unloaded": key}`)."""
LOAD_METHOD = "kennel/load"
"""JSON-RPC: the method of a load (params `{"key": key}`), for a pool's `load_method`."""
UNLOAD_METHOD = "kennel/unload"
"""JSON-RPC: the method of an unload, for a pool's `unload_method`."""


def _dumps(value):
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _id_key(value):
    return _dumps(value)


def _with_id(kennel_id, message):
    """json-lines: `message` with the job's `kennel_id` as its first key (an object only)."""
    if kennel_id is None or not isinstance(message, dict):
        return message
    out = {KENNEL_ID: kennel_id}
    out.update((k, v) for k, v in message.items() if k != KENNEL_ID)
    return out


# What the reader thread hands the main thread.
_REQUEST = "request"  # (kind, request, method, id, progress_token)
_BAD = "bad"  # (kind, message, id): a message that is not a request
_EOF = "eof"


class _Server:
    def __init__(self, handle, framing, name, version, proto_in, proto_out, load_key=None, unload_key=None):
        self.handle = handle
        self.load_key = load_key
        self.unload_key = unload_key
        self.framing = framing
        self.rpc = framing != "json-lines"
        self.name = name
        self.version = version
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.write_lock = threading.Lock()
        self.broken = False
        self.inbox = queue.Queue()
        self.pending = {}  # id key -> count of queued requests with that id
        self.cancelled_ids = set()
        self.pass_job = _takes_two(handle)

    # ---- output

    def send(self, message):
        body = _dumps(message).encode("utf-8")
        if self.framing == "content-length":
            data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            data = body + b"\n"
        with self.write_lock:
            if self.broken:
                return
            try:
                self.proto_out.write(data)
                self.proto_out.flush()
            except (OSError, ValueError):
                self.broken = True  # kennel is gone; stop quietly

    def progress(self, job, progress, total, message):
        payload = {"progress": progress}
        if total is not None:
            payload["total"] = total
        if message is not None:
            payload["message"] = message
        with _current_lock:
            if job._done:
                _note("report() after the job ended is ignored")
                return
            if self.framing == "json-lines":
                self.send(_with_id(job.id, payload))
            elif self.framing == "json-rpc":
                params = {"progressToken": job.progress_token}
                params.update(payload)
                self.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
            else:
                self.send({"jsonrpc": "2.0", "method": "$/progress",
                           "params": {"token": job.progress_token, "value": payload}})

    def send_result(self, id, value):
        if self.rpc:
            self.send({"jsonrpc": "2.0", "id": id, "result": value})
        else:
            self.send(_with_id(id, value))

    def send_error(self, id, message, data=None, rpc_code=None):
        data = data or {}
        if self.rpc:
            error = {"code": RPC_SERVER_ERROR if rpc_code is None else rpc_code, "message": message}
            if data:
                error["data"] = data
            self.send({"jsonrpc": "2.0", "id": id, "error": error})
        else:
            reply = {"error": True, "message": message}
            reply.update((k, v) for k, v in data.items() if k not in ("error", "message"))
            self.send(_with_id(id, reply))

    def send_cancelled(self, id):
        if self.rpc:
            self.send_error(id, "request cancelled", rpc_code=RPC_CANCELLED)
        else:
            self.send_error(id, "cancelled", {"cancelled": True})

    # ---- input (the reader thread)

    def read_forever(self):
        try:
            if self.framing == "content-length":
                self._read_content_length()
            else:
                for line in self.proto_in:
                    if line.strip():
                        self._take(line)
        except (OSError, ValueError) as err:
            _note(f"reading stdin failed: {err}")
        self.inbox.put((_EOF,))

    def _read_content_length(self):
        while True:
            headers = {}
            bad_header = None
            while True:
                line = self.proto_in.readline()
                if not line:
                    return
                line = line.rstrip(b"\r\n")
                if not line:
                    if headers or bad_header:
                        break
                    continue  # blank lines between messages
                name, colon, value = line.partition(b":")
                if colon:
                    headers[name.strip().lower()] = value.strip()
                else:
                    bad_header = line
            length = headers.get(b"content-length")
            try:
                size = int(length)
                if size < 0:
                    raise ValueError
            except (TypeError, ValueError):
                what = "no Content-Length header" if length is None else f"bad Content-Length {length!r}"
                self.inbox.put((_BAD, f"parse error: {what}", None))
                continue
            body = self.proto_in.read(size)
            if len(body) < size:
                return
            self._take(body)

    def _take(self, raw):
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as err:
            what = "parse error" if self.rpc else "bad request"
            self.inbox.put((_BAD, f"{what}: {err}", None))
            return
        if not self.rpc:
            if isinstance(message, dict) and len(message) == 1 and message.get("cancel") is True:
                self._cancel_current(None)
            else:
                # kennel's id is the job's, not the handler's: taken out here,
                # echoed in the reply.
                kennel_id = message.pop(KENNEL_ID, None) if isinstance(message, dict) else None
                self.inbox.put((_REQUEST, message, None, kennel_id, None))
            return
        if not isinstance(message, dict):
            self.inbox.put((_BAD, "invalid request: not a JSON-RPC object (batches are not supported)", None))
            return
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                return  # a response to nothing we asked: ignore it
            self.inbox.put((_BAD, "invalid request: no method", message.get("id")))
            return
        if not isinstance(method, str):
            self.inbox.put((_BAD, "invalid request: method is not a string", message.get("id")))
            return
        params = message.get("params")
        if "id" not in message:  # a notification: never answered
            if method in ("notifications/cancelled", "$/cancelRequest") and isinstance(params, dict):
                self._cancel_id(params.get("requestId", params.get("id")))
            return
        id = message["id"]
        token = id
        if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
            token = params["_meta"].get("progressToken", id)
        with _current_lock:
            key = _id_key(id)
            self.pending[key] = self.pending.get(key, 0) + 1
        self.inbox.put((_REQUEST, params, method, id, token))

    def _cancel_current(self, _id):  # json-lines: a cancel line names no job
        with _current_lock:
            if _job._current is not None:
                _job._current._cancel.set()

    def _cancel_id(self, id):
        key = _id_key(id)
        with _current_lock:
            if _job._current is not None and _id_key(_job._current.id) == key:
                _job._current._cancel.set()
            elif self.pending.get(key):
                self.cancelled_ids.add(key)
            # else: already answered (or never seen): nothing to cancel

    # ---- the main thread

    def start_reader(self):
        threading.Thread(target=self.read_forever, name="kennel_worker stdin", daemon=True).start()

    def run(self, load):
        """Loads, says ready, serves until stdin ends. Returns the exit code."""
        try:
            extra = load() if load is not None else None
            load_error = None
        except Exception as err:  # noqa: BLE001 - the warm-up failed: say so
            if not isinstance(err, WorkerError):
                traceback.print_exc(file=sys.stderr)
            extra, load_error = None, err
        if not isinstance(extra, dict):
            extra = {}
        if not self.rpc:
            if load_error is not None:
                self._send_failure(None, load_error)
                return 1
            # It echoes kennel's id in every reply: kennel then holds each
            # reply object to it.
            ready = {"ready": True, KENNEL_ID: True}
            ready.update((k, v) for k, v in extra.items() if k not in ("ready", KENNEL_ID))
            self.send(ready)
        while not self.broken:
            item = self.inbox.get()
            if item[0] == _EOF:
                return 0 if load_error is None else 1
            if item[0] == _BAD:
                _, message, id = item
                if self.rpc:
                    code = RPC_PARSE_ERROR if message.startswith("parse error") else RPC_INVALID_REQUEST
                    self.send_error(id, message, rpc_code=code)
                else:
                    self.send_error(None, message)
                continue
            _, request, method, id, token = item
            if self.rpc:
                with _current_lock:
                    key = _id_key(id)
                    left = self.pending.get(key, 1) - 1
                    if left > 0:
                        self.pending[key] = left
                    else:
                        self.pending.pop(key, None)
                    was_cancelled = key in self.cancelled_ids
                    self.cancelled_ids.discard(key)
                if was_cancelled:
                    self.send_cancelled(id)
                    continue
                if method == "initialize":
                    if load_error is not None:
                        self._send_failure(id, load_error)
                        return 1
                    self.send_result(id, self._initialize_result(request, extra))
                    continue
                if method == "ping":
                    self.send_result(id, {})
                    continue
                if method == "shutdown" and self.framing == "content-length":
                    # LSP's end, which kennel sends at close before `exit`:
                    # answered here, never a job; the worker ends with its
                    # stdin.
                    self.send_result(id, None)
                    continue
                if load_error is not None:
                    self._send_failure(id, load_error)
                    continue
            key_request = self._key_request(request, method)
            if key_request is not None:
                self._run_key_request(id, *key_request)
                continue
            self._run_job(Job(self, request, method, id, token))
        return 0

    def _key_request(self, request, method):
        """A load or an unload of a key: (hook, reply key, key), else None.

        json-lines: an object whose only key (kennel's id aside) is
        `kennel_load` or `kennel_unload`, a string; JSON-RPC: the method
        `kennel/load` or `kennel/unload` with params `{"key": ...}`.
        """
        if self.rpc:
            kinds = {LOAD_METHOD: "load", UNLOAD_METHOD: "unload"}
            kind = kinds.get(method)
            key = request.get("key") if isinstance(request, dict) else None
        else:
            kinds = {KENNEL_LOAD: "load", KENNEL_UNLOAD: "unload"}
            if not isinstance(request, dict) or len(request) != 1:
                return None
            (name, key), = request.items()
            kind = kinds.get(name)
        if kind is None or not isinstance(key, str):
            return None
        if kind == "load":
            return self.load_key, "loaded", key
        return self.unload_key, "unloaded", key

    def _run_key_request(self, id, hook, answer, key):
        """Calls the hook (none: nothing to load) and answers {answer: key}."""
        try:
            if hook is not None:
                hook(key)
        except Exception as err:  # noqa: BLE001 - a failed load is an error reply
            if not isinstance(err, WorkerError):
                traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
            self._send_failure(id, err)
            return
        self.send_result(id, {answer: key})

    def _initialize_result(self, params, extra):
        version = MCP_PROTOCOL_VERSION
        if isinstance(params, dict) and isinstance(params.get("protocolVersion"), str):
            version = params["protocolVersion"]
        result = dict(extra)
        result.update({
            "protocolVersion": version,
            "capabilities": {},
            "serverInfo": {"name": self.name, "version": self.version},
        })
        return result

    def _run_job(self, job):
        with _current_lock:
            _job._current = job
        failure = None
        reply = None
        try:
            reply = self.handle(job.request, job) if self.pass_job else self.handle(job.request)
        except Cancelled:
            pass
        except Exception as err:  # noqa: BLE001 - every failure is an error reply
            if not isinstance(err, WorkerError):
                traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
            failure = err
        else:
            try:
                _dumps(reply)  # a reply that is not JSON fails here, not half-written
            except (TypeError, ValueError) as err:
                failure = WorkerError(f"the reply is not JSON: {err}")
        with _current_lock:
            _job._current = None
            job._done = True
            was_cancelled = job._cancel.is_set()
        if was_cancelled:
            self.send_cancelled(job.id)
        elif failure is not None:
            self._send_failure(job.id, failure)
        else:
            self.send_result(job.id, reply)

    def _send_failure(self, id, err):
        if isinstance(err, WorkerError):
            self.send_error(id, err.message, err.data(), err.rpc_code)
            return
        if isinstance(err, Cancelled):
            self.send_cancelled(id)
            return
        self.send_error(id, str(err) or type(err).__name__)


def _takes_two(handle):
    try:
        parameters = inspect.signature(handle).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in parameters:
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2
