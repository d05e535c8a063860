import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";

import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";

import { ArtifactdClient } from "../src/index.js";
import { ArtifactdSaver, CheckpointConflictError, LegacyIdError } from "../src/langgraph.js";
import { startServer } from "./server.js";

let server;
let page;
before(async () => {
  server = await startServer();
  // The page the tool node fetches: a real HTTP fetch over loopback.
  page = createServer((req, res) => {
    if (req.url === "/empty") {
      res.writeHead(200, { "content-type": "text/html" });
      return res.end("");
    }
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    res.end("The 2025 annual report states revenue of 12.4 million euros, up from 10.1 million euros in 2024.");
  });
  await new Promise((r) => page.listen(0, "127.0.0.1", r));
});
after(async () => {
  await server?.close?.();
  await new Promise((r) => page?.close(r) ?? r());
});

function setup(t) {
  if (server.skip) {
    t.skip(server.skip);
    return undefined;
  }
  return new ArtifactdClient(server.url);
}

const State = Annotation.Root({
  url: Annotation(),
  verdict: Annotation(),
  text: Annotation(),
  answer: Annotation(),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** A two-node graph: a tool node that fetches a URL and records the fetch
 * through the gate, then an answer node. */
function buildGraph(client, saver) {
  const fetchNode = async (state, config) => {
    const res = await fetch(state.url);
    const body = await res.text();
    const ctx = await saver.threadContext(config.configurable.thread_id);
    const v = await client.recordFetch(ctx, {
      id: "fetch:" + new URL(state.url).pathname,
      url: state.url,
      status: res.status,
      headers: { "content-type": res.headers.get("content-type") ?? "" },
      body,
    });
    return { verdict: v.verdict, text: v.verdict === "RETRIEVED" ? body : "", log: [`fetch ${v.verdict}`] };
  };
  const answerNode = async (state) => ({
    answer: state.verdict === "RETRIEVED" ? "Revenue grew 22.8 %." : "I could not read the report.",
    log: ["answer"],
  });
  return new StateGraph(State)
    .addNode("fetch", fetchNode)
    .addNode("respond", answerNode)
    .addEdge(START, "fetch")
    .addEdge("fetch", "respond")
    .addEdge("respond", END)
    .compile({ checkpointer: saver });
}

test("a graph runs on the saver; every checkpoint is a verifiable commit", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const graph = buildGraph(client, saver);
  const config = { configurable: { thread_id: "report-run" } };
  const url = `http://127.0.0.1:${page.address().port}/report`;
  const out = await graph.invoke({ url }, config);
  assert.equal(out.verdict, "RETRIEVED");
  assert.equal(out.answer, "Revenue grew 22.8 %.");
  assert.deepEqual(out.log, ["fetch RETRIEVED", "answer"]);

  // A fresh saver (another process, say) sees the same state.
  const reader = new ArtifactdSaver({ client });
  const state = await buildGraph(client, reader).getState(config);
  assert.equal(state.values.answer, "Revenue grew 22.8 %.");
  const history = [];
  for await (const s of buildGraph(client, reader).getStateHistory(config)) history.push(s);
  assert.equal(history.length, 4, "input, fetch, answer and the end state");

  // The fetch verdict lives in the thread's context next to the checkpoints.
  const ctx = await saver.contextFor("report-run");
  const verdict = await client.artifact(ctx, "fetch:/report");
  assert.equal(verdict.type, "fetch_verdict");
  assert.equal(verdict.trust.status, "confirmed");

  // State at every checkpoint is verifiable.
  for (const s of history) {
    const v = await reader.verify(s.config);
    assert.equal(v.match, true, JSON.stringify(v));
  }
  // Running again on the thread continues it.
  const again = await graph.invoke({ url }, config);
  assert.deepEqual(again.log, ["fetch RETRIEVED", "answer", "fetch RETRIEVED", "answer"]);
  let n = 0;
  for await (const _ of reader.list(config)) n++;
  assert.equal(n, 8);
  let limited = 0;
  for await (const _ of reader.list(config, { limit: 3, filter: { source: "loop" } })) limited++;
  assert.equal(limited, 3);
});

test("two writers on one thread: the second gets a conflict, nothing forks", async (t) => {
  const client = setup(t);
  if (!client) return;
  const a = new ArtifactdSaver({ client });
  const b = new ArtifactdSaver({ client });
  const config = { configurable: { thread_id: "race", checkpoint_ns: "" } };
  const first = { ...emptyCheckpoint(), id: uuid6(-1) };
  const root = await a.put(config, first, { source: "input", step: -1, parents: {} }, {});
  // Both writers read the same latest checkpoint, then both extend it.
  const [ta, tb] = await Promise.all([a.getTuple(config), b.getTuple(config)]);
  assert.equal(ta.config.configurable.checkpoint_id, first.id);
  assert.equal(tb.config.configurable.checkpoint_id, first.id);
  const ca = { ...emptyCheckpoint(), id: uuid6(-1) };
  const cb = { ...emptyCheckpoint(), id: uuid6(-1) };
  const results = await Promise.allSettled([
    a.put(root, ca, { source: "loop", step: 0, parents: {} }, {}),
    b.put(root, cb, { source: "loop", step: 0, parents: {} }, {}),
  ]);
  const won = results.filter((r) => r.status === "fulfilled");
  const lost = results.filter((r) => r.status === "rejected");
  assert.equal(won.length, 1, JSON.stringify(results));
  assert.ok(lost[0].reason instanceof CheckpointConflictError, String(lost[0].reason));
  assert.match(lost[0].reason.message, /another writer got there first/);
  // The history is one chain: the winner's checkpoint, then the root.
  const ids = [];
  for await (const tup of a.list({ configurable: { thread_id: "race" } })) ids.push(tup.checkpoint.id);
  assert.equal(ids.length, 2);
  assert.equal(ids[1], first.id);
  assert.ok([ca.id, cb.id].includes(ids[0]));
});

test("two graphs on one thread: the writer that read a stale head fails clearly", async (t) => {
  const client = setup(t);
  if (!client) return;
  const url = `http://127.0.0.1:${page.address().port}/report`;
  const config = { configurable: { thread_id: "two-graphs" } };
  const a = new ArtifactdSaver({ client });
  await buildGraph(client, a).invoke({ url }, config);
  // B reads the thread, then waits until A has run once more.
  let release;
  const gate = new Promise((r) => (release = r));
  class Paused extends ArtifactdSaver {
    async getTuple(cfg) {
      const tuple = await super.getTuple(cfg);
      await gate;
      return tuple;
    }
  }
  const b = new Paused({ client });
  const pb = buildGraph(client, b).invoke({ url }, config);
  await new Promise((r) => setTimeout(r, 200));
  await buildGraph(client, a).invoke({ url }, config);
  release();
  await assert.rejects(pb, CheckpointConflictError);
  let n = 0;
  for await (const _ of a.list(config)) n++;
  assert.equal(n, 8, "two runs of four checkpoints, no fork");
});

test("pending writes come back in writesSortKey order; deleteThread keeps history verifiable", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const config = { configurable: { thread_id: "writes", checkpoint_ns: "" } };
  const cp = { ...emptyCheckpoint(), id: uuid6(-1) };
  const c1 = await saver.put(config, cp, { source: "input", step: -1, parents: {} }, {});
  await saver.putWrites(c1, [["b", { x: 2 }], ["a", "y"]], "task-2", "~path-2");
  await saver.putWrites(c1, [["c", [1, 2, 3]]], "task-1", "~path-1");
  await saver.putWrites(c1, [["c", "ignored: idx 0 of task-1 is already written"]], "task-1", "~path-1");
  const tuple = await saver.getTuple(c1);
  assert.deepEqual(tuple.pendingWrites, [
    ["task-1", "c", [1, 2, 3]],
    ["task-2", "b", { x: 2 }],
    ["task-2", "a", "y"],
  ]);
  const { context, commit } = await saver.commitOf(c1);
  const h = await client.hash(context);
  await saver.deleteThread("writes");
  assert.equal(await saver.getTuple(config), undefined);
  const old = await client.hash(context, { at: h.commit });
  assert.equal((await client.verify(context, old.context_hash, { at: h.commit })).match, true);
  assert.ok(commit);
});

