"""Write a kennel worker in a few lines. Standard library only.

    from kennel_worker import serve

    serve(lambda request: request)      # an echo worker

`serve(handle, load=...)` loads once (`load()`), says it is ready, then calls
`handle(request)` for each job and writes its return value as the reply. It
keeps the real stdout for the protocol (stray prints go to stderr), flushes
each message, turns exceptions into error replies (`WorkerError` carries a
status and fields), sends progress (`report(...)`), reads stdin while a job
runs so that a cancel request sets the job's flag (`cancelled()`,
`raise_if_cancelled()`), and returns when stdin ends. It speaks the three
framings of docs/PROTOCOL.md: "json-lines" (the default), "json-rpc" and
"content-length".
"""

import base64
import inspect
import json
import os
import queue
import sys
import threading
import traceback

__all__ = [
    "FRAMINGS",
    "Cancelled",
    "File",
    "Job",
    "WorkerError",
    "cancelled",
    "current_job",
    "files",
    "raise_if_cancelled",
    "report",
    "serve",
]

__version__ = "0.1.0"

FRAMINGS = ("json-lines", "json-rpc", "content-length")
"""The framings `serve` speaks; `KENNEL_FRAMING` names one when `framing` is not given."""

RPC_SERVER_ERROR = -32000
"""The JSON-RPC error code of a failed job, unless `WorkerError(rpc_code=...)` gives one."""
RPC_CANCELLED = -32800
RPC_PARSE_ERROR = -32700
RPC_INVALID_REQUEST = -32600
MCP_PROTOCOL_VERSION = "2025-06-18"
"""The protocolVersion answered to an `initialize` that names none."""


class WorkerError(Exception):
    """A failure the worker reports: the job fails, the worker stays.

    `raise WorkerError("text is too long", status=422, code="too_long", limit=512)`
    is written as `{"error":true,"message":"text is too long","status":422,
    "code":"too_long","limit":512}` in json-lines, and as a JSON-RPC error
    with code `rpc_code` (-32000 unless given) whose `data` holds status and
    fields in the JSON-RPC framings.
    """

    def __init__(self, message, status=None, rpc_code=None, **fields):
        super().__init__(message)
        self.message = str(message)
        self.status = status
        self.rpc_code = rpc_code
        self.fields = fields

    def data(self):
        """The status (when given) and fields, as one dict."""
        data = {} if self.status is None else {"status": self.status}
        data.update(self.fields)
        return data


class Cancelled(Exception):
    """Raised by `raise_if_cancelled()`; the SDK answers the job as cancelled."""

    def __init__(self, message="cancelled"):
        super().__init__(message)


class Job:
    """The job a handler is running. A handler that takes two arguments gets it
    as the second one; `current_job()` returns it from anywhere.

    - `request`: what `handle` got (the request, or the JSON-RPC params);
    - `method`, `id`: the JSON-RPC method and id (None in json-lines);
    - `cancelled()`, `raise_if_cancelled()`, `wait_cancelled(timeout)`;
    - `report(progress, total=None, message=None)`.
    """

    def __init__(self, server, request, method=None, id=None, progress_token=None):
        self.request = request
        self.method = method
        self.id = id
        self.progress_token = progress_token
        self._server = server
        self._cancel = threading.Event()
        self._done = False

    def cancelled(self):
        """True once kennel (or the JSON-RPC client) asked to cancel this job."""
        return self._cancel.is_set()

    def raise_if_cancelled(self):
        """Raises `Cancelled` if the job was asked to stop."""
        if self._cancel.is_set():
            raise Cancelled()

    def wait_cancelled(self, timeout=None):
        """Sleeps up to `timeout` seconds, waking early on a cancel; returns `cancelled()`."""
        return self._cancel.wait(timeout)

    def report(self, progress, total=None, message=None):
        """Sends one progress message for this job, before its reply.

        Ignored (with a note on stderr) once the job has ended: a message
        after the reply would break the protocol.
        """
        self._server.progress(self, progress, total, message)


_current_lock = threading.Lock()
_current = None


def current_job():
    """The job running now, or None between jobs."""
    return _current


def cancelled():
    """True once the running job was asked to stop (False between jobs)."""
    job = _current
    return job is not None and job.cancelled()


def raise_if_cancelled():
    """Raises `Cancelled` if the running job was asked to stop."""
    job = _current
    if job is not None:
        job.raise_if_cancelled()


