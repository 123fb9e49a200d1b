"""kennel_worker tests over json-lines (with and without kennel_id), each
against a real child process of tests/worker.py; the framing's choice; files
sent as base64. The JSON-RPC framings: test_rpc.py. Every wait has a
deadline."""

import os
import sys
import unittest

from child import DEADLINE, HERE, Worker
from framing import FramingTests

if os.path.join(HERE, "..") not in sys.path:  # the source next to the tests
    sys.path.insert(0, os.path.join(HERE, ".."))


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


class FramingChoiceTests(unittest.TestCase):
    def test_framing_argument_env_and_default(self):
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


if __name__ == "__main__":
    unittest.main()
