// The client and the saver against the API's contract where they broke
// it: a request that never ends, an answer cut short or too long, the
// bearer token kept out of errors, a subgraph's checkpoints, two threads in
// one context.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";

import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";

import { AnswerTooLargeError, ArtifactdClient, ProblemError, sha256Digest } from "../src/index.js";
import { ArtifactdSaver } from "../src/langgraph.js";
import { startServer } from "./server.js";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.close?.();
});

test("a request to a server that never answers ends with the client's timeout", async () => {
  const sockets = [];
  const silent = createServer((s) => sockets.push(s));
  await new Promise((r) => silent.listen(0, "127.0.0.1", r));
  const c = new ArtifactdClient(`http://127.0.0.1:${silent.address().port}`, { retries: 0, timeoutMs: 300 });
  const outcome = await Promise.race([
    c.hash("x").then(() => "answered", (e) => "rejected: " + e.message),
    new Promise((r) => setTimeout(() => r("still pending after 10 s"), 10000)),
  ]);
  for (const s of sockets) s.destroy();
  silent.close();
  assert.match(outcome, /^rejected: GET \/v1\/contexts\/x\/hash: /);
});

test("a GET whose answer is cut mid-body is retried and reported as the client's error", async () => {
  let seen = 0;
  const cut = createServer((s) => {
    s.once("data", () => {
      seen++;
      s.end('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"artifacts":[{"');
    });
  });
  await new Promise((r) => cut.listen(0, "127.0.0.1", r));
  const c = new ArtifactdClient(`http://127.0.0.1:${cut.address().port}`, { retries: 2, backoffMs: 10 });
  let err;
  try {
    await c.state("x");
  } catch (e) {
    err = e;
  }
  cut.close();
  assert.ok(err, "no error");
  assert.match(err.message, /^GET \/v1\/contexts\/x\/state: /);
  assert.equal(seen, 3, "a cut GET answer was not retried");
});

/**
 * A local TCP server: each connection's request head is read, then
 * serve(socket, head) writes raw bytes. Resolves to { url, heads, close }.
 */
async function raw(t, serve) {
  const heads = [];
  const sockets = new Set();
  const srv = createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
    let head = "";
    const onData = (chunk) => {
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      s.off("data", onData);
      heads.push(head);
      serve(s, head);
    };
    s.on("data", onData);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const close = () => {
    for (const s of sockets) s.destroy();
    srv.close();
  };
  t.after(close);
  return { url: `http://127.0.0.1:${srv.address().port}`, heads, close };
}

async function rejection(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail("no error");
}

const SECRET = "s3cr3t-token-value-0123456789";

test("a bearer token's surrounding whitespace is trimmed; one with a control character is refused without quoting it", async (t) => {
  // Node's Headers refused a token with an inner CR, LF or NUL with an
  // error quoting the whole header value, the token in it.
  const s = await raw(t, (sock) => sock.end("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"));
  for (const bad of [`${SECRET}\nX`, `${SECRET.slice(0, 6)}\r${SECRET.slice(6)}`, `${SECRET.slice(0, 6)}\0${SECRET.slice(6)}`, `${SECRET}\x7f!`]) {
    const err = await rejection((async () => new ArtifactdClient(s.url, { token: bad, retries: 0 }).hash("x"))());
    assert.ok(!err.message.includes(SECRET.slice(0, 6)), `the token is in the error: ${err.message}`);
    assert.ok(err instanceof TypeError && /control character/.test(err.message), err.message);
  }
  await new ArtifactdClient(s.url, { token: ` ${SECRET}\n`, retries: 0 }).hash("x");
  assert.match(s.heads.at(-1), new RegExp(`\r\nauthorization: Bearer ${SECRET}\r\n`, "i"));
});

test("a successful answer past maxAnswerBytes is an AnswerTooLargeError and not sent again", async (t) => {
  // An answer of any length was read whole into memory (300 MiB).
  const s = await raw(t, async (sock) => {
    sock.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    const chunk = `10000\r\n${" ".repeat(65536)}\r\n`;
    for (let i = 0; i < 64 && !sock.destroyed; i++) {
      if (!sock.write(chunk)) await new Promise((r) => sock.once("drain", r).once("close", r));
    }
    if (!sock.destroyed) sock.end("0\r\n\r\n");
  });
  const err = await rejection(new ArtifactdClient(s.url, { maxAnswerBytes: 100000, retries: 2, backoffMs: 10 }).hash("x"));
  assert.ok(err instanceof AnswerTooLargeError, `${err.name}: ${err.message}`);
  assert.match(err.message, /^GET \/v1\/contexts\/x\/hash: .*100000.*maxAnswerBytes/);
  assert.equal(s.heads.length, 1);
});