test("two savers racing putWrites on one checkpoint lose no write", async (t) => {
  const client = setup(t);
  if (!client) return;
  const input = { source: "input", step: -1, parents: {} };
  for (let round = 0; round < 5; round++) {
    // Two processes, say: each saver with its own client, the thread's
    // context already known to both, so their writes overlap.
    const a = new ArtifactdSaver({ client: new ArtifactdClient(server.url) });
    const b = new ArtifactdSaver({ client: new ArtifactdClient(server.url) });
    const thread = `racing-writes-${round}`;
    await Promise.all([a.threadContext(thread), b.threadContext(thread)]);
    const c1 = await a.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, { ...emptyCheckpoint(), id: uuid6(-1) }, input, {});
    // Tasks of their own, then one task's regular write from one saver
    // and its error from the other: both are kept.
    const tasks = Array.from({ length: 6 }, (_, i) => `task-${i}`);
    await Promise.all(tasks.map((task, i) => (i % 2 ? a : b).putWrites(c1, [["ch", i]], task, "")));
    await Promise.all([a.putWrites(c1, [["ch", "done"]], "task-both", ""), b.putWrites(c1, [["__error__", "boom"]], "task-both", "")]);
    const tuple = await new ArtifactdSaver({ client }).getTuple(c1);
    const got = tuple.pendingWrites.map((w) => JSON.stringify(w)).sort();
    const want = [...tasks.map((task, i) => [task, "ch", i]), ["task-both", "__error__", "boom"], ["task-both", "ch", "done"]].map((w) => JSON.stringify(w)).sort();
    assert.deepEqual(got, want, `round ${round}`);
  }
});

