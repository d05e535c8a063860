"""A small client of the artifactd HTTP API (standard library only)."""

from __future__ import annotations

import base64
import datetime
import email.utils
import functools
import http.client
import io
import ipaddress
import json
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

PROBLEM_TYPE_PREFIX = "urn:artifactd:problem:"

# The most bytes of a successful answer read unless max_answer_bytes says
# otherwise: 1 GiB, as the Go client (client.DefaultMaxAnswerBytes).
DEFAULT_MAX_ANSWER_BYTES = 1 << 30
# The most bytes read of a refusal that is JSON (a problem document), or
# max_answer_bytes when that is less.
MAX_PROBLEM_BYTES = 16 << 20
# The most bytes of a refusal that is not a problem kept as its detail
# (and read at all when it is not JSON): the rest is cut, and the detail
# ends with a marker saying so.
MAX_DETAIL_BYTES = 4 << 10


@dataclass
class FieldError:
    """One entry of a problem's errors list: where (a JSON pointer into the
    body, or a query parameter), which rule, and what is wrong."""

    rule: str
    detail: str
    pointer: Optional[str] = None
    parameter: Optional[str] = None


class ArtifactdError(Exception):
    """Base class of the client's errors."""


class Problem(ArtifactdError):
    """An RFC 9457 problem answered by the server (every non-2xx answer).

    ``extensions`` holds the other members (tainted_by, cycle, conflicts…);
    ``retry_after`` the delay in seconds the answer's Retry-After header
    asked for (None without one; 0 for a date already past).
    """

    def __init__(self, method: str, url: str, status: int, body: Mapping[str, Any],
                 retry_after: Optional[float] = None):
        self.method, self.url = method, url
        self.retry_after = retry_after
        self.type: str = str(body.get("type", "about:blank"))
        self.title: str = str(body.get("title", ""))
        # The answer's status when the body's (optional, advisory) is no
        # integer: a proxy's problem may say "status": "Too Many Requests".
        s = body.get("status")
        self.status: int = s if isinstance(s, int) and not isinstance(s, bool) else status
        self.detail: str = str(body.get("detail", ""))
        self.instance: Optional[str] = body.get("instance")
        self.errors: List[FieldError] = [
            FieldError(rule=e.get("rule", ""), detail=e.get("detail", ""), pointer=e.get("pointer"), parameter=e.get("parameter"))
            for e in (body.get("errors") if isinstance(body.get("errors"), list) else [])
            if isinstance(e, dict)
        ]
        self.extensions: Dict[str, Any] = {
            k: v for k, v in body.items() if k not in ("type", "title", "status", "detail", "instance", "errors")
        }
        super().__init__(str(self))

    @property
    def code(self) -> str:
        """The problem code: the type without the urn prefix."""
        return self.type[len(PROBLEM_TYPE_PREFIX):] if self.type.startswith(PROBLEM_TYPE_PREFIX) else self.type

    def __str__(self) -> str:
        parts = [f"{self.method} {self.url}: {self.status} {self.code}: {self.detail}"]
        for e in self.errors:
            where = e.pointer if e.parameter is None else "?" + e.parameter
            parts.append(f"{where} [{e.rule}] {e.detail}")
        return "; ".join(parts)


class StaleParent(Problem):
    """A write whose parent was not the branch head (code stale-parent)."""


class Quarantined(Problem):
    """A write that rests on an unconfirmed artifact (code quarantined)."""


class CommitOutcomeUnknown(Problem):
    """A write answered 503 commit-outcome-unknown: the server sent its
    commit to the database (PostgreSQL) and lost the answer, so it may or
    may not have landed. The client never sends such a write again on its
    own (only the idempotent PUT of a context is retried after any 503):
    read the branch head (:meth:`Client.hash`, or what else the write changes)
    before retrying, and retry with the head you read as its ``parent``,
    so that a write that landed is refused as stale rather than applied
    twice."""


class NotFound(Problem):
    """A 404 problem."""


class TransportError(ArtifactdError):
    """The server could not be reached or answered garbage."""


class AnswerTooLarge(TransportError):
    """A successful answer longer than the client reads
    (``max_answer_bytes``): it is never decoded cut, and the request is not
    sent again."""


def _is_json(content_type: str) -> bool:
    """application/json, application/problem+json or another +json type."""
    mt = content_type.split(";", 1)[0].strip().lower()
    return mt == "application/json" or mt.endswith("+json")