test("a Content-Length past maxAnswerBytes is refused unread", async (t) => {
  const s = await raw(t, (sock) => sock.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 419430400\r\n\r\n"));
  const start = performance.now();
  const err = await rejection(new ArtifactdClient(s.url, { maxAnswerBytes: 1 << 20, retries: 0, timeoutMs: 5000 }).getBlob("x", "sha256:00"));
  assert.match(err.message, /the answer is 419430400 bytes/);
  assert.ok(performance.now() - start < 3000);
});

test("a refusal that is not JSON keeps 4 KiB as its detail, cut at a character", async (t) => {
  // A proxy's 502 page became the ProblemError's detail whole (any size).
  const page = Buffer.concat([Buffer.from("x" + "é".repeat(3000)), Buffer.alloc(1 << 20, "<")]);
  const s = await raw(t, (sock) => {
    sock.write(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: ${page.length}\r\n\r\n`);
    sock.end(page);
  });
  const err = await rejection(new ArtifactdClient(s.url, { retries: 0 }).hash("x"));
  assert.ok(err instanceof ProblemError, err.message);
  assert.equal(err.status, 502);
  assert.ok(err.detail.length < 4200, `detail of ${err.detail.length} characters`);
  assert.equal(err.detail, "x" + "é".repeat(2047) + " … [cut: the answer was longer than 4096 bytes]");
});

test("a JSON refusal is read to 16 MiB, or maxAnswerBytes when less", async (t) => {
  const big = Buffer.from(JSON.stringify({ type: "urn:artifactd:problem:x", detail: "d".repeat(300000) }));
  const s = await raw(t, (sock) => {
    sock.write(`HTTP/1.1 409 Conflict\r\nContent-Type: application/problem+json\r\nContent-Length: ${big.length}\r\n\r\n`);
    sock.end(big);
  });
  let err = await rejection(new ArtifactdClient(s.url, { retries: 0 }).hash("x"));
  assert.equal(err.code, "x");
  assert.equal(err.detail.length, 300000);
  err = await rejection(new ArtifactdClient(s.url, { retries: 0, maxAnswerBytes: 100000 }).hash("x"));
  assert.equal(err.code, "about:blank");
  assert.ok(err.detail.endsWith(" … [cut: the answer was longer than 100000 bytes]"), err.detail.slice(-80));
});

test("a graph with a subgraph node runs on the saver, thread after thread", async () => {
  // Its namespaces' checkpoints move the context's head under each other:
  // no conflict, which made put give up at random before.
  const client = new ArtifactdClient(server.url);
  const saver = new ArtifactdSaver({ client });
  const S = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  const build = (cp) => {
    const child = new StateGraph(S).addNode("inner", async () => ({ log: ["inner"] })).addEdge(START, "inner").addEdge("inner", END).compile();
    return new StateGraph(S)
      .addNode("outer", async () => ({ log: ["outer"] }))
      .addNode("child", child)
      .addEdge(START, "outer")
      .addEdge("outer", "child")
      .addEdge("child", END)
      .compile({ checkpointer: cp });
  };
  const want = await build(new MemorySaver()).invoke({ log: [] }, { configurable: { thread_id: "mem" } });
  const failures = [];
  for (let i = 0; i < 6; i++) {
    try {
      const out = await build(saver).invoke({ log: [] }, { configurable: { thread_id: `subgraph-${i}` } });
      assert.deepEqual(out.log, want.log);
    } catch (e) {
      failures.push(`thread subgraph-${i}: ${e.message}`);
    }
  }
  assert.deepEqual(failures, []);
});

test("two threads never share a context", async () => {
  // A thread id of 32 hex digits named the context of the thread whose id
  // hashes to it, and read that thread's checkpoints.
  const client = new ArtifactdClient(server.url);
  const saver = new ArtifactdSaver({ client });
  const a = "team/a";
  const b = (await sha256Digest(a)).slice(7, 39);
  assert.notEqual(await saver.contextFor(a), await saver.contextFor(b));
  const cfg = (t) => ({ configurable: { thread_id: t, checkpoint_ns: "" } });
  const cpA = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { owner: "thread A" } };
  await saver.put(cfg(a), cpA, { source: "input", step: -1, parents: {} }, {});
  assert.equal(await saver.getTuple(cfg(b)), undefined);
  assert.equal((await saver.getTuple(cfg(a))).checkpoint.channel_values.owner, "thread A");
});

test("the saver keeps a deep or a large state in a blob", async () => {
  // A state 58 levels deep, or of 9 MB, passed the saver's own check and
  // was refused by the server (too_deep, payload-too-large).
  const client = new ArtifactdClient(server.url);
  const saver = new ArtifactdSaver({ client });
  let deep = "leaf";
  for (let i = 0; i < 58; i++) deep = { d: deep };
  const doc = "retrieved page text. ".repeat(450000);
  for (const [thread, values] of [["deep", { deep }], ["big", { doc }]]) {
    const cp = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values };
    const config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
    const saved = await saver.put(config, cp, { source: "input", step: -1, parents: {} }, {});
    const back = await saver.getTuple(saved);
    assert.deepEqual(back.checkpoint.channel_values, values);
  }
});
