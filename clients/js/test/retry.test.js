// Retry-After: the client against local HTTP servers that refuse with 429
// or 503 and a Retry-After, and against a real `artifactd serve` at its
// connection cap.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import { ArtifactdClient, CommitOutcomeUnknownError, NotFoundError, ProblemError, QuarantinedError, StaleParentError } from "../src/index.js";
import { startServer } from "./server.js";

/**
 * A local HTTP server that refuses the first `refusals` requests (all when
 * < 0) with status, the problem code (text/plain, as a proxy answers, when
 * null) and retryAfter(), then answers 200 or 201 with JSON. `arrived`
 * holds when each request came.
 */
async function refuser(t, { status, code, retryAfter, refusals = 1 }) {
  const arrived = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      arrived.push(performance.now());
      if (refusals < 0 || arrived.length <= refusals) {
        res.setHeader("Retry-After", retryAfter());
        if (code === null) {
          res.writeHead(status, { "Content-Type": "text/plain" }).end("try later\n");
          return;
        }
        res.writeHead(status, { "Content-Type": "application/problem+json" });
        res.end(JSON.stringify({ type: "urn:artifactd:problem:" + code, title: "t", status, detail: "refused" }));
        return;
      }
      if (req.method === "POST") {
        res.writeHead(201, { "Content-Type": "application/json" }).end('{"commit":"c1","artifact":{"id":"a","version":1}}');
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" }).end('{"commit":"c1","context_hash":"h1"}');
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${server.address().port}`, arrived };
}

const seconds = (s) => () => s;
const note = { id: "a", type: "note", data: { text: "x" } };

test("Retry-After: a GET refused with 503 overloaded or 429, a POST with 503 overloaded, sent again after the delay", async (t) => {
  // Before: a GET's 503 was retried after 100 ms, a 429 and a POST never.
  for (const [status, code, post] of [
    [503, "overloaded", false],
    [429, null, false],
    [503, "overloaded", true],
  ]) {
    await t.test(`${post ? "POST" : "GET"} ${status} ${code}`, async (t) => {
      const s = await refuser(t, { status, code, retryAfter: seconds("1") });
      const c = new ArtifactdClient(s.url);
      const got = post ? await c.putArtifact("run", note) : await c.hash("run");
      assert.equal(got.commit, "c1");
      assert.equal(s.arrived.length, 2);
      assert.ok(s.arrived[1] - s.arrived[0] >= 1000, `sent again after ${s.arrived[1] - s.arrived[0]} ms`);
    });
  }
});

test("Retry-After: an HTTP-date is waited for until then", async (t) => {
  let until;
  const s = await refuser(t, {
    status: 503,
    code: "overloaded",
    retryAfter: () => {
      until = (Math.floor(Date.now() / 1000) + 2) * 1000;
      return new Date(until).toUTCString();
    },
  });
  const startWall = Date.now();
  const start = performance.now();
  await new ArtifactdClient(s.url).putArtifact("run", note);
  assert.equal(s.arrived.length, 2);
  assert.ok(s.arrived[1] - start >= until - startWall - 10, `sent again ${s.arrived[1] - start} ms after the start, the date was ${until - startWall} ms ahead`);
});

test("Retry-After: a POST whose refusal does not say it was not processed is sent once", async (t) => {
  for (const [status, code] of [
    [503, "unavailable"],
    [503, null],
    [429, null],
    [429, "overloaded"],
  ]) {
    await t.test(`${status} ${code}`, async (t) => {
      const s = await refuser(t, { status, code, retryAfter: seconds("1"), refusals: -1 });
      const start = performance.now();
      await assert.rejects(new ArtifactdClient(s.url).putArtifact("run", note), (e) => {
        assert.ok(e instanceof ProblemError);
        assert.equal(e.status, status);
        assert.equal(e.retryAfterMs, 1000);
        return true;
      });
      assert.ok(performance.now() - start < 500);
      assert.equal(s.arrived.length, 1);
    });
  }
});

test("Retry-After: a value that is no delay-seconds and no HTTP-date is no Retry-After", async (t) => {
  // Before: Date.parse took "abc 1" for 1 Jan 2001 (a past date: the POST
  // was sent again at once, 4 times in all) and "foo 2099" for a date in
  // 2099 (thrown with a delay of some 70 years).
  for (const ra of ["soon", "1.5", "abc 1", "Thu 5", "foo 2099", "Sun, 06 Nov 2094 08:49:37 PST", "Sun, 32 Nov 2094 08:49:37 GMT"]) {
    await t.test(ra, async (t) => {
      const s = await refuser(t, { status: 503, code: "overloaded", retryAfter: seconds(ra), refusals: -1 });
      await assert.rejects(new ArtifactdClient(s.url).putArtifact("run", note), (e) => {
        assert.equal(e.code, "overloaded");
        assert.equal(e.retryAfterMs, undefined);
        return true;
      });
      assert.equal(s.arrived.length, 1);
    });
  }
});

test("Retry-After: the three forms of an HTTP-date are read", async (t) => {
  // IMF-fixdate, RFC 850 and asctime (day padded with a space or not): a
  // past date is no wait, the request is sent again at once.
  for (const ra of ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun Nov 6 08:49:37 1994"]) {
    await t.test(ra, async (t) => {
      const s = await refuser(t, { status: 503, code: "overloaded", retryAfter: seconds(ra) });
      assert.equal((await new ArtifactdClient(s.url).putArtifact("run", note)).commit, "c1");
      assert.equal(s.arrived.length, 2);
    });
  }
});

test("Retry-After: a proxy's problem with members not of RFC 9457's types is retried by its HTTP status", async (t) => {
  // Before: "status": "Too Many Requests" made the error's status NaN, so
  // the 429 or 503 was not recognised (thrown at once, or retried after
  // the backoff instead of the delay), and a null in "errors" threw a
  // TypeError.
  const body = JSON.stringify({ type: "about:blank", title: "slow down", status: "Too Many Requests", errors: [null, "x"] });
  for (const status of [429, 503]) {
    await t.test(String(status), async (t) => {
      const arrived = [];
      const server = http.createServer((req, res) => {
        arrived.push(performance.now());
        if (arrived.length === 1) res.writeHead(status, { "Content-Type": "application/problem+json", "Retry-After": "1" }).end(body);
        else res.writeHead(200, { "Content-Type": "application/json" }).end('{"commit":"c1","context_hash":"h1"}');
      });
      await new Promise((r) => server.listen(0, "127.0.0.1", r));
      t.after(() => {
        server.closeAllConnections();
        server.close();
      });
      const c = new ArtifactdClient(`http://127.0.0.1:${server.address().port}`);
      assert.equal((await c.hash("run")).commit, "c1");
      assert.equal(arrived.length, 2);
      assert.ok(arrived[1] - arrived[0] >= 1000, `sent again after ${arrived[1] - arrived[0]} ms`);
    });
  }
  const s = await refuser(t, { status: 429, code: null, retryAfter: seconds("120"), refusals: -1 });
  await assert.rejects(new ArtifactdClient(s.url).hash("run"), (e) => {
    assert.equal(e.status, 429);
    assert.equal(e.retryAfterMs, 120000);
    return true;
  });
});