test("a saver's putWrites on one thread land in the order they were called", async (t) => {
  const client = setup(t);
  if (!client) return;
  const input = { source: "input", step: -1, parents: {} };
  const thread = "writes-in-order";
  const c1 = await new ArtifactdSaver({ client }).put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, { ...emptyCheckpoint(), id: uuid6(-1) }, input, {});
  // A saver new to the thread (another process, say), whose first look
  // at the thread's context answers late: the first call's work before
  // it writes takes longer than the second's. A task's error write
  // replaces the one before it, so the last one called must be the one
  // kept.
  class SlowFirst extends ArtifactdClient {
    calls = 0;
    async ensureContext(...args) {
      if (this.calls++ === 0) await new Promise((r) => setTimeout(r, 200));
      return super.ensureContext(...args);
    }
  }
  const saver = new ArtifactdSaver({ client: new SlowFirst(server.url) });
  await Promise.all([saver.putWrites(c1, [["__error__", "first"]], "task", ""), saver.putWrites(c1, [["__error__", "second"]], "task", "")]);
  const tuple = await new ArtifactdSaver({ client }).getTuple(c1);
  assert.deepEqual(tuple.pendingWrites, [["task", "__error__", "second"]]);
});

test("a saver's putWrites of 200 tasks at once all land", async (t) => {
  const client = setup(t);
  if (!client) return;
  // Each write is made with the head as parent: a saver that let them
  // race would retry most of them, some until it gave up.
  const saver = new ArtifactdSaver({ client });
  const c1 = await saver.put({ configurable: { thread_id: "fan-out", checkpoint_ns: "" } }, { ...emptyCheckpoint(), id: uuid6(-1) }, { source: "input", step: -1, parents: {} }, {});
  const n = 200;
  await Promise.all(Array.from({ length: n }, (_, i) => saver.putWrites(c1, [["ch", i]], `task-${String(i).padStart(3, "0")}`, "")));
  const tuple = await new ArtifactdSaver({ client }).getTuple(c1);
  assert.deepEqual(
    tuple.pendingWrites.map(([, , v]) => v),
    Array.from({ length: n }, (_, i) => i),
  );
});