def report(progress, total=None, message=None):
    """Sends progress for the running job (see `Job.report`)."""
    job = _current
    if job is None:
        _note("report() outside a job is ignored")
        return
    job.report(progress, total, message)


class File:
    """One file of a binary job: `name` (the form field, "body" for an
    application/octet-stream body), `filename`, `content_type` and `data`,
    its bytes."""

    __slots__ = ("name", "filename", "content_type", "data")

    def __init__(self, name, filename, content_type, data):
        self.name = name
        self.filename = filename
        self.content_type = content_type
        self.data = data

    def __repr__(self):
        return f"File(name={self.name!r}, filename={self.filename!r}, content_type={self.content_type!r}, {len(self.data)} bytes)"


def files(request):
    """The files of a binary job, their bytes decoded.

    kennel's service sends an application/octet-stream body, and the file
    parts of a multipart/form-data one, as `{"files": [{"name", "filename",
    "content_type", "size", "base64"}]}` (beside the fields of the form's
    `json` part). Returns [] for a request without files; raises
    `WorkerError` (status 400) for one whose base64 is not.
    """
    items = request.get("files") if isinstance(request, dict) else None
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("base64"), str):
            raise WorkerError("a file of the request has no base64 text", status=400)
        try:
            data = base64.b64decode(item["base64"], validate=True)
        except ValueError as err:
            raise WorkerError(f"a file of the request is not base64: {err}", status=400) from err
        out.append(File(item.get("name"), item.get("filename"), item.get("content_type"), data))
    return out


def _note(text):
    try:
        sys.stderr.write(f"kennel_worker: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _dumps(value):
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _id_key(value):
    return _dumps(value)


def _resolve_framing(framing):
    if framing is None:
        framing = os.environ.get("KENNEL_FRAMING") or "json-lines"
    if framing not in FRAMINGS:
        raise ValueError(f"unknown framing {framing!r}: expected one of {', '.join(FRAMINGS)}")
    return framing


def _protect_stdio():
    """Keeps the real stdin and stdout for the protocol only.

    File descriptor 1 becomes a copy of stderr (so prints, C libraries and
    child processes write to the log), and descriptor 0 reads /dev/null (so
    nothing else eats the requests). Returns the protocol's (input, output).
    """
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    return os.fdopen(in_fd, "rb"), os.fdopen(out_fd, "wb")


# What the reader thread hands the main thread.
_REQUEST = "request"  # (kind, request, method, id, progress_token)
_BAD = "bad"  # (kind, message, id): a message that is not a request
_EOF = "eof"


class _Server:
    def __init__(self, handle, framing, name, version, proto_in, proto_out):
        self.handle = handle
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
                self.send(payload)
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
            self.send(value)

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
            self.send(reply)

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
                self.inbox.put((_REQUEST, message, None, None, None))
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
            if _current is not None:
                _current._cancel.set()

    def _cancel_id(self, id):
        key = _id_key(id)
        with _current_lock:
            if _current is not None and _id_key(_current.id) == key:
                _current._cancel.set()
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
            ready = {"ready": True}
            ready.update((k, v) for k, v in extra.items() if k != "ready")
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
                if load_error is not None:
                    self._send_failure(id, load_error)
                    continue
            self._run_job(Job(self, request, method, id, token))
        return 0

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
        global _current
        with _current_lock:
            _current = job
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
            _current = None
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


def serve(handle, load=None, framing=None, name=None, version=None):
    """Serves jobs on stdin/stdout until stdin ends, then returns.

    - `handle(request)` or `handle(request, job)`: returns the reply (any
      JSON value); raises `WorkerError` for an error reply with a status and
      fields; any other exception becomes an error reply with its text. In
      the JSON-RPC framings `request` is the params and `job.method` the
      method.
    - `load()`: called once before the worker says it is ready; a dict it
      returns adds fields to the ready line (json-lines) or to the
      `initialize` result (JSON-RPC). If it raises, the worker reports the
      warm-up failure and exits with code 1.
    - `framing`: "json-lines" (default), "json-rpc" or "content-length";
      when None, the `KENNEL_FRAMING` environment variable names it.
    - `name`, `version`: the `serverInfo` answered to `initialize`.
    """
    framing = _resolve_framing(framing)
    if name is None:
        name = os.path.splitext(os.path.basename(sys.argv[0] or ""))[0] or "kennel-worker"
    proto_in, proto_out = _protect_stdio()
    server = _Server(handle, framing, name, version or "0", proto_in, proto_out)
    server.start_reader()
    code = server.run(load)
    if code:
        raise SystemExit(code)
