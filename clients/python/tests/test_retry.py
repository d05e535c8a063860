"""Retry-After and proxies: the client against local HTTP servers that
refuse with 429 or 503 and a Retry-After, against a real `artifactd
serve` at its connection cap, and with proxy variables in the
environment."""

from __future__ import annotations

import base64
import email.utils
import http.client
import http.server
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
from typing import Callable, List, Optional, Tuple

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, ".."))

from artifactd import (Client, CommitOutcomeUnknown, NotFound, Problem, Quarantined, StaleParent,  # noqa: E402
                       TransportError)

from .server import Server  # noqa: E402

Answer = Tuple[int, dict, bytes]


class Recorder:
    """A local HTTP server that answers each request with answer(n, handler)
    (n counts from 1) and records when each arrived and what it asked."""

    def __init__(self, answer: Callable[[int, http.server.BaseHTTPRequestHandler], Answer]):
        self.arrived: List[float] = []
        self.lines: List[str] = []
        self.lock = threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def handle_one(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                with rec.lock:
                    rec.arrived.append(time.monotonic())
                    rec.lines.append(self.requestline)
                    count = len(rec.arrived)
                status, headers, body = answer(count, self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = handle_one

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def refusing(status: int, code: Optional[str], retry_after: Callable[[], str], refusals: int = 1):
    """Refuse the first refusals requests (all when < 0) with status, the
    problem code (text/plain, as a proxy answers, when None) and the
    Retry-After, then answer 200 or 201 with JSON."""

    def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> Answer:
        if refusals < 0 or n <= refusals:
            headers = {"Retry-After": retry_after()}
            if code is None:
                headers["Content-Type"] = "text/plain"
                return status, headers, b"try later\n"
            headers["Content-Type"] = "application/problem+json"
            body = {"type": "urn:artifactd:problem:" + code, "title": "t", "status": status, "detail": "refused"}
            return status, headers, json.dumps(body).encode()
        if h.command == "POST":
            return 201, {"Content-Type": "application/json"}, b'{"commit":"c1","artifact":{"id":"a","version":1}}'
        return 200, {"Content-Type": "application/json"}, b'{"commit":"c1","context_hash":"h1"}'

    return answer


class RawServer:
    """A local TCP server for answers http.server cannot give: each
    connection's request head is read, then serve(n, conn, head) (n counts
    from 1) reads what it wants of the body and writes raw bytes. The
    receive buffer is small, so a body it does not read stays with the
    sender."""

    def __init__(self, serve: Callable[[int, socket.socket, bytes], None]):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.count = 0

        def loop() -> None:
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                self.count += 1
                threading.Thread(target=self.one, args=(serve, self.count, conn), daemon=True).start()

        threading.Thread(target=loop, daemon=True).start()

    @staticmethod
    def one(serve: Callable[[int, socket.socket, bytes], None], n: int, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(1)
                if not chunk:
                    return
                head += chunk
            try:
                serve(n, conn, head)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def read_body(conn: socket.socket, head: bytes) -> None:
    left = content_length(head)
    while left > 0:
        chunk = conn.recv(min(left, 65536))
        if not chunk:
            return
        left -= len(chunk)


HASH_OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 35\r\nConnection: close\r\n\r\n{"commit":"c1","context_hash":"h1"}'


def seconds(s: str) -> Callable[[], str]:
    return lambda: s


class RetryAfterTest(unittest.TestCase):
    def serve(self, answer) -> Recorder:
        r = Recorder(answer)
        self.addCleanup(r.close)
        return r

    def test_waited_then_answered(self) -> None:
        """A GET refused with 503 overloaded or 429 and a POST refused with
        503 overloaded, each with Retry-After: 1, are sent again no sooner
        than a second later. (Before: a GET's 503 was retried after 0.1 s,
        a 429 and a POST never.)"""
        for status, code, post in ((503, "overloaded", False), (429, None, False), (503, "overloaded", True)):
            with self.subTest(status=status, code=code, post=post):
                r = self.serve(refusing(status, code, seconds("1")))
                c = Client(r.url)
                if post:
                    self.assertEqual(c.put_artifact("run", "note", {"text": "x"}, id="a")["commit"], "c1")
                else:
                    self.assertEqual(c.hash("run")["commit"], "c1")
                self.assertEqual(len(r.arrived), 2)
                self.assertGreaterEqual(r.arrived[1] - r.arrived[0], 1.0)

    def test_http_date(self) -> None:
        """A Retry-After given as an HTTP-date is waited for until then."""
        until: List[float] = []

        def date() -> str:
            t = math.floor(time.time()) + 2
            until.append(t)
            return email.utils.formatdate(t, usegmt=True)

        r = self.serve(refusing(503, "overloaded", date))
        start_wall, start = time.time(), time.monotonic()
        Client(r.url).put_artifact("run", "note", {"text": "x"}, id="a")
        self.assertEqual(len(r.arrived), 2)
        self.assertGreaterEqual(r.arrived[1] - start, until[0] - start_wall - 0.01)

    def test_write_sent_again_only_when_not_processed(self) -> None:
        """A POST refused by an answer that does not say it was not
        processed (503 unavailable, a proxy's 503 or 429) is sent once, and
        the refusal raised at once with the delay asked for."""
        for status, code in ((503, "unavailable"), (503, None), (429, None), (429, "overloaded")):
            with self.subTest(status=status, code=code):
                r = self.serve(refusing(status, code, seconds("1"), refusals=-1))
                start = time.monotonic()
                with self.assertRaises(Problem) as cm:
                    Client(r.url).put_artifact("run", "note", {"text": "x"}, id="a")
                self.assertLess(time.monotonic() - start, 0.5)
                self.assertEqual((cm.exception.status, cm.exception.retry_after), (status, 1.0))
                self.assertEqual(len(r.arrived), 1)

    def test_not_waited_past_the_timeout_or_the_longest(self) -> None:
        """A Retry-After ending past the call's timeout, or longer than
        max_retry_after, is not waited for: the server's refusal is raised
        at once after one request. (Before: a GET was sent three times.)"""
        for ra, timeout in (("5", 0.5), ("120", 30.0)):
            with self.subTest(retry_after=ra):
                r = self.serve(refusing(503, "overloaded", seconds(ra), refusals=-1))
                start = time.monotonic()
                with self.assertRaises(Problem) as cm:
                    Client(r.url, timeout=timeout).hash("run")
                self.assertLess(time.monotonic() - start, 1.0)
                self.assertEqual((cm.exception.code, cm.exception.retry_after), ("overloaded", float(ra)))
                self.assertEqual(len(r.arrived), 1)

    def test_bounded(self) -> None:
        """At most 1 + retry_after requests (default 3); retry_after=0
        keeps the behaviour without it (a GET's 503 retried ``retries``
        times)."""
        for kwargs, want in (({}, 4), ({"retry_after": 1}, 2), ({"retry_after": 0}, 3)):
            with self.subTest(**kwargs):
                r = self.serve(refusing(503, "overloaded", seconds("0"), refusals=-1))
                with self.assertRaises(Problem):
                    Client(r.url, backoff=0.001, **kwargs).hash("run")
                self.assertEqual(len(r.arrived), want)

    def test_unreadable_retry_after_is_none(self) -> None:
        """A Retry-After that is no delay-seconds and no HTTP-date, one
        with a number too large for a date among them, is no Retry-After:
        a POST refused with it as overloaded is sent once and the server's
        Problem raised with retry_after None. (Before: an OverflowError
        from the date parser came out of the call.)"""
        for ra in ("soon", "1.5", "+1", "Mon, 01 Jan 99999999999999999999 00:00:00 GMT",
                   "Mon, 01 Jan 2000 99999999999999999999:00:00 GMT"):
            with self.subTest(retry_after=ra):
                r = self.serve(refusing(503, "overloaded", seconds(ra), refusals=-1))
                with self.assertRaises(Problem) as cm:
                    Client(r.url).put_artifact("run", "note", {"text": "x"}, id="a")
                self.assertEqual((cm.exception.code, cm.exception.retry_after), ("overloaded", None))
                self.assertEqual(len(r.arrived), 1)

    def test_proxy_problem_of_odd_members(self) -> None:
        """A proxy's 429 or 503 in problem+json whose members are not of
        RFC 9457's types ("status" a phrase, "errors" holding no objects),
        with a Retry-After, is a Problem with the answer's status, and a
        GET is sent again after the delay. (Before: int("Too Many
        Requests") raised a ValueError out of the call.)"""
        for status in (429, 503):
            with self.subTest(status=status):
                body = json.dumps({"type": "about:blank", "title": "slow down", "status": "Too Many Requests",
                                   "errors": [None, "x"]}).encode()

                def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> Answer:
                    if n == 1:
                        return status, {"Retry-After": "0", "Content-Type": "application/problem+json"}, body
                    return 200, {"Content-Type": "application/json"}, b'{"commit":"c1","context_hash":"h1"}'

                r = self.serve(answer)
                self.assertEqual(Client(r.url).hash("run")["commit"], "c1")
                self.assertEqual(len(r.arrived), 2)
        # The last refusal carries the answer's status.
        r = self.serve(lambda n, h: (429, {"Retry-After": "120", "Content-Type": "application/problem+json"},
                                     b'{"type":"about:blank","status":"Too Many Requests"}'))
        with self.assertRaises(Problem) as cm:
            Client(r.url).hash("run")
        self.assertEqual((cm.exception.status, cm.exception.retry_after), (429, 120.0))

    def test_retry_after_leading_zeros(self) -> None:
        """Delay-seconds with leading zeros are that many seconds: 20
        digits that say 1 are waited for like "1". (Before: more than 15
        digits were taken for a delay longer than any wait, and the
        refusal raised at once.)"""
        r = self.serve(refusing(503, "overloaded", seconds("0" * 19 + "1")))
        self.assertEqual(Client(r.url).hash("run")["commit"], "c1")
        self.assertEqual(len(r.arrived), 2)
        self.assertGreaterEqual(r.arrived[1] - r.arrived[0], 1.0)

    def raw(self, serve: Callable[[int, socket.socket, bytes], None]) -> RawServer:
        r = RawServer(serve)
        self.addCleanup(r.close)
        return r

    def test_refusal_cut_short_is_a_transport_error(self) -> None:
        """A 503 whose body ends before its Content-Length is a transport
        error, retried for a GET like a failed connection. (Before: the
        http.client IncompleteRead came out of the call.)"""

        def serve(n: int, conn: socket.socket, head: bytes) -> None:
            if n == 1:
                conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
                             b"Content-Length: 100\r\nConnection: close\r\n\r\n{\"type\":")
                return
            conn.sendall(HASH_OK)

        r = self.raw(serve)
        self.assertEqual(Client(r.url, backoff=0.001).hash("run")["commit"], "c1")
        self.assertEqual(r.count, 2)

    def test_refusal_body_read_within_the_timeout(self) -> None:
        """A refusal whose body arrives a byte at a time is read within the
        timeout too, as a 2xx answer is: the call ends with a
        TransportError soon after it. (Before: it waited for the whole
        body, 6 s here.)"""
        done = threading.Event()
        self.addCleanup(done.set)

        def serve(n: int, conn: socket.socket, head: bytes) -> None:
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 30\r\nConnection: close\r\n\r\n")
            for _ in range(30):
                if done.wait(0.2):
                    return
                conn.sendall(b"x")

        r = self.raw(serve)
        start = time.monotonic()
        with self.assertRaises(TransportError):
            Client(r.url, timeout=1.0, retries=0).hash("run")
        self.assertLess(time.monotonic() - start, 3.0)

    def test_request_sent_within_the_timeout(self) -> None:
        """The sending of a request counts against the attempt's timeout
        as its answer does: a server that takes 0.8 s to read a request
        head too large for the sockets' buffers (a path of 4 MiB), then
        reads none of the body, ends the call with a TransportError about
        a second after it began. (Before: the head's send and the body's
        each had the whole timeout, and the call took 2 s.)"""
        done = threading.Event()
        self.addCleanup(done.set)
        srv = socket.socket()
        self.addCleanup(srv.close)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def serve() -> None:
            conn, _ = srv.accept()
            with conn:
                if done.wait(0.8):
                    return
                head = b""
                while b"\r\n\r\n" not in head[-65540:]:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                done.wait(10)  # the body is never read

        threading.Thread(target=serve, daemon=True).start()
        c = Client("http://127.0.0.1:%d" % srv.getsockname()[1], token="s3cret-token", timeout=1.0, retries=0)
        start = time.monotonic()
        with self.assertRaises(TransportError) as cm:
            c.put_artifact("c" * (4 << 20), "note", {"text": "x" * (8 << 20)}, id="a")
        took = time.monotonic() - start
        self.assertLess(took, 1.5, "the call took %.2f s with timeout=1" % took)
        self.assertNotIn("s3cret-token", str(cm.exception))

    def test_overloaded_answered_before_the_body_is_read(self) -> None:
        """A large write refused as overloaded before its body is read (the
        server's large-body guard) gets the 503 even though the server
        closes the connection on the unread body: the client reads the
        answer already sent, and sends the write again after Retry-After.
        (Before: the reset while sending was a TransportError, and the
        write was not sent again.)"""

        def serve(n: int, conn: socket.socket, head: bytes) -> None:
            if n == 1:
                body = b'{"type":"urn:artifactd:problem:overloaded","title":"t","status":503,"detail":"refused"}'
                conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
                             b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                time.sleep(0.2)
                return  # closed with the body unread: a reset
            read_body(conn, head)
            body = b'{"commit":"c1","artifact":{"id":"a","version":1}}'
            conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

        r = self.raw(serve)
        start = time.monotonic()
        got = Client(r.url).put_artifact("run", "note", {"text": "x" * (16 << 20)}, id="a")
        self.assertEqual(got["commit"], "c1")
        self.assertEqual(r.count, 2)
        self.assertGreaterEqual(time.monotonic() - start, 1.0)

    def test_real_server_at_its_connection_cap(self) -> None:
        """A real artifactd at --max-conns 1 refuses a write on a reserve
        connection with 503 overloaded and Retry-After; the client sends it
        again after the delay, once the slot is free, and it is written
        once."""
        with Server("--max-conns", "1") as s:
            c = Client(s.url)
            c.ensure_context("run")
            host, port = s.url[len("http://"):].rsplit(":", 1)
            hold = None
            for _ in range(50):
                conn = http.client.HTTPConnection(host, int(port), timeout=5)
                conn.request("GET", "/v1/contexts/run/hash")
                res = conn.getresponse()
                res.read()
                if res.status == 200:
                    hold = conn  # kept alive: it holds the one ordinary slot
                    break
                conn.close()
                time.sleep(0.02)
            self.assertIsNotNone(hold, "no ordinary connection slot came free")
            assert hold is not None
            release = threading.Timer(0.3, hold.close)
            release.start()
            try:
                start = time.monotonic()
                c.put_artifact("run", "note", {"text": "x"}, id="a")
                self.assertGreaterEqual(time.monotonic() - start, 1.0, "the write was not refused and sent again after 1 s")
            finally:
                release.cancel()
                hold.close()
            self.assertEqual(c.artifact("run", "a")["version"], 1)


# The problems artifactd answers with 503, as its problem writer (httpapi's
# writeError) writes them: type, title and status from its table, the
# detail (service.OutcomeUnknownDetail, service.NotWrittenDetail,
# netguard's), the request path as instance, a final newline.
PROBLEMS_503 = {
    "commit-outcome-unknown": (
        "Commit outcome unknown",
        "the write was sent to the database and its answer was lost, so it may or may not have been made; read the"
        " branch head (or what else the write changes) before retrying, and retry a commit with the head you read as"
        " its parent, so that one that landed is refused as stale rather than applied twice",
    ),
    "unavailable": (
        "Service unavailable",
        "the write did not complete and no commit of it was made (the database could not be reached, or rolled it back each time it ran);"
        " send it again later",
    ),
    "overloaded": (
        "Server busy",
        "the server has reached its connection limit; only /healthz and /readyz are answered on this connection:"
        " retry",
    ),
}


def answering_503(code: str, retry_after: Optional[str] = None):
    """Answer every request with artifactd's 503 problem of code (and a
    Retry-After when given, which artifactd sends with none of them but
    overloaded)."""

    def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> Answer:
        title, detail = PROBLEMS_503[code]
        body = {"type": "urn:artifactd:problem:" + code, "title": title, "status": 503, "detail": detail,
                "instance": h.path.split("?")[0]}
        headers = {"Content-Type": "application/problem+json", "Cache-Control": "no-store"}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        return 503, headers, json.dumps(body, separators=(",", ":")).encode() + b"\n"

    return answer


class CommitOutcomeUnknownTest(unittest.TestCase):
    def serve(self, answer) -> Recorder:
        r = Recorder(answer)
        self.addCleanup(r.close)
        return r

    def test_raised_and_sent_once(self) -> None:
        """A write answered 503 commit-outcome-unknown raises
        CommitOutcomeUnknown, a Problem with status 503 and the code, and
        is sent once: it may have landed, so the client does not send it
        again, even with retries turned up, even were a Retry-After added
        in front of the server. (Before: a plain Problem; the caller
        compared the code by hand.)"""
        ops = [{"op": "put", "artifact": {"id": "a", "type": "note", "data": {"text": "x"}}}]
        calls = (
            ("commit", lambda c: c.commit("run", ops), "/v1/contexts/run/commits"),
            ("put_artifact", lambda c: c.put_artifact("run", "note", {"text": "x"}, id="a"), "/v1/contexts/run/artifacts"),
        )
        for name, call, path in calls:
            for retry_after in (None, "0"):
                with self.subTest(call=name, retry_after=retry_after):
                    r = self.serve(answering_503("commit-outcome-unknown", retry_after))
                    with self.assertRaises(CommitOutcomeUnknown) as cm:
                        call(Client(r.url, retries=5, backoff=0.001))
                    e = cm.exception
                    self.assertIsInstance(e, Problem)
                    self.assertNotIsInstance(e, (StaleParent, Quarantined, NotFound))
                    self.assertEqual((e.status, e.code, e.title, e.detail, e.instance, e.method),
                                     (503, "commit-outcome-unknown", "Commit outcome unknown",
                                      PROBLEMS_503["commit-outcome-unknown"][1], path, "POST"))
                    self.assertEqual(r.lines, [f"POST {path} HTTP/1.1"],
                                     "a write that may have landed was sent again")

    def test_other_503s_are_not_it(self) -> None:
        """503 unavailable and overloaded are Problems, not
        CommitOutcomeUnknown."""
        for code in ("unavailable", "overloaded"):
            with self.subTest(code=code):
                r = self.serve(answering_503(code))
                with self.assertRaises(Problem) as cm:
                    Client(r.url).commit("run", [{"op": "put", "artifact": {"id": "a", "type": "note", "data": {}}}])
                self.assertNotIsInstance(cm.exception, CommitOutcomeUnknown)
                self.assertIs(type(cm.exception), Problem)
                self.assertEqual((cm.exception.status, cm.exception.code), (503, code))
                self.assertEqual(len(r.arrived), 1)


_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from artifactd import Client
kw = json.loads(sys.argv[3])
print(json.dumps(Client(sys.argv[2], retries=0, timeout=5, **kw).hash("run")))
"""


class ProxyTest(unittest.TestCase):
    """HTTP_PROXY is set before the client is imported, as a user's shell
    sets it. (Before: a server on loopback was asked through the proxy.)"""

    def setUp(self) -> None:
        self.server = Recorder(refusing(503, "overloaded", seconds("0"), refusals=0))
        self.proxy = Recorder(lambda n, h: (200, {"Content-Type": "application/json"}, b'{"commit":"via-proxy"}'))
        self.addCleanup(self.server.close)
        self.addCleanup(self.proxy.close)

    def run_child(self, url: str, no_proxy: str = "", **kwargs: object) -> dict:
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")}
        env["HTTP_PROXY"] = env["http_proxy"] = self.proxy.url
        if no_proxy:
            env["NO_PROXY"] = env["no_proxy"] = no_proxy
        out = subprocess.run([sys.executable, "-c", _CHILD, os.path.join(HERE, ".."), url, json.dumps(kwargs)],
                             env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_the_environment_proxies_all_but_loopback(self) -> None:
        for host in ("127.0.0.1", "localhost"):
            with self.subTest(host=host):
                got = self.run_child(f"http://{host}:{self.server.port}")
                self.assertEqual(got["commit"], "c1")
        self.assertEqual(len(self.server.arrived), 2)
        self.assertEqual(self.proxy.lines, [])
        # Another host still goes through the proxy.
        got = self.run_child("http://artifactd.invalid:7070")
        self.assertEqual(got["commit"], "via-proxy")
        self.assertEqual(self.proxy.lines, ["GET http://artifactd.invalid:7070/v1/contexts/run/hash HTTP/1.1"])

    def test_proxies_given_are_used_for_loopback_too(self) -> None:
        got = self.run_child(self.server.url, proxies={"http": self.proxy.url})
        self.assertEqual(got["commit"], "via-proxy")
        self.assertEqual(len(self.proxy.lines), 1)
        self.assertEqual(self.server.arrived, [])
        got = self.run_child(self.server.url, proxies={})
        self.assertEqual(got["commit"], "c1")

    def test_proxies_given_are_used_whatever_no_proxy_says(self) -> None:
        """Proxies given are used for a host that NO_PROXY names too, as
        for any other. (Before: urllib skipped them for such a host, and
        the server was asked directly.)"""
        got = self.run_child(self.server.url, no_proxy="127.0.0.1,localhost", proxies={"http": self.proxy.url})
        self.assertEqual(got["commit"], "via-proxy")
        self.assertEqual(self.proxy.lines, [f"GET {self.server.url}/v1/contexts/run/hash HTTP/1.1"])
        self.assertEqual(self.server.arrived, [])

    def test_proxy_credentials_given_are_sent_to_the_proxy(self) -> None:
        """User info in a given proxy's URL becomes its Proxy-Authorization
        and is not sent on to the server."""
        seen: List[str] = []
        proxy = Recorder(lambda n, h: (seen.append(h.headers.get("Proxy-Authorization", "")) or 200,
                                       {"Content-Type": "application/json"}, b'{"commit":"via-proxy"}'))
        self.addCleanup(proxy.close)
        url = proxy.url.replace("http://", "http://agent:s%40cret@")
        got = self.run_child(self.server.url, proxies={"http": url})
        self.assertEqual(got["commit"], "via-proxy")
        self.assertEqual(seen, ["Basic " + base64.b64encode(b"agent:s@cret").decode("ascii")])
        self.assertEqual(self.server.arrived, [])


if __name__ == "__main__":
    unittest.main()
