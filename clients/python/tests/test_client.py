"""Tests of the Python client against a real `artifactd serve`."""

from __future__ import annotations

import glob
import io
import json
import os
import struct
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import agent  # noqa: E402
from artifactd import (RECORD, REPLAY, CanonicalError, Client, ModelRecorder, NotFound, Problem,  # noqa: E402
                       Quarantined, ReplayMiss, StaleParent, canonicalize, request_hash)
from artifactd.canonical import _number  # noqa: E402

from .server import ROOT, Server  # noqa: E402


class CanonicalTest(unittest.TestCase):
    """The canonical JSON against the repository's shared vectors."""

    def test_numbers(self) -> None:
        with open(os.path.join(ROOT, "testdata", "hashing", "vectors.json"), encoding="utf-8") as f:
            vectors = json.load(f)["jcs_numbers"]
        checked = 0
        for v in vectors:
            x = struct.unpack(">d", bytes.fromhex(v["ieee_hex"]))[0]
            if x != x or x in (float("inf"), float("-inf")):
                continue
            self.assertEqual(_number(x), v["canonical"], v["ieee_hex"])
            checked += 1
        self.assertGreater(checked, 100)

    def test_jcs_files(self) -> None:
        files = glob.glob(os.path.join(ROOT, "testdata", "jcs", "*.input.json"))
        self.assertGreater(len(files), 3)
        for p in files:
            with open(p, encoding="utf-8") as f:
                got = canonicalize(json.load(f))
            with open(p.replace(".input.", ".expected."), encoding="utf-8") as f:
                self.assertEqual(got, f.read().strip(), p)

    def test_refusals(self) -> None:
        for bad in [{"n": 2**53 + 1}, {"x": float("nan")}, {"s": "\ud800"}]:
            with self.assertRaises(CanonicalError):
                canonicalize(bad)

    def test_request_hash_vector(self) -> None:
        with open(os.path.join(ROOT, "clients", "testdata", "model-request.json"), encoding="utf-8") as f:
            v = json.load(f)
        self.assertEqual(request_hash(v["request"]), v["request_hash"])


class ServerTest(unittest.TestCase):
    server: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = Server().__enter__()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.__exit__(None, None, None)

    def client(self) -> Client:
        return Client(self.server.url)

    def test_problem_fields(self) -> None:
        c = self.client()
        c.ensure_context("problems")
        before = c.hash("problems")["context_hash"]
        with self.assertRaises(Problem) as cm:
            c.put_artifact("problems", "answer", {})
        p = cm.exception
        self.assertEqual((p.status, p.code), (422, "validation"))
        self.assertEqual(p.errors[0].pointer, "/data/text")
        self.assertEqual(p.errors[0].rule, "required")
        self.assertEqual(c.hash("problems")["context_hash"], before)
        c.record_fetch("problems", "https://example.com/", 200, "", id="f")
        with self.assertRaises(Quarantined) as qm:
            c.put_artifact("problems", "claim", {"text": "x"}, id="c", edges=[{"rel": "derived_from", "to": "f"}])
        self.assertEqual(qm.exception.status, 409)
        self.assertEqual(qm.exception.extensions["tainted_by"]["roots"], ["f"])
        with self.assertRaises(NotFound):
            c.artifact("problems", "c")
        with self.assertRaises(Problem) as em:
            c.ensure_context("problems", "observe")
        self.assertEqual(em.exception.code, "exists")
        self.assertEqual(c.ensure_context("problems")["quarantine"], "enforce")

    def test_cas(self) -> None:
        c = self.client()
        c.ensure_context("cas")
        head = c.hash("cas")["commit"]
        results: list = []

        def write(i: int) -> None:
            try:
                c.put_artifact("cas", "note", {"text": str(i)}, id="n", parent=head)
                results.append("ok")
            except StaleParent:
                results.append("stale")

        threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), ["ok"] + ["stale"] * 5)

        def bump(head: str) -> dict:
            try:
                n = c.artifact("cas", "counter", at=head)["data"]["n"]
            except NotFound:
                n = 0
            return {"type": "note", "id": "counter", "data": {"text": "counter", "n": n + 1}}

        threads = [threading.Thread(target=lambda: c.put_artifact_cas("cas", bump, attempts=50)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        a = c.artifact("cas", "counter")
        self.assertEqual((a["data"]["n"], a["version"]), (6, 6))

    def test_agent_record_then_replay(self) -> None:
        c = self.client()
        calls = []

        def model(req: dict) -> dict:
            calls.append(req)
            return agent.stand_in_model(req)

        out = io.StringIO()
        first = agent.run(c, "py-run-1", ModelRecorder(c, "py-run-1", RECORD), model, out)
        self.assertTrue(first["verified"], out.getvalue())
        self.assertFalse(first["by_hash"], "verify fell back to GET .../hash; the server has POST .../verify")
        self.assertIn("fetch-report: RETRIEVED", out.getvalue())
        self.assertIn("answer is confirmed", out.getvalue())
        again = agent.run(c, "py-run-1", ModelRecorder(c, "py-run-1", RECORD), model, out)
        self.assertEqual(again["context_hash"], first["context_hash"])
        calls.clear()

        def no_model(req: dict) -> dict:
            raise AssertionError("replay called the model")

        second = agent.run(c, "py-run-2", ModelRecorder(c, "py-run-2", REPLAY, source="py-run-1"), no_model, out)
        self.assertEqual(second["context_hash"], first["context_hash"])
        self.assertTrue(second["verified"])
        self.assertTrue(c.compare("py-run-1", "py-run-2@main")["equal"])
        with self.assertRaises(ReplayMiss):
            agent.run(c, "py-run-3", ModelRecorder(c, "py-run-3", REPLAY), no_model, out)


class ExampleScriptTest(unittest.TestCase):
    """The example as a user runs it: two processes, then replay --verify
    with the server stopped."""

    def test_script(self) -> None:
        with Server() as s:
            script = os.path.join(HERE, "..", "examples", "agent.py")
            env = dict(os.environ, ARTIFACTD_URL=s.url)
            one = subprocess.run([sys.executable, script, "--context", "run-1"], env=env, capture_output=True, text=True)
            self.assertEqual(one.returncode, 0, one.stderr + one.stdout)
            two = subprocess.run([sys.executable, script, "--context", "run-2", "--replay", "--source", "run-1"],
                                 env=env, capture_output=True, text=True)
            self.assertEqual(two.returncode, 0, two.stderr + two.stdout)
            h1 = [ln for ln in one.stdout.splitlines() if ln.startswith("context hash ")][0].split()[-1]
            h2 = [ln for ln in two.stdout.splitlines() if ln.startswith("context hash ")][0].split()[-1]
            self.assertEqual(h1, h2)
            s.stop()
            self.assertEqual(s.replay_verify("run-1", h1), 0)
            self.assertEqual(s.replay_verify("run-2", h1), 0)


if __name__ == "__main__":
    unittest.main()
