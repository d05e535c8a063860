"""Starts a real `artifactd serve` for the tests: on a temporary data
directory and a free loopback port. The binary is $ARTIFACTD_BIN, or built
with `go build ./cmd/artifactd` from the repository. Without CI set, a
missing Go toolchain skips the tests; with CI set it fails them."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest
from typing import List, Optional

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_built: Optional[str] = None


def binary() -> str:
    global _built
    if os.environ.get("ARTIFACTD_BIN"):
        return os.environ["ARTIFACTD_BIN"]
    if _built:
        return _built
    go = shutil.which("go")
    if go is None:
        msg = "artifactd tests need the artifactd binary: set ARTIFACTD_BIN or install Go"
        if os.environ.get("CI"):
            raise RuntimeError(msg)
        raise unittest.SkipTest(msg)
    out = os.path.join(tempfile.mkdtemp(prefix="artifactd-py-"), "artifactd")
    subprocess.run([go, "build", "-o", out, "./cmd/artifactd"], cwd=ROOT, check=True)
    _built = out
    return out


class Server:
    """A running `artifactd serve`; use as a context manager."""

    def __init__(self, *flags: str):
        self.flags: List[str] = list(flags)
        self.url = ""
        self.data = ""
        self.bin = ""

    def __enter__(self) -> "Server":
        self.bin = binary()
        self.data = tempfile.mkdtemp(prefix="artifactd-data-")
        self.proc = subprocess.Popen([self.bin, "serve", "--data", self.data, "--addr", "127.0.0.1:0", *self.flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        found = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                m = re.search(r"serving (http://\S+)", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(60):
            self.stop()
            raise RuntimeError("artifactd serve did not start within 60 s")
        return self

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def replay_verify(self, ctx: str, hash: str) -> int:
        """`artifactd replay --verify` on the data directory (stop first)."""
        return subprocess.run([self.bin, "replay", "--data", self.data, "--context", ctx, "--verify", hash],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)
