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
"content-length". `serve(handle, load_key=..., unload_key=...)` loads and
lets go of keys (a model, a workspace, a session) when kennel asks, for a
pool whose jobs carry keys. Before `load()` it applies the worker's thread budget
(`KENNEL_THREADS`, also `threads()`) to the runtimes that do not read it
themselves: onnxruntime, OpenCV, and numpy's BLAS through threadpoolctl.
"""

import base64
import os
import sys

from ._job import Cancelled, Job, WorkerError, cancelled, current_job, raise_if_cancelled, report
from ._server import _Server
from ._threads import apply_budget, threads

# The protocol's constants, defined beside the server that writes them.
from ._server import (  # noqa: F401
    KENNEL_ID,
    KENNEL_LOAD,
    KENNEL_UNLOAD,
    LOAD_METHOD,
    MCP_PROTOCOL_VERSION,
    RPC_CANCELLED,
    RPC_INVALID_REQUEST,
    RPC_PARSE_ERROR,
    RPC_SERVER_ERROR,
    UNLOAD_METHOD,
)

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
    "threads",
]

__version__ = "0.1.0"

FRAMINGS = ("json-lines", "json-rpc", "content-length")
"""The framings `serve` speaks; `KENNEL_FRAMING` names one when `framing` is not given."""

# Named as before they moved to _job: tracebacks and reprs say kennel_worker.WorkerError.
WorkerError.__module__ = Cancelled.__module__ = Job.__module__ = __name__


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


def serve(handle, load=None, framing=None, name=None, version=None, apply_threads=True,
          load_key=None, unload_key=None):
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
    - `load_key(key)`, `unload_key(key)`: in a pool whose jobs carry keys
      (a model, a workspace, a session), kennel asks the worker to load a
      key before the first job of that key it hands it, and to let go of
      its least recently used key when it holds too many. `load_key` is
      called for a request `{"kennel_load": key}` (json-lines) or a call of
      `kennel/load` with params `{"key": key}` (JSON-RPC; the pool's
      `load_method`), answered `{"loaded": key}`; `unload_key` for
      `kennel_unload` / `kennel/unload`, answered `{"unloaded": key}`. If
      the hook raises, the answer is an error reply with its text (the job
      that needed the key fails with it). Without a hook the answer is
      success: nothing to load.
    - `framing`: "json-lines" (default), "json-rpc" or "content-length";
      when None, the `KENNEL_FRAMING` environment variable names it.
    - `name`, `version`: the `serverInfo` answered to `initialize`.
    - `apply_threads`: apply the worker's thread budget (`threads()`) to
      onnxruntime sessions made without thread options, OpenCV, and numpy's
      and scipy's BLAS and OpenMP pools (with threadpoolctl installed), each
      as it is imported; False leaves every runtime at its own default.
    """
    framing = _resolve_framing(framing)
    if apply_threads:
        apply_budget()
    if name is None:
        name = os.path.splitext(os.path.basename(sys.argv[0] or ""))[0] or "kennel-worker"
    proto_in, proto_out = _protect_stdio()
    server = _Server(handle, framing, name, version or "0", proto_in, proto_out,
                     load_key=load_key, unload_key=unload_key)
    server.start_reader()
    code = server.run(load)
    if code:
        raise SystemExit(code)