def _detail_of(body: bytes, cut: bool) -> str:
    """The detail of a refusal whose body is not a problem: its text, at
    most MAX_DETAIL_BYTES of it (cut at a character boundary), with a
    marker when anything was left out. cut says the read itself stopped
    before the end of the answer."""
    text = body.strip()
    if len(text) <= MAX_DETAIL_BYTES and not cut:
        return text.decode("utf-8", "replace")
    n = min(len(text), MAX_DETAIL_BYTES)
    while 0 < n < len(text) and text[n] & 0xC0 == 0x80:
        n -= 1
    # The read may have stopped inside a character: drop its first bytes too.
    for i in range(n - 1, max(n - 4, 0) - 1, -1):
        lead = text[i]
        if lead & 0xC0 != 0x80:
            need = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 1
            if n - i < need:
                n = i
            break
    shown = text[:n].decode("utf-8", "replace")
    if cut:
        return shown + f" … [cut: the answer was longer than {len(body)} bytes]"
    return shown + f" … [cut: {n} of {len(text)} bytes shown]"


def _problem(method: str, url: str, status: int, raw: bytes, retry_after: Optional[float] = None,
             cut: bool = False) -> Problem:
    try:
        body = json.loads(raw.decode("utf-8"))
        if not isinstance(body, dict):
            raise ValueError
    except ValueError:
        body = {"type": "about:blank", "status": status, "detail": _detail_of(raw, cut)}
    code = str(body.get("type", ""))[len(PROBLEM_TYPE_PREFIX):]
    cls = {"stale-parent": StaleParent, "quarantined": Quarantined,
           "commit-outcome-unknown": CommitOutcomeUnknown}.get(code)
    if cls is None and status == 404:
        cls = NotFound
    return (cls or Problem)(method, url, status, body, retry_after)


def _retry_after(value: Optional[str]) -> Optional[float]:
    """A Retry-After value, delta-seconds or an HTTP-date, as seconds from
    now (0 for a date already past); None when absent or malformed."""
    v = (value or "").strip()
    if not v:
        return None
    if re.fullmatch(r"[0-9]+", v):
        digits = v.lstrip("0") or "0"
        return float(int(digits)) if len(digits) <= 15 else float("inf")  # longer than any wait
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - time.time())


def _not_processed(status: int, p: Problem, safe: bool) -> bool:
    """Whether a refusal that carried a Retry-After says its request was
    not processed, so that sending it again cannot write twice. A 503
    "overloaded" is answered by the server's connection and large-body
    guards before the request is routed: no handler ran, whatever the
    method. artifactd sends no 429 and no other 503 with a Retry-After; one
    from a proxy in front does not say whether a write went through, so
    only a safe request is sent again after it. status is the answer's
    HTTP status, whatever the body says."""
    if status == 503:
        return safe or p.code == "overloaded"
    return status == 429 and safe


def _loopback(host: str) -> bool:
    """localhost or a loopback address (what Go's proxy rules never proxy)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def q(s: str) -> str:
    """Percent-encode one path segment (an id "doc/1" becomes "doc%2F1";
    "." and ".." become "%2E" and "%2E%2E", never a dot segment)."""
    if s in (".", ".."):
        return "%2E" * len(s)
    return urllib.parse.quote(s, safe="")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The API never redirects a request it serves: a redirect is an error
    (an HTTPError), never another resource's answer taken for this one."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        return None


class _DeadlineReader(io.RawIOBase):
    """The socket reads of an answer, each given what is left of the
    attempt's deadline as its timeout: the socket's own timeout bounds one
    read, and a server sending the answer (its head included) a byte at a
    time would otherwise hold the call for as long as it liked."""

    def __init__(self, raw: Any, sock: socket.socket, deadline: float):
        super().__init__()
        self._raw, self._sock, self._deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> Optional[int]:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the answer did not arrive within the timeout")
        self._sock.settimeout(left)
        return self._raw.readinto(b)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An answer read before a deadline (time.monotonic), head and body."""

    def __init__(self, sock: socket.socket, *a: Any, deadline: float, **kw: Any):
        super().__init__(sock, *a, **kw)
        self.fp = io.BufferedReader(_DeadlineReader(self.fp.detach(), sock, deadline))


