"""kennel_worker tests: each starts tests/worker.py as a real child process
(tests/child.py) and talks to it over its pipes, once per framing. Every wait
has a deadline."""

import os
import sys
import time
import unittest

from child import DEADLINE, HERE, Worker

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


class JsonLinesTests(FramingTests, unittest.TestCase):
    FRAMING = "json-lines"

    def handshake(self, worker):
        return worker.read()

    def request(self, op, **params):
        self.worker.send(dict(params, op=op))

    def is_reply(self, message):
        return not (isinstance(message, dict) and "progress" in message
                    and set(message) <= {"progress", "total", "message"})

    def cancel(self, id):
        self.worker.send({"cancel": True})

    def key_request(self, kind, key):
        self.worker.send({f"kennel_{kind}": key})
        return self.worker.read()

    def test_kennel_load_beside_other_keys_is_a_job(self):
        _, reply = self.call("echo", kennel_load="a")
        self.assertEqual(reply, {"op": "echo", "kennel_load": "a"})
        self.worker.send({"kennel_load": 7})  # not a key: a job like any other
        self.assertEqual(self.worker.read(), {"kennel_load": 7})
        _, reply = self.call("held")
        self.assertEqual(reply, {"held": {}})

    def result(self, reply):
        self.assertFalse(isinstance(reply, dict) and reply.get("error") is True, reply)
        return reply

    def error_message(self, reply):
        self.assertIs(reply.get("error"), True, reply)
        return reply["message"]

    def progress_value(self, message):
        return message

    def assert_cancelled(self, reply):
        self.assertEqual(reply, {"error": True, "message": "cancelled", "cancelled": True})

    def test_ready_line_has_the_fields_load_returned(self):
        self.assertEqual(self.ready, {"ready": True, "kennel_id": True, "model": "tiny", "pid": self.worker.proc.pid})

    def test_worker_error_has_status_and_fields(self):
        _, reply = self.call("error")
        self.assertEqual(reply, {"error": True, "message": "text is too long",
                                 "status": 422, "code": "too_long", "limit": 5})

    def test_bad_request_line_is_answered_and_the_worker_goes_on(self):
        self.worker.write_raw(b"this is not json\n")
        reply = self.worker.read()
        self.assertIs(reply["error"], True)
        self.assertTrue(reply["message"].startswith("bad request: "), reply)
        self.worker.write_raw(b"\n   \n")  # blank lines are skipped, not answered
        _, reply = self.call("echo", ok=1)
        self.assertEqual(reply, {"op": "echo", "ok": 1})

    def test_a_request_can_be_any_json_value(self):
        self.worker.send([1, "two"])
        self.assertEqual(self.worker.read(), [1, "two"])

    def test_a_cancel_line_between_jobs_is_ignored(self):
        self.worker.send({"cancel": True})
        self.worker.assert_quiet()
        self.worker.send({"cancel": 1})  # not a cancel line: a request like any other
        self.assertEqual(self.worker.read(), {"cancel": 1})
        _, reply = self.call("echo", ok=2)
        self.assertEqual(reply, {"op": "echo", "ok": 2})

    def test_a_failed_load_is_an_error_line_and_exit_1(self):
        worker = Worker(self.FRAMING, env={"TEST_LOAD_FAILS": "1"})
        self.addCleanup(worker.close)
        self.assertEqual(worker.read(), {"error": True, "message": "no model here", "status": 503})
        self.assertEqual(worker.wait(), 1)



class JsonLinesWithIdsTests(JsonLinesTests):
    """json-lines as kennel sends it: each request object carries `kennel_id`,
    which the handler never sees and every reply and progress line echoes as
    its first key."""

    def request(self, op, **params):
        self.next_id += 1
        self.worker.send(dict({"kennel_id": self.next_id, "op": op}, **params))
        return self.next_id

    def is_reply(self, message):
        return not (isinstance(message, dict) and "progress" in message
                    and set(message) <= {"progress", "total", "message", "kennel_id"})

    def collect(self, id, timeout=DEADLINE):
        before, reply = super().collect(id, timeout)
        for message in before:
            self.check_id(message, id)
        return before, reply

    def check_id(self, message, id):
        self.assertEqual(next(iter(message)), "kennel_id", message)
        self.assertEqual(message.pop("kennel_id"), id, message)

    def key_request(self, kind, key):
        self.next_id += 1
        self.worker.send({"kennel_id": self.next_id, f"kennel_{kind}": key})
        return self.collect(self.next_id)[1]

    def test_the_handler_never_sees_the_id(self):
        _, reply = self.call("keys", a=1)
        self.assertEqual(reply, {"keys": ["a", "op"]})

    def test_a_request_without_an_id_gets_a_reply_without_one(self):
        self.worker.send({"op": "keys"})
        self.assertEqual(self.worker.read(), {"keys": ["op"]})

