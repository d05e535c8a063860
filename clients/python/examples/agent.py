"""The example agent loop: question → fetch through the gate → claims with
edges → answer → audit → context hash → verify.

Its "model" is a stand-in function. Run it once in record mode, then in
replay mode against a new context: the replay answers from the recorded
model call (no model, no network, no key) and reaches the same hash.

    artifactd serve &
    python3 examples/agent.py --context run-1
    python3 examples/agent.py --context run-2 --replay --source run-1
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Mapping, Optional

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from artifactd import RECORD, REPLAY, Client, ModelRecorder, model_request  # noqa: E402

PAGE = """<html><head><title>Annual report 2025</title></head><body>
<h1>Annual report 2025</h1>
<p>Revenue for the year was 12.4 million euros, up from 10.1 million in 2024.
The board attributes the growth to the new subscription product.</p></body></html>"""

QUESTION = "How much did revenue grow in 2025?"
EXTRACT = "Revenue 2025: 12.4 million euros; 2024: 10.1 million."


def stand_in_model(request: Mapping[str, Any]) -> Dict[str, Any]:
    return {"text": "Revenue grew from 10.1 to 12.4 million euros (22.8 %).", "finish_reason": "stop"}


def run(client: Client, ctx: str, recorder: ModelRecorder, model: Any = stand_in_model, out: Any = sys.stdout) -> Dict[str, Any]:
    client.ensure_context(ctx, "enforce")  # safe to repeat: re-running never fails on "exists"
    client.put_artifact(ctx, "question", {"text": QUESTION}, id="question", produced_by="user")
    verdict = client.record_fetch(ctx, "https://example.com/reports/2025", 200, PAGE,
                                  headers={"content-type": "text/html; charset=utf-8"}, id="fetch-report")
    print(f"fetch-report: {verdict['verdict']} {verdict.get('reason', '')}", file=out)
    client.put_artifact(ctx, "document", {"url": "https://example.com/reports/2025", "text": EXTRACT}, id="report",
                        produced_by="reader", edges=[{"rel": "extracted_from", "to": "fetch-report"}])
    response = recorder.call(model_request("stand-in-1", parameters={"temperature": 0},
                                           messages=[{"role": "user", "content": QUESTION + "\n\n" + EXTRACT}]), model)
    client.put_artifact(ctx, "claim", {"text": "Revenue grew 22.8 % in 2025", "value": 22.8, "model_text": response["text"]},
                        id="growth", produced_by="model", edges=[{"rel": "calculated_from", "to": "report"}])
    client.put_artifact(ctx, "answer", {"text": "Revenue grew by 22.8 % (10.1 → 12.4 million euros)."}, id="answer",
                        produced_by="agent", edges=[{"rel": "supported_by", "to": "growth"}, {"rel": "responds_to", "to": "question"}])
    audit = client.audit(ctx, "answer")
    s = audit["summary"]
    print(f"audit: answer is {audit['trust']['status']}; {s['confirmed']} confirmed, {s['quarantined']} quarantined; "
          f"sources {len(audit['sources'])}", file=out)
    h = client.hash(ctx)
    v = client.verify(ctx, h["context_hash"], at=h["commit"])
    how = "compared with GET .../hash (this server has no verify route)" if v.get("by_hash") else "replayed by the server"
    print(f"context hash {h['context_hash']}\nverify: match={v['match']} ({how})", file=out)
    return {"context_hash": h["context_hash"], "verified": bool(v["match"]), "by_hash": bool(v.get("by_hash"))}


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=os.environ.get("ARTIFACTD_URL", "http://127.0.0.1:7070"))
    ap.add_argument("--context", default="example-agent")
    ap.add_argument("--replay", action="store_true", help="answer model calls from the record")
    ap.add_argument("--source", help="in replay mode, the context holding the records (default --context)")
    args = ap.parse_args(argv)
    client = Client(args.server, token=os.environ.get("ARTIFACTD_TOKEN"))
    recorder = ModelRecorder(client, args.context, REPLAY if args.replay else RECORD, source=args.source)
    result = run(client, args.context, recorder)
    return 0 if result["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