test("deleteThread deletes a thread too large for one request body", async (t) => {
  // A server whose request bodies hold 16 KiB: a checkpoint or a write
  // fits, the deletion of 60 checkpoints with their writes and edges
  // (some 40 KB of ops) does not.
  const small = server.skip ? server : await startServer("--max-body", "16384");
  t.after(() => small.close?.());
  if (small.skip) return t.skip(small.skip);
  const client = new ArtifactdClient(small.url);
  const saver = new ArtifactdSaver({ client });
  const thread = "huge-thread";
  let config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
  for (let step = 0; step < 60; step++) {
    config = await saver.put(config, { ...emptyCheckpoint(), id: uuid6(-1) }, { source: "loop", step, parents: {} }, {});
    await saver.putWrites(config, [["ch", step]], `task-a-${step}`, "");
    await saver.putWrites(config, [["ch", -step]], `task-b-${step}`, "");
  }
  const ctx = await saver.contextFor(thread);
  const before = await client.hash(ctx);
  await saver.deleteThread(thread);
  assert.equal(await saver.getTuple({ configurable: { thread_id: thread } }), undefined);
  assert.equal(await saver.getTuple(config), undefined, "an addressed checkpoint is gone too");
  for (const type of ["langgraph_checkpoint", "langgraph_writes", "langgraph_head"]) {
    assert.deepEqual((await client.listArtifacts(ctx, { type })).items, [], type);
  }
  assert.deepEqual((await client.request("GET", `/v1/contexts/${ctx}/edges`)).items, [], "no edge is left");
  // Several commits, newest first down to the one before the deletion;
  // the first took the heads, so from then on the thread reads as empty.
  const log = (await client.request("GET", `/v1/contexts/${ctx}/commits?limit=100`)).items;
  const at = log.findIndex((c) => c.id === before.commit);
  assert.ok(at > 0, "the deletion's commits follow the thread's last one");
  const parts = log.slice(0, at);
  assert.ok(parts.length > 1, `${parts.length} commit(s)`);
  const first = parts.at(-1).id;
  assert.deepEqual((await client.listArtifacts(ctx, { at: first, type: "langgraph_head" })).items, []);
  assert.ok((await client.listArtifacts(ctx, { at: first, type: "langgraph_checkpoint" })).items.length > 0);
  // History still holds the thread and verifies.
  assert.equal((await client.verify(ctx, before.context_hash, { at: before.commit })).match, true);
});

test("a namespace an artifact id refuses still holds checkpoints and writes", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const task = (n) => `${n}:${uuid6(-1)}`;
  // Subgraph namespaces are node names and task ids: a node name may be
  // an emoji joined by U+200D, not in NFC, or nested four deep.
  const namespaces = [
    task("writer 👩‍💻"),
    task("cafe\u0301"),
    [task("planner"), task("research_agent"), task("web_search_tool"), task("summariser")].join("|"),
  ];
  for (const ns of namespaces) {
    const config = { configurable: { thread_id: "odd-namespaces", checkpoint_ns: ns } };
    const cp = { ...emptyCheckpoint(), id: uuid6(-1) };
    const c1 = await saver.put(config, cp, { source: "input", step: -1, parents: {} }, {});
    assert.equal(c1.configurable.checkpoint_ns, ns);
    await saver.putWrites(c1, [["a", 1]], uuid6(-1), "");
    const tuple = await saver.getTuple(config);
    assert.equal(tuple?.checkpoint.id, cp.id, JSON.stringify(ns));
    assert.equal(tuple.config.configurable.checkpoint_ns, ns);
    assert.deepEqual(tuple.pendingWrites.map((w) => w.slice(1)), [["a", 1]]);
    const listed = [];
    for await (const x of saver.list(config)) listed.push(x.checkpoint.id);
    assert.deepEqual(listed, [cp.id]);
  }
});