class _EarlyAnswer:
    """A connection mixin for an answer sent before the body was read:
    artifactd's guards refuse a large body (503 overloaded) and close the
    connection without reading it, so sending the rest fails with a reset
    while the answer already waits in the socket. The send error is kept
    and the rest of the body dropped, so that getresponse reads that
    answer; when there is none, getresponse raises the send error.

    Given a deadline (time.monotonic), the request is sent and its answer
    read before it: the connection is made with what is left of it as its
    timeout, each socket send of the request is given what is left as its
    timeout (the socket's own timeout bounds one call, and a peer reading
    slowly would otherwise hold each of them, the head's and the body's,
    for the whole timeout), and the answer is read by _DeadlineResponse."""

    _cut: Optional[OSError] = None
    _deadline: Optional[float] = None

    def __init__(self, *a: Any, deadline: Optional[float] = None, **kw: Any):
        super().__init__(*a, **kw)  # type: ignore[call-arg]
        if deadline is not None:
            self._deadline = deadline
            self._create_connection = self._connect_before_deadline
            self.response_class = functools.partial(_DeadlineResponse, deadline=deadline)

    def _left(self) -> float:
        assert self._deadline is not None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the request was not sent within the timeout")
        return left

    def _connect_before_deadline(self, address: Any, timeout: Any, source_address: Any = None) -> socket.socket:
        sock = socket.create_connection(address, self._left(), source_address)
        try:
            sock.settimeout(self._left())  # what follows: a TLS handshake, a proxy's tunnel
        except OSError:
            sock.close()
            raise
        return sock

    def send(self, data: Any) -> None:
        if self._cut is not None:
            return
        try:
            if self._deadline is None or not isinstance(data, (bytes, bytearray, memoryview)):
                super().send(data)  # type: ignore[misc]
            else:
                self._send_before_deadline(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            self._cut = e

    def _send_before_deadline(self, data: Any) -> None:
        """HTTPConnection.send of bytes, each socket send given what is
        left before the deadline as its timeout."""
        if self.sock is None:  # type: ignore[attr-defined]
            self.connect()  # type: ignore[attr-defined]
        sock = self.sock  # type: ignore[attr-defined]
        sys.audit("http.client.send", self, data)
        with memoryview(data) as view, view.cast("B") as octets:
            sent = 0
            while sent < len(octets):
                sock.settimeout(self._left())
                sent += sock.send(octets[sent:])

    def getresponse(self) -> http.client.HTTPResponse:
        try:
            return super().getresponse()  # type: ignore[misc]
        except (OSError, http.client.HTTPException):
            if self._cut is not None:
                raise self._cut from None
            raise


class _EarlyHTTP(_EarlyAnswer, http.client.HTTPConnection):
    pass


def _with_deadline(http_class: Any, req: urllib.request.Request) -> Any:
    """http_class given the deadline of req's attempt (see Client.request)."""
    deadline = getattr(req, "deadline", None)
    return http_class if deadline is None else functools.partial(http_class, deadline=deadline)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):  # type: ignore[override]
        return self.do_open(_with_deadline(_EarlyHTTP, req), req)


_handlers: List[Any] = [_NoRedirect, _HTTPHandler]
if hasattr(urllib.request, "HTTPSHandler"):  # Python built with ssl

    class _EarlyHTTPS(_EarlyAnswer, http.client.HTTPSConnection):
        pass

    class _HTTPSHandler(urllib.request.HTTPSHandler):
        def do_open(self, http_class, req, **kw):  # type: ignore[override]
            if http_class is http.client.HTTPSConnection:
                http_class = _with_deadline(_EarlyHTTPS, req)
            return super().do_open(http_class, req, **kw)

    _handlers.append(_HTTPSHandler)


class _GivenProxies(urllib.request.BaseHandler):
    """Sends each request through the proxy given for its scheme, for every
    host: urllib's ProxyHandler skips a host that NO_PROXY names even for
    the proxies given to it. A request processor (it runs before the
    handlers that build and send the request); user info in a proxy's URL
    becomes its Proxy-Authorization."""

    handler_order = 100

    def __init__(self, proxies: Mapping[str, str]) -> None:
        self._proxies = dict(proxies)

    def _through_proxy(self, req: urllib.request.Request) -> urllib.request.Request:
        proxy = self._proxies.get(req.type)
        if not proxy or req.has_proxy():
            return req
        u = urllib.parse.urlsplit(proxy if "://" in proxy else "//" + proxy)
        if u.username is not None and u.password is not None:
            cred = urllib.parse.unquote(u.username) + ":" + urllib.parse.unquote(u.password)
            req.add_unredirected_header("Proxy-Authorization", "Basic " + base64.b64encode(cred.encode()).decode("ascii"))
        req.set_proxy(u.netloc.rpartition("@")[2], req.type)
        return req

    http_request = _through_proxy
    https_request = _through_proxy