test("Retry-After: past the call's timeout or over the longest wait, the refusal is thrown at once", async (t) => {
  // Before: a GET was sent three times.
  for (const [ra, timeoutMs] of [
    ["5", 500],
    ["120", 30000],
  ]) {
    await t.test(`Retry-After ${ra}`, async (t) => {
      const s = await refuser(t, { status: 503, code: "overloaded", retryAfter: seconds(ra), refusals: -1 });
      const start = performance.now();
      await assert.rejects(new ArtifactdClient(s.url, { timeoutMs }).hash("run"), (e) => {
        assert.equal(e.code, "overloaded");
        assert.equal(e.retryAfterMs, Number(ra) * 1000);
        return true;
      });
      assert.ok(performance.now() - start < 1000);
      assert.equal(s.arrived.length, 1);
    });
  }
});

test("Retry-After: at most 1 + retryAfter requests; retryAfter 0 keeps the retries without it", async (t) => {
  for (const [options, want] of [
    [{}, 4],
    [{ retryAfter: 1 }, 2],
    [{ retryAfter: 0 }, 3],
  ]) {
    const s = await refuser(t, { status: 503, code: "overloaded", retryAfter: seconds("0"), refusals: -1 });
    await assert.rejects(new ArtifactdClient(s.url, { backoffMs: 1, ...options }).hash("run"), ProblemError);
    assert.equal(s.arrived.length, want, JSON.stringify(options));
  }
});