test("ids with ':' in a namespace, a checkpoint id or a task id do not collide", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const thread = "colons";
  const input = { source: "input", step: -1, parents: {} };
  // Joined with ':', namespace "a:b" and checkpoint "c" read as namespace
  // "a" and checkpoint "b:c"; their tasks "t" and "x:t" of checkpoints
  // "x" and "c" likewise.
  const sides = [
    { ns: "a:b", id: "c", task: "x:t" },
    { ns: "a", id: "b:c", task: "t" },
  ];
  for (const side of sides) {
    side.config = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: side.ns } }, { ...emptyCheckpoint(), id: side.id }, input, {});
    await saver.putWrites(side.config, [["from", side.ns]], side.task, "");
  }
  for (const side of sides) {
    for (const config of [side.config, { configurable: { thread_id: thread, checkpoint_ns: side.ns } }]) {
      const tuple = await new ArtifactdSaver({ client }).getTuple(config);
      assert.equal(tuple?.checkpoint.id, side.id, JSON.stringify(config));
      assert.equal(tuple.config.configurable.checkpoint_ns, side.ns);
      assert.deepEqual(tuple.pendingWrites, [[side.task, "from", side.ns]], JSON.stringify(config));
    }
  }
  // A thread id with ':' names a context of its own (hashed): thread
  // "a:b" namespace "c" is not thread "a" namespace "b:c".
  assert.notEqual(await saver.contextFor("a:b"), await saver.contextFor("a"));
});

test("a thread whose ids kept ':' in checkpoint and task ids is still read and continued", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const thread = "colons-before";
  const ctx = await saver.threadContext(thread);
  const enc = async (v) => {
    const [serde, bytes] = await saver.serde.dumpsTyped(v);
    return { serde, value: JSON.parse(typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes)) };
  };
  // What an earlier saver wrote for namespace "a", checkpoint "old:1"
  // and task "x:t": the ids joined as they were.
  const cp = { ...emptyCheckpoint(), id: "old:1" };
  const data = { thread_id: thread, checkpoint_ns: "a", checkpoint_id: "old:1", parent_checkpoint_id: null, ts: cp.ts, step: -1, source: "input", serde: "json" };
  const writes = { checkpoint_ns: "a", checkpoint_id: "old:1", task_id: "x:t", task_path: "", writes: [{ idx: 0, channel: "ch", value: await enc("kept") }] };
  await client.commit(ctx, {
    author: "langgraph",
    ops: [
      { op: "put", artifact: { id: "checkpoint:a:old:1", type: "langgraph_checkpoint", produced_by: "langgraph", data: { ...data, checkpoint: await enc(cp), metadata: await enc({ source: "input", step: -1, parents: {} }) } } },
      { op: "put", artifact: { id: "head:a", type: "langgraph_head", produced_by: "langgraph", data: { checkpoint_ns: "a", checkpoint_id: "old:1" } } },
      { op: "put", artifact: { id: "writes:a:old:1:x:t", type: "langgraph_writes", produced_by: "langgraph", data: writes } },
      { op: "link", from: "writes:a:old:1:x:t", rel: "responds_to", to: "checkpoint:a:old:1" },
    ],
  });
  const config = { configurable: { thread_id: thread, checkpoint_ns: "a" } };
  const old = await new ArtifactdSaver({ client }).getTuple(config);
  assert.equal(old?.checkpoint.id, "old:1");
  assert.deepEqual(old.pendingWrites, [["x:t", "ch", "kept"]]);
  // The task's writes go on in the artifact that holds them: its regular
  // write is kept, not written twice.
  await saver.putWrites(old.config, [["ch", "dropped"], ["ch2", "new"]], "x:t", "");
  assert.deepEqual((await saver.getTuple(old.config)).pendingWrites, [["x:t", "ch", "kept"], ["x:t", "ch2", "new"]]);
  // The thread goes on from its checkpoint, and lists both.
  const next = { ...emptyCheckpoint(), id: uuid6(-1) };
  await saver.put(old.config, next, { source: "loop", step: 0, parents: {} }, {});
  const listed = [];
  for await (const x of saver.list(config)) listed.push(x.checkpoint.id);
  assert.deepEqual(listed, [next.id, "old:1"]);
  assert.equal((await saver.verify(old.config)).match, true);
  // Namespace "a:old" and checkpoint "1" would take that old checkpoint's
  // id: refused, nothing overwritten.
  const other = { configurable: { thread_id: thread, checkpoint_ns: "a:old" } };
  await assert.rejects(saver.put(other, { ...emptyCheckpoint(), id: "1" }, { source: "input", step: -1, parents: {} }, {}), LegacyIdError);
  assert.equal(await saver.getTuple(other), undefined);
  assert.equal((await saver.getTuple(old.config)).checkpoint.id, "old:1");
});