class RpcTests(FramingTests):
    """What json-rpc and content-length share: the same messages."""

    CANCEL = None
    PROGRESS = None

    def handshake(self, worker):
        worker.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                     "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                                "clientInfo": {"name": "tests", "version": "0"}}})
        reply = worker.read()
        worker.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def request(self, op, _meta=None, **params):
        self.next_id += 1
        if _meta is not None:
            params["_meta"] = _meta
        self.worker.send({"jsonrpc": "2.0", "id": self.next_id, "method": op, "params": params})
        return self.next_id

    def is_reply(self, message):
        return "method" not in message

    def check_id(self, message, id):
        self.assertEqual(message["id"], id, message)

    def key_request(self, kind, key):
        self.next_id += 1
        self.worker.send({"jsonrpc": "2.0", "id": self.next_id, "method": f"kennel/{kind}",
                          "params": {"key": key}})
        return self.collect(self.next_id)[1]

    def cancel(self, id):
        params = {"requestId": id, "reason": "test"} if self.CANCEL == "notifications/cancelled" else {"id": id}
        self.worker.send({"jsonrpc": "2.0", "method": self.CANCEL, "params": params})

    def result(self, reply):
        self.assertEqual(reply["jsonrpc"], "2.0")
        self.assertNotIn("error", reply)
        return reply["result"]

    def error_message(self, reply):
        return reply["error"]["message"]

    def assert_cancelled(self, reply):
        self.assertEqual(reply["error"], {"code": -32800, "message": "request cancelled"})

    def test_initialize_result_has_the_fields_load_returned(self):
        self.assertEqual(self.ready, {
            "jsonrpc": "2.0", "id": "init",
            "result": {"protocolVersion": "2025-03-26", "capabilities": {},
                       "serverInfo": {"name": "test-worker", "version": "1.2.3"},
                       "model": "tiny", "pid": self.worker.proc.pid},
        })
        _, reply = self.call("ping")
        self.assertEqual(self.result(reply), {})

    def test_the_handler_gets_method_and_params(self):
        _, reply = self.call("echo", a=1)
        self.assertEqual(self.result(reply), {"a": 1})
        self.next_id += 1
        self.worker.send({"jsonrpc": "2.0", "id": self.next_id, "method": "echo"})
        self.assertIsNone(self.result(self.collect(self.next_id)[1]))

    def test_worker_error_has_status_and_fields_in_data(self):
        _, reply = self.call("error")
        self.assertEqual(reply["error"], {"code": -32000, "message": "text is too long",
                                          "data": {"status": 422, "code": "too_long", "limit": 5}})
        _, reply = self.call("rpc_code")
        self.assertEqual(reply["error"], {"code": -32602, "message": "no such tool"})

    def test_progress_token_comes_from_meta_or_the_id(self):
        progress, _ = self.call("progress", steps=1, _meta={"progressToken": "tok-7"})
        self.assertEqual(self.token(progress[0]), "tok-7")
        progress, _ = self.call("progress", steps=1)
        self.assertEqual(self.token(progress[0]), self.next_id)
        self.assertEqual(progress[0]["method"], self.PROGRESS)

    def test_a_queued_request_can_be_cancelled_before_it_starts(self):
        first = self.request("spin")
        self.worker.read()  # spinning
        second = self.request("echo", never="run")
        self.cancel(second)
        self.cancel(first)
        _, reply = self.collect(first, timeout=CANCEL_BOUND)
        self.assert_cancelled(reply)
        _, reply = self.collect(second, timeout=CANCEL_BOUND)
        self.assert_cancelled(reply)
        self.cancel(first)  # answered already: nothing to cancel, nothing written
        _, reply = self.call("echo", after="cancel")
        self.assertEqual(self.result(reply), {"after": "cancel"})

    def test_bad_message_is_answered_and_the_worker_goes_on(self):
        self.worker.send({"jsonrpc": "2.0", "id": 99, "params": {}})
        self.assertEqual(self.worker.read()["error"]["code"], -32600)
        self.worker.send([{"jsonrpc": "2.0", "id": 1, "method": "echo"}])
        self.assertEqual(self.worker.read()["error"]["code"], -32600)
        self.worker.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
        self.worker.send({"jsonrpc": "2.0", "id": 5, "result": {}})  # a response: ignored
        self.worker.assert_quiet()
        _, reply = self.call("echo", ok=3)
        self.assertEqual(self.result(reply), {"ok": 3})

    def test_a_failed_load_answers_initialize_with_an_error_and_exits_1(self):
        worker = Worker(self.FRAMING, env={"TEST_LOAD_FAILS": "1"})
        self.addCleanup(worker.close)
        reply = self.handshake(worker)
        self.assertEqual(reply["error"], {"code": -32000, "message": "no model here",
                                          "data": {"status": 503}})
        self.assertEqual(worker.wait(), 1)


