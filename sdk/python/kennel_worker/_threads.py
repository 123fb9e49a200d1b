"""The worker's thread budget, applied to the runtimes that do not read it.

kennel gives each worker its share of the cores as `KENNEL_THREADS` (and as
`OMP_NUM_THREADS`, `OPENBLAS_NUM_THREADS`, ... for the libraries that read
those). Some runtimes size their pools by the machine's cores whatever the
environment says; `serve` applies the budget to these before `load()` runs,
to each when it is imported (or at once when it already is):

- onnxruntime: an `InferenceSession` made without options, or with options
  whose `intra_op_num_threads` is 0 (unset), runs `budget` intra-op threads;
- OpenCV: `cv2.setNumThreads(budget)`;
- the BLAS and OpenMP pools of numpy, scipy and of the runtimes above (some
  bring their own), through `threadpoolctl` when it is installed (`pip
  install kennel-worker[threads]`): limited to `budget` as each is imported.

What the worker sets itself wins: explicit `SessionOptions` threads, and a
call to `cv2.setNumThreads` or `threadpool_limits` in `load()` or later.
`serve(..., apply_threads=False)` applies nothing.
"""

import importlib.abc
import os
import sys

THREADS = "KENNEL_THREADS"


def threads():
    """The worker's thread budget (`KENNEL_THREADS`), or None when kennel gave none.

    For a runtime with a setting of its own: `torch.set_num_threads(threads())`,
    a thread pool's size.
    """
    raw = os.environ.get(THREADS, "").strip()
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 1 else None


def _onnxruntime(ort, budget):
    session = ort.InferenceSession
    init = session.__init__
    if getattr(init, "_kennel_budget", None) is not None:
        return

    def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
        if sess_options is None:
            sess_options = ort.SessionOptions()
        if sess_options.intra_op_num_threads == 0:
            sess_options.intra_op_num_threads = budget
        init(self, path_or_bytes, sess_options, *args, **kwargs)

    __init__._kennel_budget = budget
    __init__.__doc__ = init.__doc__
    session.__init__ = __init__


def _opencv(cv2, budget):
    cv2.setNumThreads(budget)


def _blas(_module, budget):
    """Numpy and scipy: what every runtime gets (`_apply`)."""


def _apply(apply, module, budget):
    """The runtime's own setting, then every BLAS and OpenMP pool loaded by now."""
    apply(module, budget)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=budget)


_RUNTIMES = {
    "onnxruntime": _onnxruntime,
    "cv2": _opencv,
    "numpy": _blas,
    "scipy": _blas,
}


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the budget."""

    def __init__(self, inner, after):
        self._inner = inner
        self._after = after

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Applies the budget to each runtime of `_RUNTIMES` once it is imported."""

    def __init__(self, budget, pending):
        self.budget = budget
        self.pending = pending

    def find_spec(self, name, path, target=None):
        apply = self.pending.pop(name, None)
        if apply is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None:
            return spec
        budget = self.budget
        spec.loader = _Loader(spec.loader, lambda module: _apply(apply, module, budget))
        return spec


def apply_budget():
    """Applies `threads()` to the runtimes above; does nothing without a budget."""
    budget = threads()
    if budget is None:
        return
    pending = {}
    for name, apply in _RUNTIMES.items():
        module = sys.modules.get(name)
        if module is not None:
            _apply(apply, module, budget)
        else:
            pending[name] = apply
    if pending:
        sys.meta_path.insert(0, _AfterImport(budget, pending))
