"""kennel_worker tests over JSON-RPC: json-rpc (lines) and content-length
(LSP framing), each against a real child process of tests/worker.py. Every
wait has a deadline."""

import unittest

from child import Worker
from framing import CANCEL_BOUND, FramingTests


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


if __name__ == "__main__":
    unittest.main()