test("list without a checkpoint_ns lists every namespace of the thread, newest first", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const thread = "all-namespaces";
  const sub = `inner:${uuid6(-1)}`;
  const written = [];
  const configs = { "": { configurable: { thread_id: thread, checkpoint_ns: "" } }, [sub]: { configurable: { thread_id: thread, checkpoint_ns: sub } } };
  for (const ns of ["", sub, "", sub, ""]) {
    const cp = { ...emptyCheckpoint(), id: uuid6(-1) };
    configs[ns] = await saver.put(configs[ns], cp, { source: "loop", step: written.length, parents: {} }, {});
    written.push([ns, cp.id]);
  }
  const newestFirst = [...written].sort((a, b) => (a[1] < b[1] ? 1 : -1));
  const all = [];
  for await (const x of saver.list({ configurable: { thread_id: thread } })) all.push([x.config.configurable.checkpoint_ns, x.checkpoint.id]);
  assert.deepEqual(all, newestFirst);
  const two = [];
  for await (const x of saver.list({ configurable: { thread_id: thread } }, { limit: 2 })) two.push([x.config.configurable.checkpoint_ns, x.checkpoint.id]);
  assert.deepEqual(two, newestFirst.slice(0, 2));
  // A namespace given (the root's included) lists that namespace only.
  const root = [];
  for await (const x of saver.list({ configurable: { thread_id: thread, checkpoint_ns: "" } })) root.push(x.checkpoint.id);
  assert.deepEqual(root, newestFirst.filter(([ns]) => ns === "").map(([, id]) => id));
});

test("a task's writes of large values are stored, whatever their total", async (t) => {
  const client = setup(t);
  if (!client) return;
  const saver = new ArtifactdSaver({ client });
  const config = { configurable: { thread_id: "large-writes", checkpoint_ns: "" } };
  const c1 = await saver.put(config, { ...emptyCheckpoint(), id: uuid6(-1) }, { source: "input", step: -1, parents: {} }, {});
  // A million characters, three bytes each in UTF-8, three times: over
  // the 8 MiB a request body may hold. Then nine values of a million
  // ASCII characters, each small enough to keep inline, but not together.
  const big = (c) => c.repeat(1000000);
  await saver.putWrites(c1, [["a", big("語")], ["b", big("文")], ["c", big("字")]], "task-large", "");
  const ascii = Array.from({ length: 9 }, (_, i) => [`d${i}`, big(String(i))]);
  await saver.putWrites(c1, ascii, "task-ascii", "");
  const tuple = await saver.getTuple(c1);
  assert.deepEqual(
    tuple.pendingWrites.map(([task, ch, v]) => [task, ch, v.length, v[0]]),
    [
      ...ascii.map(([ch]) => ["task-ascii", ch, 1000000, ch.slice(1)]),
      ["task-large", "a", 1000000, "語"],
      ["task-large", "b", 1000000, "文"],
      ["task-large", "c", 1000000, "字"],
    ],
  );
});
