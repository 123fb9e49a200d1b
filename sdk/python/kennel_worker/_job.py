"""The job a handler runs: the errors it raises (WorkerError, Cancelled), the
Job, and the job running now (current_job, cancelled, raise_if_cancelled,
report). Private: kennel_worker re-exports these names; _server sets the
running job (`_current`) under `_current_lock`.
"""

import sys
import threading


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
    - `method`, `id`: the JSON-RPC method and id (in json-lines no method, and
      the `kennel_id` kennel gave the request, which the SDK echoes; None
      when it gave none);
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


def _note(text):
    try:
        sys.stderr.write(f"kennel_worker: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