test("a stream body is sent, and once only: a refusal with Retry-After is thrown at once", async (t) => {
  // Before: fetch refused the stream (no duplex "half"), so putBlob with a
  // ReadableStream failed with a network error before sending anything.
  const bodies = [];
  let refuse = false;
  const server = http.createServer((req, res) => {
    const parts = [];
    req.on("data", (d) => parts.push(d));
    req.on("end", () => {
      bodies.push(Buffer.concat(parts).toString());
      if (refuse) {
        res.writeHead(503, { "Content-Type": "application/problem+json", "Retry-After": "0" });
        res.end(JSON.stringify({ type: "urn:artifactd:problem:overloaded", title: "t", status: 503, detail: "refused" }));
        return;
      }
      res.writeHead(201, { "Content-Type": "application/json" }).end('{"digest":"sha256:x","size":5}');
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const c = new ArtifactdClient(`http://127.0.0.1:${server.address().port}`);
  const stream = () =>
    new ReadableStream({
      start(ctl) {
        ctl.enqueue(new TextEncoder().encode("hello"));
        ctl.close();
      },
    });
  assert.deepEqual(await c.putBlob("run", stream()), { digest: "sha256:x", size: 5 });
  assert.deepEqual(bodies, ["hello"]);
  refuse = true;
  await assert.rejects(c.putBlob("run", stream()), (e) => {
    assert.equal(e.code, "overloaded");
    assert.equal(e.retryAfterMs, 0);
    return true;
  });
  assert.deepEqual(bodies, ["hello", "hello"]);
});

/** One request with node:http; resolves to { status, body }. */
function call(url, { method = "GET", body, agent = false } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body ? { "Content-Type": "application/json" } : {} }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

test("a real server at its connection cap: a refused write is sent again after Retry-After and written once", async (t) => {
  const server = await startServer("--max-conns", "1");
  if (server.skip) return t.skip(server.skip);
  t.after(() => server.close());
  assert.equal((await call(server.url + "/v1/contexts/run", { method: "PUT", body: "{}" })).status, 201);
  // Take the one ordinary slot with a keep-alive connection that was
  // answered (a reserve connection would have been refused).
  let hold;
  for (let i = 0; i < 50 && !hold; i++) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    if ((await call(server.url + "/v1/contexts/run/hash", { agent })).status === 200) hold = agent;
    else {
      agent.destroy();
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  assert.ok(hold, "no ordinary connection slot came free");
  const release = setTimeout(() => hold.destroy(), 300);
  try {
    const c = new ArtifactdClient(server.url);
    const start = performance.now();
    await c.putArtifact("run", note);
    assert.ok(performance.now() - start >= 1000, "the write was not refused and sent again after 1 s");
    assert.equal((await c.artifact("run", "a")).version, 1);
  } finally {
    clearTimeout(release);
    hold.destroy();
  }
});

test("Retry-After: a delay past a timer's limit is not waited for, whatever maxRetryAfterMs says", async (t) => {
  // Before: with maxRetryAfterMs raised past 2^31-1 ms, a delay of 25 days
  // fired after 1 ms and the POST was sent again at once.
  const s = await refuser(t, { status: 503, code: "overloaded", retryAfter: seconds(String(25 * 86400)), refusals: -1 });
  const c = new ArtifactdClient(s.url, { maxRetryAfterMs: 1e12, timeoutMs: 0 });
  await assert.rejects(c.putArtifact("c", note), (e) => e instanceof ProblemError && e.status === 503 && e.retryAfterMs === 25 * 86400 * 1000);
  assert.equal(s.arrived.length, 1);
});

// The problems artifactd answers with 503, as its problem writer
// (httpapi's writeError) writes them: type, title and status from its
// table, the detail (service.OutcomeUnknownDetail, service.NotWrittenDetail,
// netguard's), the request path as instance, a final newline.
const PROBLEMS_503 = {
  "commit-outcome-unknown": {
    title: "Commit outcome unknown",
    detail:
      "the write was sent to the database and its answer was lost, so it may or may not have been made; read the branch head (or what else the write changes) before retrying, and retry a commit with the head you read as its parent, so that one that landed is refused as stale rather than applied twice",
  },
  unavailable: {
    title: "Service unavailable",
    detail: "the write did not complete and no commit of it was made (the database could not be reached, or rolled it back each time it ran); send it again later",
  },
  overloaded: {
    title: "Server busy",
    detail: "the server has reached its connection limit; only /healthz and /readyz are answered on this connection: retry",
  },
};

/**
 * A local HTTP server that answers every request with artifactd's 503
 * problem of code (and a Retry-After when retryAfter is given, which
 * artifactd sends with none of them but overloaded); `seen` lists the
 * requests it saw.
 */
async function answering503(t, code, retryAfter) {
  const seen = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push(`${req.method} ${req.url}`);
      const { title, detail } = PROBLEMS_503[code];
      const headers = { "Content-Type": "application/problem+json", "Cache-Control": "no-store" };
      if (retryAfter !== undefined) headers["Retry-After"] = retryAfter;
      res.writeHead(503, headers);
      res.end(JSON.stringify({ type: "urn:artifactd:problem:" + code, title, status: 503, detail, instance: req.url.split("?")[0] }) + "\n");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${server.address().port}`, seen };
}

test("a write answered 503 commit-outcome-unknown throws CommitOutcomeUnknownError and is sent once", async (t) => {
  // Before: a plain ProblemError; the caller compared e.code by hand.
  const ops = [{ op: "put", artifact: note }];
  for (const [name, call, path] of [
    ["commit", (c) => c.commit("run", { ops }), "/v1/contexts/run/commits"],
    ["putArtifact", (c) => c.putArtifact("run", note), "/v1/contexts/run/artifacts"],
  ]) {
    // Retry-After "0": none from artifactd, as a proxy in front might add.
    for (const retryAfter of [undefined, "0"]) {
      await t.test(`${name}, Retry-After ${retryAfter}`, async (t) => {
        const s = await answering503(t, "commit-outcome-unknown", retryAfter);
        const c = new ArtifactdClient(s.url, { retries: 5, backoffMs: 1 });
        await assert.rejects(call(c), (e) => {
          assert.ok(e instanceof CommitOutcomeUnknownError, `${e.name}: ${e.message}`);
          assert.ok(e instanceof ProblemError);
          assert.ok(!(e instanceof StaleParentError || e instanceof QuarantinedError || e instanceof NotFoundError));
          assert.equal(e.name, "CommitOutcomeUnknownError");
          assert.equal(e.status, 503);
          assert.equal(e.code, "commit-outcome-unknown");
          assert.equal(e.title, "Commit outcome unknown");
          assert.equal(e.detail, PROBLEMS_503["commit-outcome-unknown"].detail);
          assert.equal(e.instance, path);
          assert.equal(e.method, "POST");
          return true;
        });
        assert.deepEqual(s.seen, [`POST ${path}`], "a write that may have landed was sent again");
      });
    }
  }
});

test("other 503s are not CommitOutcomeUnknownError", async (t) => {
  for (const code of ["unavailable", "overloaded"]) {
    await t.test(code, async (t) => {
      const s = await answering503(t, code);
      await assert.rejects(new ArtifactdClient(s.url).commit("run", { ops: [{ op: "put", artifact: note }] }), (e) => {
        assert.ok(e instanceof ProblemError);
        assert.ok(!(e instanceof CommitOutcomeUnknownError), `${code} taken for commit-outcome-unknown`);
        assert.equal(e.name, "ProblemError");
        assert.equal(e.status, 503);
        assert.equal(e.code, code);
        return true;
      });
      assert.equal(s.seen.length, 1);
    });
  }
});
