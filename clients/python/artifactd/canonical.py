"""RFC 8785 (JCS) canonical JSON, as artifactd hashes it.

Object members are sorted by the UTF-16 code units of their keys, strings
use the minimal escapes, numbers are written the way ECMAScript writes
doubles. Integers beyond 2**53, NaN and infinities are refused, like the
server refuses them.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

MAX_SAFE = 2**53
# The deepest nesting of arrays and objects taken, as the server's
# (hashing.MaxDepth): scalars and keys inside the deepest are no level.
MAX_DEPTH = 64


class CanonicalError(ValueError):
    """A value that cannot be canonicalized without losing information."""


def _number(f: float) -> str:
    if math.isnan(f) or math.isinf(f):
        raise CanonicalError("non-finite number")
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    mantissa, _, exp_text = repr(abs(f)).partition("e")
    exp = int(exp_text) if exp_text else 0
    int_part, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    if int_part == "0":
        stripped = frac.lstrip("0")
        n = exp - (len(frac) - len(stripped))
        digits = stripped
    else:
        n = len(int_part) + exp
        digits = (int_part + frac).lstrip("0")
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        e_text = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + e_text
    return sign + out


def _key(k: str) -> bytes:
    return k.encode("utf-16-be", "surrogatepass")


def _encode(v: Any, out: list[str], depth: int) -> None:
    """Append v's canonical text to out; depth counts the arrays and
    objects already open around v."""
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, int):
        # int.__repr__, as json writes it: an int subclass's own __str__ (an
        # IntEnum's before Python 3.11 is "Effort.HIGH") is not what is sent.
        text = int.__repr__(v)
        n = int(text)
        # Past 2^53 an integer is taken only when it is digit for digit the
        # canonical form of its double (10**20), as the server takes it.
        if abs(n) > MAX_SAFE and (abs(n) >= 2**1024 or _number(float(n)) != text):
            raise CanonicalError(f"integer {text} exceeds 2^53; send it as a string")
        out.append(text)
    elif isinstance(v, float):
        out.append(_number(v))
    elif isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise CanonicalError("lone surrogate in string") from e
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, (list, tuple, dict)) and depth >= MAX_DEPTH:
        raise CanonicalError(f"arrays and objects nested deeper than {MAX_DEPTH} levels")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(",")
            _encode(x, out, depth + 1)
        out.append("]")
    elif isinstance(v, dict):
        out.append("{")
        for k in v:
            if not isinstance(k, str):
                raise CanonicalError(f"object key {k!r} is not a string")
        for i, k in enumerate(sorted(v, key=_key)):
            if i:
                out.append(",")
            _encode(k, out, depth + 1)
            out.append(":")
            _encode(v[k], out, depth + 1)
        out.append("}")
    else:
        raise CanonicalError(f"cannot encode {type(v).__name__}")


def canonicalize(value: Any) -> str:
    """Return the canonical JSON text of value."""
    out: list[str] = []
    _encode(value, out, 0)
    return "".join(out)


def sha256_digest(value: Any) -> str:
    """Return "sha256:<hex>" of the UTF-8 canonical JSON of value."""
    return "sha256:" + hashlib.sha256(canonicalize(value).encode("utf-8")).hexdigest()
