// The client and the saver against the API's contract where they broke
// it: a request that never ends, an answer cut short, a subgraph's
// checkpoints, two threads in one context.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";

import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";

import { ArtifactdClient, sha256Digest } from "../src/index.js";
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
