"""The thread budget applied for the worker: real onnxruntime, numpy (its
OpenBLAS through threadpoolctl) and OpenCV from PyPI, in the venv that
.ci/run makes at target/threads-venv. Without that venv these tests fail,
unless KENNEL_ALLOW_SKIP=1 lets them skip (and the summary says so)."""

import json
import os
import subprocess
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(SDK))
PYTHON = os.path.join(REPO, "target", "threads-venv", "bin", "python")
WORKER = os.path.join(HERE, "threads_worker.py")
# What kennel sets beside KENNEL_THREADS: removed, so that only the SDK can apply the budget.
BUDGET_VARIABLES = (
    "KENNEL_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "RAYON_NUM_THREADS",
)


def run_job(request, **env):
    """Starts the worker, runs one job, returns its reply."""
    if not os.access(PYTHON, os.X_OK):
        if os.environ.get("KENNEL_ALLOW_SKIP") == "1":
            raise unittest.SkipTest(f"SKIPPED: no {PYTHON} (.ci/run makes it)")
        raise AssertionError(f"{PYTHON} is missing: .ci/run makes it (KENNEL_ALLOW_SKIP=1 skips)")
    full = {k: v for k, v in os.environ.items() if k not in BUDGET_VARIABLES}
    full.update(PYTHONPATH=SDK, **env)
    line = json.dumps(dict(request, kennel_id=1)) + "\n"
    done = subprocess.run([PYTHON, WORKER], input=line.encode(), capture_output=True, env=full, timeout=120)
    lines = done.stdout.decode().splitlines()
    if len(lines) != 2:
        raise AssertionError(f"worker answered {lines!r}; stderr: {done.stderr.decode()[-2000:]}")
    reply = json.loads(lines[1])
    if reply.get("error"):
        raise AssertionError(f"job failed: {reply}")
    return reply


class Budget(unittest.TestCase):
    def test_the_budget_is_kennel_threads_as_a_whole_number_of_at_least_one(self):
        import sys

        sys.path.insert(0, SDK)
        from kennel_worker import _threads

        for raw, budget in [("3", 3), (" 1 ", 1), ("", None), ("0", None), ("-2", None), ("1.5", None), ("four", None)]:
            os.environ[_threads.THREADS] = raw
            try:
                self.assertEqual(_threads.threads(), budget, raw)
            finally:
                del os.environ[_threads.THREADS]


class ThreadBudget(unittest.TestCase):
    def test_a_session_made_without_options_runs_one_intra_op_thread_under_a_budget_of_one(self):
        reply = run_job({}, KENNEL_THREADS="1")
        self.assertEqual(reply["budget"], 1)
        self.assertEqual(reply["intra_op_num_threads"], 1)
        self.assertEqual(reply["threads_started"], 0, "an intra-op pool of one thread starts none")

    def test_blas_and_opencv_are_limited_to_the_budget(self):
        reply = run_job({}, KENNEL_THREADS="1")
        self.assertEqual(reply["blas"], [1])
        self.assertEqual(reply["opencv"], 1)

    def test_runtimes_imported_before_serve_get_the_budget_too(self):
        reply = run_job({}, KENNEL_THREADS="1", THREADS_IMPORT="early")
        self.assertEqual((reply["intra_op_num_threads"], reply["blas"], reply["opencv"]), (1, [1], 1))

    def test_a_worker_that_sets_its_own_threads_is_left_alone(self):
        reply = run_job({"own": 3}, KENNEL_THREADS="1")
        self.assertEqual(reply["intra_op_num_threads"], 3)
        self.assertEqual(reply["threads_started"], 2, "its pool of 3 runs on the caller's thread and 2 more")

    def test_apply_threads_false_leaves_every_runtime_at_its_default(self):
        reply = run_job({}, KENNEL_THREADS="1", THREADS_APPLY="off")
        self.assertEqual(reply["intra_op_num_threads"], 0, "0: onnxruntime's own default")
        cores = len(os.sched_getaffinity(0))
        self.assertEqual(reply["blas"], [cores])

    def test_without_a_budget_nothing_is_applied(self):
        reply = run_job({})
        self.assertIsNone(reply["budget"])
        self.assertEqual(reply["intra_op_num_threads"], 0)


if __name__ == "__main__":
    unittest.main()
