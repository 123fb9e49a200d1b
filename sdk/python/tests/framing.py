"""What every framing's tests share: a worker of tests/worker.py started as a
real child process (tests/child.py), a request and its reply, and the tests
every framing passes. Subclasses (test_serve.py, test_rpc.py) set the framing
and the shape of its messages. Every wait has a deadline."""

import time

from child import DEADLINE, Worker

CANCEL_BOUND = 2.0  # a cancelled job is answered within this


class FramingTests:
    """The tests every framing passes; subclasses set FRAMING and the message shapes."""

    FRAMING = None

    def setUp(self):
        self.worker = Worker(self.FRAMING)
        self.addCleanup(self.worker.close)
        self.next_id = 0
        self.ready = self.handshake(self.worker)

    # -- per framing

    def handshake(self, worker):
        raise NotImplementedError

    def request(self, op, **params):
        """Sends a request; returns its id (None in json-lines)."""
        raise NotImplementedError

    def is_reply(self, message):
        raise NotImplementedError

    def cancel(self, id):
        raise NotImplementedError

    # -- shared

    def call(self, op, **params):
        """Sends one request; returns (progress messages, the reply)."""
        id = self.request(op, **params)
        return self.collect(id)

    def collect(self, id, timeout=DEADLINE):
        deadline = time.monotonic() + timeout
        before = []
        while True:
            message = self.worker.read(max(0.01, deadline - time.monotonic()))
            if self.is_reply(message):
                self.check_id(message, id)
                return before, message
            before.append(message)

    def check_id(self, message, id):
        pass

    def test_echo_round_trip(self):
        progress, reply = self.call("echo", text="héllo", n=[1, 2, {"x": None}])
        self.assertEqual(progress, [])
        self.assertEqual(self.result(reply)["text"], "héllo")
        self.assertEqual(self.result(reply)["n"], [1, 2, {"x": None}])

    def test_stray_prints_go_to_stderr(self):
        _, reply = self.call("print")
        self.assertEqual(self.result(reply), {"printed": True})
        text = self.worker.stderr_text("raw write on fd 1")
        self.assertIn("stray print from the handler", text)
        self.assertIn("a stray print during load", text)
        _, reply = self.call("echo", after="print")  # the stream is still in step
        self.assertEqual(self.result(reply)["after"], "print")

    def test_exception_becomes_an_error_and_the_worker_goes_on(self):
        _, reply = self.call("crash")
        self.assertEqual(self.error_message(reply), "something broke")
        self.worker.stderr_text("ValueError: something broke")  # the traceback is logged
        _, reply = self.call("nan")
        self.assertIn("the reply is not JSON", self.error_message(reply))
        _, reply = self.call("echo", still="alive")
        self.assertEqual(self.result(reply)["still"], "alive")

    def test_progress_comes_in_order_before_the_reply(self):
        progress, reply = self.call("progress", steps=4)
        self.assertEqual([self.progress_value(p) for p in progress],
                         [{"progress": n, "total": 4, "message": f"step {n}"} for n in range(1, 5)])
        self.assertEqual(self.result(reply), {"done": True})

    def test_cancel_ends_a_long_handler_and_the_same_worker_goes_on(self):
        for op in ("spin", "spin_raise"):
            with self.subTest(op=op):
                id = self.request(op)
                started = self.worker.read()  # the handler's first report: it is running
                self.assertEqual(self.progress_value(started)["message"], "spinning")
                sent = time.monotonic()
                self.cancel(id)
                before, reply = self.collect(id, timeout=CANCEL_BOUND)
                self.assertLess(time.monotonic() - sent, CANCEL_BOUND)
                self.assertEqual(before, [])
                self.assert_cancelled(reply)
                _, reply = self.call("pid")
                self.assertEqual(self.result(reply)["pid"], self.worker.proc.pid)

    def load(self, key):
        """Asks the worker to load `key`; returns its reply."""
        return self.key_request("load", key)

    def unload(self, key):
        return self.key_request("unload", key)

    def test_a_load_calls_load_key_and_answers_loaded(self):
        self.assertEqual(self.result(self.load("model a")), {"loaded": "model a"})
        self.assertEqual(self.result(self.load("b")), {"loaded": "b"})
        _, reply = self.call("held")
        self.assertEqual(self.result(reply), {"held": {"model a": "state of model a", "b": "state of b"}})
        self.assertEqual(self.result(self.unload("model a")), {"unloaded": "model a"})
        _, reply = self.call("held")
        self.assertEqual(self.result(reply), {"held": {"b": "state of b"}})

    def test_a_failed_load_is_an_error_reply_with_its_text_and_the_worker_goes_on(self):
        self.assertEqual(self.error_message(self.load("unknown")), "no key named unknown")
        self.assertEqual(self.error_message(self.load("crash")), "loading broke")
        self.worker.stderr_text("ValueError: loading broke")  # the traceback is logged
        self.assertIn("'never'", self.error_message(self.unload("never")))
        _, reply = self.call("held")
        self.assertEqual(self.result(reply), {"held": {}})

    def test_without_hooks_a_load_and_an_unload_answer_success(self):
        worker = Worker(self.FRAMING, env={"TEST_NO_KEY_HOOKS": "1"})
        self.addCleanup(worker.close)
        self.handshake(worker)
        self.worker = worker
        self.assertEqual(self.result(self.load("a")), {"loaded": "a"})
        self.assertEqual(self.result(self.unload("a")), {"unloaded": "a"})
        _, reply = self.call("held")
        self.assertEqual(self.result(reply), {"held": {}})

    def test_eof_on_stdin_exits_0(self):
        _, reply = self.call("echo")
        self.worker.proc.stdin.close()
        self.assertEqual(self.worker.wait(), 0)
        self.assertEqual(self.worker.messages.get(timeout=DEADLINE)[0], "eof")