class JsonRpcTests(RpcTests, unittest.TestCase):
    FRAMING = "json-rpc"
    CANCEL = "notifications/cancelled"
    PROGRESS = "notifications/progress"

    def progress_value(self, message):
        self.assertEqual(message["method"], self.PROGRESS)
        return {k: v for k, v in message["params"].items() if k != "progressToken"}

    def token(self, message):
        return message["params"]["progressToken"]

    def test_bad_json_line_is_a_parse_error(self):
        self.worker.write_raw(b"{nope\n")
        reply = self.worker.read()
        self.assertIsNone(reply["id"])
        self.assertEqual(reply["error"]["code"], -32700)
        _, reply = self.call("echo", ok=4)
        self.assertEqual(self.result(reply), {"ok": 4})


class ContentLengthTests(RpcTests, unittest.TestCase):
    FRAMING = "content-length"
    CANCEL = "$/cancelRequest"
    PROGRESS = "$/progress"

    def progress_value(self, message):
        self.assertEqual(message["method"], self.PROGRESS)
        return message["params"]["value"]

    def token(self, message):
        return message["params"]["token"]

    def test_shutdown_is_answered_null_and_never_reaches_the_handler(self):
        # The test worker's handler answers an unknown op with an error.
        _, reply = self.call("shutdown")
        self.assertIsNone(self.result(reply))
        _, reply = self.call("echo", ok=6)
        self.assertEqual(self.result(reply), {"ok": 6})

    def test_bad_frames_are_parse_errors(self):
        self.worker.write_raw(b"Content-Length: 5\r\n\r\n{nope")
        reply = self.worker.read()
        self.assertEqual((reply["id"], reply["error"]["code"]), (None, -32700))
        self.worker.write_raw(b"Content-Type: application/json\r\n\r\n")
        reply = self.worker.read()
        self.assertEqual(reply["error"]["code"], -32700)
        self.assertIn("Content-Length", reply["error"]["message"])
        body = b'{"jsonrpc":"2.0","id":"x","method":"echo","params":{"ok":5}}'
        self.worker.write_raw(b"content-length:%d\r\nContent-Type: x\r\n\r\n" % len(body) + body)
        _, reply = self.collect("x")
        self.assertEqual(self.result(reply), {"ok": 5})


class FramingChoiceTests(unittest.TestCase):
    def test_framing_argument_env_and_default(self):
        sys.path.insert(0, os.path.join(HERE, ".."))
        from kennel_worker import _resolve_framing

        old = os.environ.pop("KENNEL_FRAMING", None)
        try:
            self.assertEqual(_resolve_framing(None), "json-lines")
            os.environ["KENNEL_FRAMING"] = "content-length"
            self.assertEqual(_resolve_framing(None), "content-length")
            self.assertEqual(_resolve_framing("json-rpc"), "json-rpc")
            with self.assertRaisesRegex(ValueError, "unknown framing 'xml'"):
                _resolve_framing("xml")
        finally:
            os.environ.pop("KENNEL_FRAMING", None)
            if old is not None:
                os.environ["KENNEL_FRAMING"] = old


if __name__ == "__main__":
    unittest.main()


if os.path.join(HERE, "..") not in sys.path:  # the source next to the tests
    sys.path.insert(0, os.path.join(HERE, ".."))


class FilesTests(unittest.TestCase):
    """`files(request)` decodes what kennel's service sends for binary bodies."""

    def test_files_come_back_as_bytes(self):
        from kennel_worker import files

        got = files({"lang": "fr", "files": [
            {"name": "photo", "filename": "a.png", "content_type": "image/png", "size": 3, "base64": "AQID"},
        ]})
        self.assertEqual(len(got), 1)
        self.assertEqual((got[0].name, got[0].filename, got[0].content_type), ("photo", "a.png", "image/png"))
        self.assertEqual(got[0].data, b"\x01\x02\x03")
        self.assertEqual(files({"text": "no files"}), [])
        self.assertEqual(files([1, 2]), [])

    def test_bad_base64_is_a_400_worker_error(self):
        from kennel_worker import WorkerError, files

        with self.assertRaises(WorkerError) as caught:
            files({"files": [{"name": "x", "base64": "not base64!"}]})
        self.assertEqual(caught.exception.status, 400)
