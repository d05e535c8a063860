"""The client against the API's contract where it broke it: dot ids,
redirects, binary fetch bodies, a deadline for the whole answer, answers
cut short or too long, the bearer token kept out of errors, and canonical
JSON the server takes."""

from __future__ import annotations

import base64
import enum
import json
import os
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, ".."))

from artifactd import (AnswerTooLarge, CanonicalError, Client, Problem, TransportError,  # noqa: E402
                       canonicalize)

from .server import Server  # noqa: E402


def _listener() -> socket.socket:
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    return lst


class _Raw:
    """A local TCP server: each connection's request head is read, then
    serve(conn, head) writes raw bytes; heads keeps the heads read."""

    def __init__(self, test: unittest.TestCase, serve) -> None:
        self.lst = _listener()
        self.url = "http://127.0.0.1:%d" % self.lst.getsockname()[1]
        self.heads: list = []
        self.done = threading.Event()
        test.addCleanup(self.close)

        def loop() -> None:
            while True:
                try:
                    conn, _ = self.lst.accept()
                except OSError:
                    return
                threading.Thread(target=self.one, args=(serve, conn), daemon=True).start()

        threading.Thread(target=loop, daemon=True).start()

    def one(self, serve, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            self.heads.append(head)
            try:
                serve(conn, head)
            except OSError:
                pass

    def close(self) -> None:
        self.done.set()
        self.lst.close()


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


    def test_timeout_bounds_the_answers_head(self) -> None:
        """The timeout bounded each socket read of the answer's head too: a
        server sending its status line and headers a byte every 0.2 s held
        Client(timeout=1.0) until it was done, 13 s here."""
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 10 +
                b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")

        def serve(conn: socket.socket, _: bytes) -> None:
            for ch in head:
                if r.done.wait(0.2):
                    return
                conn.sendall(bytes([ch]))

        r = _Raw(self, serve)
        start = time.monotonic()
        with self.assertRaises(TransportError):
            Client(r.url, timeout=1.0, retries=0).hash("x")
        self.assertLess(time.monotonic() - start, 3.0)


class TokenTest(unittest.TestCase):
    SECRET = "s3cr3t-token-value-0123456789"

    def test_surrounding_whitespace_is_stripped(self) -> None:
        """A token read from a file kept its newline, and http.client's
        refusal of the header quoted it: "Invalid header value
        b'Bearer s3cr3t…\\n'" in the TransportError."""
        ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        r = _Raw(self, lambda conn, _: conn.sendall(ok))
        try:
            Client(r.url, token=" " + self.SECRET + "\n", retries=0).hash("x")
        except TransportError as e:
            self.fail(f"{type(e).__name__}: {e}")
        self.assertIn(b"\r\nAuthorization: Bearer " + self.SECRET.encode() + b"\r\n", r.heads[0])

    def test_control_characters_are_refused_without_the_token(self) -> None:
        for bad in (self.SECRET + "\nX", self.SECRET[:6] + "\r" + self.SECRET[6:], self.SECRET[:6] + "\x00" + self.SECRET[6:], self.SECRET + "\x7f!"):
            with self.subTest(token=repr(bad)):
                with self.assertRaises(ValueError) as cm:
                    Client("http://127.0.0.1:9", token=bad)
                self.assertNotIn(self.SECRET[:6], str(cm.exception))
                self.assertIn("control character", str(cm.exception))


class AnswerLimitTest(unittest.TestCase):
    """Answers are read up to the Go client's bounds: max_answer_bytes
    (1 GiB by default) of a success, 16 MiB of a JSON refusal, 4 KiB of
    any other kept as its detail."""

    def test_a_success_past_the_limit_is_an_error_and_not_sent_again(self) -> None:
        """An answer of any length was read whole into memory (400 MiB)."""
        sent = []

        def serve(conn: socket.socket, _: bytes) -> None:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
            for _ in range(64):  # 4 MiB, unless the client stops first
                if r.done.is_set():
                    return
                conn.sendall(chunk)
                sent.append(1)
            conn.sendall(b"0\r\n\r\n")

        r = _Raw(self, serve)
        with self.assertRaises(AnswerTooLarge) as cm:
            Client(r.url, max_answer_bytes=100_000, retries=2, backoff=0.01).hash("x")
        self.assertIn("100000", str(cm.exception))
        self.assertIn("max_answer_bytes", str(cm.exception))
        self.assertIsInstance(cm.exception, TransportError)
        self.assertEqual(len(r.heads), 1)

    def test_a_content_length_past_the_limit_is_refused_unread(self) -> None:
        def serve(conn: socket.socket, _: bytes) -> None:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 419430400\r\n\r\n")
            r.done.wait(5)

        r = _Raw(self, serve)
        start = time.monotonic()
        with self.assertRaises(AnswerTooLarge) as cm:
            Client(r.url, max_answer_bytes=1 << 20, retries=0).hash("x")
        self.assertIn("419430400 bytes", str(cm.exception))
        self.assertLess(time.monotonic() - start, 3.0)

    def test_a_page_refusal_keeps_4_kib_as_its_detail(self) -> None:
        """A proxy's 502 page became the Problem's detail whole (100 MiB)."""
        page = b"x" + ("é" * 3000).encode() + b"<" * (1 << 20)  # a 2-byte character across the 4 KiB cut

        def serve(conn: socket.socket, _: bytes) -> None:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(page))
            conn.sendall(page)

        r = _Raw(self, serve)
        with self.assertRaises(Problem) as cm:
            Client(r.url, retries=0).hash("x")
        p = cm.exception
        self.assertEqual(p.status, 502)
        self.assertLess(len(p.detail.encode()), 4200)
        self.assertEqual(p.detail, "x" + "é" * 2047 + " … [cut: the answer was longer than 4096 bytes]")

    def test_a_json_refusal_is_read_to_its_bound(self) -> None:
        """A JSON refusal is read to 16 MiB, or max_answer_bytes when less;
        a longer one is no problem document and keeps 4 KiB as detail."""
        big = json.dumps({"type": "urn:artifactd:problem:x", "detail": "d" * 300_000}).encode()

        def serve(conn: socket.socket, _: bytes) -> None:
            conn.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\n\r\n" % len(big))
            conn.sendall(big)

        r = _Raw(self, serve)
        with self.assertRaises(Problem) as cm:
            Client(r.url, retries=0).hash("x")
        self.assertEqual((cm.exception.code, len(cm.exception.detail)), ("x", 300_000))
        with self.assertRaises(Problem) as cm:
            Client(r.url, retries=0, max_answer_bytes=100_000).hash("x")
        self.assertEqual(cm.exception.code, "about:blank")
        self.assertTrue(cm.exception.detail.endswith(" … [cut: the answer was longer than 100000 bytes]"))


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

    def test_int_subclasses_as_json_writes_them(self) -> None:
        """An int subclass was written with str(): an IntEnum (before 3.11)
        or any int whose __str__ says otherwise hashed differently from
        the body json sent, and the recorded call's replay was refused."""

        class Effort(enum.IntEnum):
            HIGH = 3

            def __str__(self) -> str:  # what IntEnum does before 3.11
                return "Effort.HIGH"

        class Big(int):
            def __str__(self) -> str:
                return "big"

        for v in ({"effort": Effort.HIGH}, [Big(7), Big(10**20), True, False]):
            with self.subTest(v=v):
                self.assertEqual(canonicalize(v), canonicalize(json.loads(json.dumps(v))))
        self.assertEqual(canonicalize([Effort.HIGH, True]), "[3,true]")
        with self.assertRaises(CanonicalError):
            canonicalize(Big(2**53 + 1))

    def test_nesting_limit_counts_arrays_and_objects(self) -> None:
        """As the server (hashing.MaxDepth): 64 nested arrays and objects
        are taken, whatever they hold, and 65 refused. A scalar or a key
        counted as a level, so 64 arrays around a number were refused."""

        def nest(n: int, leaf: object) -> object:
            for _ in range(n):
                leaf = [leaf]
            return leaf

        for name, v in (("64 arrays around 1", nest(64, 1)), ("63 arrays around {k: 1}", nest(63, {"k": 1})),
                        ("64 arrays", nest(63, [])), ("63 arrays around {}", nest(63, {}))):
            with self.subTest(name):
                self.assertEqual(canonicalize(v), json.dumps(v, separators=(",", ":")))
        for name, v in (("65 arrays around 1", nest(65, 1)), ("64 arrays around {}", nest(64, {})),
                        ("65 arrays", nest(64, []))):
            with self.subTest(name), self.assertRaises(CanonicalError):
                canonicalize(v)


if __name__ == "__main__":
    unittest.main()