def _opener(base_url: str, proxies: Optional[Mapping[str, str]]) -> urllib.request.OpenerDirector:
    """The opener of a client of base_url: no redirects followed, and the
    proxies given, or else those of the environment (HTTP_PROXY,
    HTTPS_PROXY, NO_PROXY), never for localhost or a loopback address."""
    if proxies is not None:
        return urllib.request.build_opener(urllib.request.ProxyHandler({}), _GivenProxies(proxies), *_handlers)
    host = urllib.parse.urlsplit(base_url).hostname or ""
    return urllib.request.build_opener(urllib.request.ProxyHandler({} if _loopback(host) else None), *_handlers)


def _read(res: Any, most: int) -> bytes:
    """Read an answer whole, or its first most bytes; the attempt's
    deadline bounds every read of it (_DeadlineReader)."""
    parts: List[bytes] = []
    got = 0
    while got < most:
        want = min(65536, most - got)
        chunk = res.read1(want) if hasattr(res, "read1") else res.read(want)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class Client:
    """One artifactd server.

    Safe requests (GET, and PUT of a context, which is idempotent) are
    retried after a transport error or a 503, ``retries`` times, pausing
    ``backoff`` seconds and doubling it; other writes never are, with one
    exception: a refusal with a ``Retry-After`` (delta-seconds or an
    HTTP-date) that says the request was not processed is sent again after
    that delay, at most ``retry_after`` times (0 turns this off and such
    answers are handled as the others). That is a 503 "overloaded", which
    the server answers before routing the request, for any method, writes
    included; and a 429 or another 503 (which artifactd never sends with a
    Retry-After: they come from a proxy in front and do not say whether a
    write went through) for safe requests only. A delay over
    ``max_retry_after`` seconds, or one that would end more than
    ``timeout`` seconds after the call began, is not waited for: the
    :class:`Problem` is raised at once with its ``retry_after``. Once the
    client has waited, the call ends within ``timeout`` of its start.

    ``timeout`` bounds each attempt, one deadline for the connection, the
    sending of the request and its answer (head and body) read whole. A write with a stale ``parent`` is retried only through
    :meth:`put_artifact_cas`, which re-reads the head first.

    ``max_answer_bytes`` (1 GiB by default, as the Go client) is the most
    bytes of a successful answer read: a longer one raises
    :class:`AnswerTooLarge` and is not sent again. A refusal is read to
    16 MiB (or ``max_answer_bytes`` when less) when it is JSON; of any
    other (a proxy's error page) 4 KiB are kept as the :class:`Problem`'s
    ``detail``, cut at a character boundary and marked as cut.

    ``token`` is sent as a bearer token, surrounding whitespace stripped; a
    token holding a control character is refused (``ValueError``, which
    does not quote it).

    ``proxies`` (``{"http": "http://proxy:3128", "https": ...}``), when
    given, are used for every request, to a loopback server too; ``{}``
    uses none. By default the environment's (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``NO_PROXY``) are used, except for a server on
    ``localhost`` or a loopback address, which is always reached directly,
    as Go's client does.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:7070", token: Optional[str] = None,
                 timeout: float = 30.0, retries: int = 2, backoff: float = 0.1, retry_after: int = 3,
                 max_retry_after: float = 30.0, proxies: Optional[Mapping[str, str]] = None,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.max_answer_bytes = max_answer_bytes
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.retry_after = retry_after
        self.max_retry_after = max_retry_after
        self._opener = _opener(self.base_url, proxies)

    @property
    def token(self) -> Optional[str]:
        """The bearer token sent, surrounding whitespace stripped (a token
        read from a file keeps its newline). A token with a control
        character is refused (ValueError) without quoting it."""
        return self._token

    @token.setter
    def token(self, token: Optional[str]) -> None:
        if token is not None:
            token = token.strip()
            if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
                raise ValueError("the bearer token holds a control character (CR, LF, NUL…): "
                                 "it cannot be sent in a header")
        self._token = token or None

    # ---- transport ----

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request; return the decoded JSON body (or text for
        non-JSON answers); raise :class:`Problem` for a non-2xx answer."""
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        safe = method == "GET" or (method == "PUT" and path.startswith("/v1/contexts/"))
        retries = self.retries if safe else 0
        waits = self.retry_after
        pause = self.backoff
        call_deadline = time.monotonic() + self.timeout
        waited = False
        last: Optional[Exception] = None
        while True:
            limit = self.timeout
            if waited:
                limit = min(limit, call_deadline - time.monotonic())
                if limit <= 0:
                    assert last is not None
                    raise last
            req = urllib.request.Request(self.base_url + path, data=data, method=method)
            req.add_header("Accept", "application/json, application/problem+json")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            if self.token:
                req.add_header("Authorization", "Bearer " + self.token)
            req.deadline = time.monotonic() + limit  # type: ignore[attr-defined]  # read by _with_deadline
            try:
                try:
                    res = self._opener.open(req, timeout=limit)
                    status = res.status
                except urllib.error.HTTPError as e:
                    res, status = e, e.code  # a refusal: its answer is read as any other
                with res:
                    ctype = res.headers.get("Content-Type", "")
                    retry_after = res.headers.get("Retry-After")
                    raw, cut = self._answer(method, path, res, status, ctype)
                if 200 <= status < 300:
                    if ctype.startswith("application/json") and raw:
                        return json.loads(raw.decode("utf-8"))
                    return raw.decode("utf-8", "replace") if raw else None
            except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
                # Also an answer cut short or past the deadline, or a 2xx
                # whose JSON does not parse.
                last = TransportError(f"{method} {path}: {e}")
                if retries <= 0:
                    raise last from None
            else:
                p = _problem(method, path, status, raw, _retry_after(retry_after), cut)
                last = p
                if self.retry_after > 0 and p.retry_after is not None and _not_processed(status, p, safe):
                    delay = p.retry_after
                    if waits <= 0 or delay > self.max_retry_after or time.monotonic() + delay >= call_deadline:
                        raise p from None
                    waits -= 1
                    waited = True
                    time.sleep(delay)
                    continue
                if status != 503 or retries <= 0:
                    raise p from None
            retries -= 1
            time.sleep(pause)
            pause *= 2

    def _answer(self, method: str, path: str, res: Any, status: int, ctype: str) -> Tuple[bytes, bool]:
        """An answer's body: a successful one whole (at most
        max_answer_bytes, else AnswerTooLarge), a refusal up to the bounds
        of refusals, with whether it was cut."""
        ok = 200 <= status < 300
        limit = self.max_answer_bytes if self.max_answer_bytes > 0 else DEFAULT_MAX_ANSWER_BYTES
        if not ok:
            limit = min(limit, MAX_PROBLEM_BYTES if _is_json(ctype) else MAX_DETAIL_BYTES)
        length = (res.headers.get("Content-Length") or "").strip()
        if ok and re.fullmatch(r"[0-9]+", length) and int(length) > limit:
            raise AnswerTooLarge(f"{method} {path}: the answer is {int(length)} bytes: the answer is longer "
                                 f"than the client reads ({limit}; max_answer_bytes)")
        raw = _read(res, limit + 1)
        if len(raw) <= limit:
            return raw, False
        if ok:  # never a cut answer decoded as the whole
            raise AnswerTooLarge(f"{method} {path}: the answer is longer than the client reads ({limit}; max_answer_bytes)")
        return raw[:limit], True

    @staticmethod
    def _at(path: str, at: Optional[str]) -> str:
        return path if not at else path + "?at=" + urllib.parse.quote(at, safe="")

    # ---- contexts ----

    def ensure_context(self, ctx: str, quarantine: Optional[str] = None) -> Dict[str, Any]:
        """Create the context if absent (PUT); fine when it exists with the
        same settings; :class:`Problem` with code "exists" otherwise."""
        return self.request("PUT", f"/v1/contexts/{q(ctx)}", {} if quarantine is None else {"quarantine": quarantine})

    def context(self, ctx: str, at: Optional[str] = None) -> Dict[str, Any]:
        """Describe a context: branches, head, hash, counts, trust."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}", at))

    # ---- writes ----

    def put_artifact(self, ctx: str, type: str, data: Mapping[str, Any], id: Optional[str] = None,
                     edges: Optional[List[Mapping[str, Any]]] = None, produced_by: Optional[str] = None,
                     parent: Optional[str] = None, branch: Optional[str] = None,
                     quarantine: Optional[str] = None) -> Dict[str, Any]:
        """Write one artifact with its outgoing edges ({"rel", "to",
        "attrs"?}) in one commit."""
        body: Dict[str, Any] = {"type": type, "data": dict(data)}
        for k, v in (("id", id), ("edges", edges), ("produced_by", produced_by), ("parent", parent),
                     ("branch", branch), ("quarantine", quarantine)):
            if v is not None:
                body[k] = v
        return self.request("POST", f"/v1/contexts/{q(ctx)}/artifacts", body)

    def put_artifact_cas(self, ctx: str, build: Callable[[str], Mapping[str, Any]], attempts: int = 5,
                         branch: Optional[str] = None) -> Dict[str, Any]:
        """Write conditionally on the head: ``build(head)`` returns the
        keyword arguments of :meth:`put_artifact`; on stale-parent the head
        is re-read and ``build`` called again, at most ``attempts`` times."""
        err: Optional[StaleParent] = None
        for _ in range(max(1, attempts)):
            head = self.hash(ctx, at=branch)["commit"]
            kwargs = dict(build(head))
            try:
                return self.put_artifact(ctx, parent=head, branch=branch, **kwargs)
            except StaleParent as e:
                err = e
        assert err is not None
        raise err

    def commit(self, ctx: str, ops: List[Mapping[str, Any]], **fields: Any) -> Dict[str, Any]:
        """One atomic commit of ops (put, delete, link, unlink)."""
        return self.request("POST", f"/v1/contexts/{q(ctx)}/commits", {"ops": ops, **fields})

    def record_fetch(self, ctx: str, url: str, status: Optional[int] = None, body: Optional[str] = None,
                     headers: Optional[Mapping[str, str]] = None, id: Optional[str] = None, **fields: Any) -> Dict[str, Any]:
        """Send fetch evidence through the gate: the server judges it
        (RETRIEVED, FAILED, UNKNOWN) and commits the fetch_verdict. Give
        the body as text (``body``) or as bytes in base64
        (``body_base64=...``), not both; a transport error (``error=...``)
        or a file or tool read has no status."""
        payload: Dict[str, Any] = {"url": url, **fields}
        if status is not None:
            payload["status"] = status
        if body is not None:
            payload["body"] = body
        if headers:
            payload["headers"] = dict(headers)
        if id is not None:
            payload["id"] = id
        return self.request("POST", f"/v1/contexts/{q(ctx)}/fetches", payload)

    def record_tool_result(self, ctx: str, **fields: Any) -> Dict[str, Any]:
        """A tool's error or output, sanitised by the server."""
        return self.request("POST", f"/v1/contexts/{q(ctx)}/tool-results", fields)

    # ---- reads ----

    def artifact(self, ctx: str, id: str, at: Optional[str] = None) -> Dict[str, Any]:
        """One artifact with data and trust."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}/artifacts/{q(id)}", at))

    def hash(self, ctx: str, at: Optional[str] = None) -> Dict[str, Any]:
        """{"commit", "context_hash", "artifacts", "edges"} at a commit or branch."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}/hash", at))

    def audit(self, ctx: str, id: str, at: Optional[str] = None) -> Dict[str, Any]:
        """What the answer ``id`` rests on, with trust and sources."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}/audit/{q(id)}", at))

    def quarantine(self, ctx: str, at: Optional[str] = None) -> Dict[str, Any]:
        """Poison roots, quarantined artifacts and blast radius."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}/quarantine", at))

    def state(self, ctx: str, at: Optional[str] = None) -> Dict[str, Any]:
        """The whole state: enough to recompute the context hash."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}/state", at))

    def compare(self, a: str, b: str) -> Dict[str, Any]:
        """Compare two runs, each "CTX" or "CTX@REF"."""
        return self.request("GET", "/v1/compare?a=" + urllib.parse.quote(a, safe="") + "&b=" + urllib.parse.quote(b, safe=""))

    def verify(self, ctx: str, hash: str, at: Optional[str] = None) -> Dict[str, Any]:
        """Ask the server to rebuild the state from the commit chain and
        compare its hash (POST .../verify). A server without that route
        answers 404 "no route": the hash of GET .../hash is compared
        instead and the result has "by_hash": True."""
        body: Dict[str, Any] = {"hash": hash}
        if at:
            body["at"] = at
        try:
            return self.request("POST", f"/v1/contexts/{q(ctx)}/verify", body)
        except NotFound as e:
            if not e.detail.startswith("no route for "):
                raise
        h = self.hash(ctx, at=at)
        return {"match": h["context_hash"] == hash, "context_hash": h["context_hash"], "commit": h["commit"], "by_hash": True}

    def model_call(self, ctx: str, request_hash: str, at: Optional[str] = None) -> Dict[str, Any]:
        """The recorded model call with that request hash (NotFound if none)."""
        return self.request("GET", self._at(f"/v1/contexts/{q(ctx)}/model-calls/{q(request_hash)}", at))
