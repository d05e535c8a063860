"""The client against the API's contract where it broke it: dot ids,
redirects, binary fetch bodies, a deadline for the whole answer, answers
cut short, and canonical JSON the server takes."""

from __future__ import annotations

import base64
import os
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, ".."))

from artifactd import CanonicalError, Client, Problem, TransportError, canonicalize  # noqa: E402

from .server import Server  # noqa: E402


def _listener() -> socket.socket:
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    return lst


class DotIdTest(unittest.TestCase):
    def test_dot_ids_read_back_as_themselves(self) -> None:
        """"." and ".." went out as dot segments; the server redirected to
        the cleaned path and the client answered the context's description
        (or the artifact list) as the artifact."""
        with Server() as s:
            c = Client(s.url)
            c.ensure_context("dots")
            for id in ("..", "."):
                c.put_artifact("dots", "note", {"text": "id " + id}, id=id)
            for id in ("..", "."):
                self.assertEqual(c.artifact("dots", id).get("id"), id)


class RedirectTest(unittest.TestCase):
    def test_a_redirect_is_an_error(self) -> None:
        lst = _listener()
        port = lst.getsockname()[1]

        def serve() -> None:
            while True:
                try:
                    conn, _ = lst.accept()
                except OSError:
                    return
                req = conn.recv(65536)
                if b" /v1/contexts/c " in req:
                    body = b'{"id":"c"}'
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                else:
                    conn.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v1/contexts/c\r\nContent-Length: 0\r\n\r\n")
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        try:
            with self.assertRaises(Problem) as cm:
                Client(f"http://127.0.0.1:{port}", retries=0).artifact("c", "x")
            self.assertEqual(cm.exception.status, 307)
        finally:
            lst.close()


class RecordFetchBase64Test(unittest.TestCase):
    def test_body_base64_is_sent_alone(self) -> None:
        """The body went as "" beside body_base64, which the server refuses."""
        with Server() as s:
            c = Client(s.url)
            c.ensure_context("b64", "observe")
            raw = b"%PDF-1.7 binary report bytes \x00\x01\x02 and some readable text for the gate"
            v = c.record_fetch("b64", "https://example.com/r.pdf", 200, id="pdf",
                               headers={"content-type": "application/octet-stream"},
                               body_base64=base64.b64encode(raw).decode())
            self.assertIn(v["verdict"], ("RETRIEVED", "FAILED", "UNKNOWN"))
            t = c.record_fetch("b64", "https://example.com/down", id="down", error="connection refused")
            self.assertEqual(t["verdict"], "FAILED")


class DeadlineTest(unittest.TestCase):
    def test_timeout_bounds_the_whole_answer(self) -> None:
        """The timeout bounded each socket read: a byte every half second
        held Client(timeout=1.0) for as long as the server liked."""
        lst = _listener()
        port = lst.getsockname()[1]
        stop = threading.Event()

        def serve() -> None:
            conn, _ = lst.accept()
            conn.recv(65536)
            body = b'{"commit":"' + b"x" * 40 + b'"}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            for ch in body:
                if stop.is_set():
                    break
                try:
                    conn.sendall(bytes([ch]))
                except OSError:
                    break
                time.sleep(0.5)
            conn.close()

        threading.Thread(target=serve, daemon=True).start()
        c = Client(f"http://127.0.0.1:{port}", timeout=1.0, retries=0)
        start = time.monotonic()
        try:
            with self.assertRaises(TransportError):
                c.hash("x")
            self.assertLess(time.monotonic() - start, 5.0)
        finally:
            stop.set()
            lst.close()


class CutAnswerTest(unittest.TestCase):
    def test_cut_answer_is_a_transport_error_and_retried(self) -> None:
        """http.client.IncompleteRead escaped as itself, not retried."""
        lst = _listener()
        port = lst.getsockname()[1]
        seen = []

        def serve() -> None:
            while True:
                try:
                    conn, _ = lst.accept()
                except OSError:
                    return
                conn.recv(65536)
                seen.append(1)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"10\r\n{\"artifacts\":[{\"")
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        c = Client(f"http://127.0.0.1:{port}", timeout=5, retries=2, backoff=0.01)
        try:
            with self.assertRaises(TransportError):
                c.state("x")
            self.assertEqual(len(seen), 3)
        finally:
            lst.close()


class CanonicalContractTest(unittest.TestCase):
    def test_an_integer_that_is_a_canonical_double(self) -> None:
        """The server takes 100000000000000000000 (1e20's canonical form)."""
        self.assertEqual(canonicalize(10**20), "100000000000000000000")
        with self.assertRaises(CanonicalError):
            canonicalize(10**20 + 1)

    def test_a_key_that_is_not_a_string(self) -> None:
        with self.assertRaises(CanonicalError):
            canonicalize({1: "a", 2: "b"})


if __name__ == "__main__":
    unittest.main()
