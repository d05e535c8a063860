import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import vm from "node:vm";

import {
  ArtifactdClient,
  ModelRecorder,
  NotFoundError,
  ProblemError,
  QuarantinedError,
  ReplayMissError,
  StaleParentError,
  CanonicalError,
  canonicalize,
  requestHash,
} from "../src/index.js";
import { run, standInModel } from "../examples/agent.js";
import { ROOT, startServer } from "./server.js";

test("canonical numbers match the shared vectors", () => {
  const vectors = JSON.parse(readFileSync(join(ROOT, "testdata", "hashing", "vectors.json"), "utf8")).jcs_numbers;
  let checked = 0;
  for (const v of vectors) {
    const x = new DataView(Uint8Array.from(v.ieee_hex.match(/../g).map((h) => parseInt(h, 16))).buffer).getFloat64(0);
    if (!Number.isFinite(x)) continue;
    assert.equal(canonicalize(x), v.canonical, v.ieee_hex);
    checked++;
  }
  assert.ok(checked > 100, `${checked} vectors`);
});

test("canonical JSON matches the JCS files", () => {
  const dir = join(ROOT, "testdata", "jcs");
  const inputs = readdirSync(dir).filter((f) => f.endsWith(".input.json"));
  assert.ok(inputs.length > 3);
  for (const f of inputs) {
    const got = canonicalize(JSON.parse(readFileSync(join(dir, f), "utf8")));
    assert.equal(got, readFileSync(join(dir, f.replace(".input.", ".expected.")), "utf8").trim(), f);
  }
  for (const bad of [{ x: NaN }, { x: Infinity }, { s: "\ud800" }]) assert.throws(() => canonicalize(bad), CanonicalError);
});

test("canonical JSON is what JSON.stringify sends: holes, boxed primitives, toJSON, undefined", () => {
  // The hash of a recorded call is of canonicalize(request) and the server
  // hashes the body JSON.stringify wrote: holes were left out of an array
  // (stringify writes null) and boxed primitives written as objects.
  const holes = [{ role: "user", content: "a" }];
  holes[2] = { role: "user", content: "c" };
  const key = {
    toJSON(k) {
      return "key " + k;
    },
  };
  const cases = {
    holes,
    "a sparse array": [, 1, , 2, ,],
    boxed: { s: new String("x"), n: new Number(2.5), b: new Boolean(false), a: [new String("y"), new Number(-0)] },
    "undefined, functions and symbols": { a: [undefined, () => 1, Symbol("s")], o: { u: undefined, f() {}, s: Symbol("t"), k: 1 } },
    "toJSON with its key": { d: new Date(0), k: key, l: [key], u: { toJSON: () => undefined }, n: { toJSON: () => null } },
  };
  for (const [name, v] of Object.entries(cases)) {
    assert.equal(canonicalize(v), canonicalize(JSON.parse(JSON.stringify(v))), name);
  }
  assert.equal(canonicalize(holes), '[{"content":"a","role":"user"},null,{"content":"c","role":"user"}]');
  assert.equal(canonicalize({ s: new String("x") }), '{"s":"x"}');
});

test("canonical JSON is what JSON.stringify sends for boxed primitives of another realm, and only for real ones", () => {
  // JSON.stringify unwraps a boxed primitive by its internal slot, whatever
  // its realm (a node:vm context, an iframe); an object that only claims to
  // be one (a Symbol.toStringTag, Number.prototype as its prototype) is an
  // object. instanceof Number held for neither: a vm's new Number(5) was
  // hashed as {} while the body said 5.
  const other = vm.runInNewContext(
    "({ n: new Number(5), s: new String('x'), b: new Boolean(false), z: new Number(-0), " +
      "a: [new String('y'), new Number(2.5), new Boolean(true)], d: new Date(0), o: { k: [1, { j: 2 }] } })",
  );
  const cases = {
    "another realm": other,
    "a forged tag": { n: { [Symbol.toStringTag]: "Number", valueOf: () => 5 }, s: { [Symbol.toStringTag]: "String", k: 1 } },
    "a boxed prototype": { n: Object.create(Number.prototype), s: Object.create(String.prototype) },
    "a box with another tag": { n: Object.defineProperty(new Number(7), Symbol.toStringTag, { value: "Seven" }) },
    "a tag that throws": { a: { get [Symbol.toStringTag]() { throw new Error("boom"); }, x: 1 } },
    "tagged objects that are no box": { u: new Uint8Array([1, 2]), m: new Map([[1, 2]]), y: Object(Symbol("s")) },
  };
  for (const [name, v] of Object.entries(cases)) {
    assert.equal(canonicalize(v), canonicalize(JSON.parse(JSON.stringify(v))), name);
  }
  assert.equal(
    canonicalize(other),
    '{"a":["y",2.5,true],"b":false,"d":"1970-01-01T00:00:00.000Z","n":5,"o":{"k":[1,{"j":2}]},"s":"x","z":0}',
  );
  assert.equal(canonicalize(cases["a forged tag"]), '{"n":{},"s":{"k":1}}');
  // A boxed bigint is no JSON, from any realm.
  assert.throws(() => JSON.stringify({ b: vm.runInNewContext("Object(1n)") }), TypeError);
  assert.throws(() => canonicalize({ b: vm.runInNewContext("Object(1n)") }), CanonicalError);
});

test("canonical nesting: 64 arrays and objects are taken, whatever they hold; 65 refused", () => {
  // As the server (hashing.MaxDepth); a scalar or a key counted as a level,
  // so 64 arrays around a number were refused.
  const nest = (n, leaf) => {
    let v = leaf;
    for (let i = 0; i < n; i++) v = [v];
    return v;
  };
  for (const [name, v] of [
    ["64 arrays around 1", nest(64, 1)],
    ["63 arrays around {k: 1}", nest(63, { k: 1 })],
    ["64 arrays", nest(63, [])],
    ["63 arrays around {}", nest(63, {})],
  ]) {
    assert.equal(canonicalize(v), JSON.stringify(v), name);
  }
  for (const [name, v] of [
    ["65 arrays around 1", nest(65, 1)],
    ["64 arrays around {}", nest(64, {})],
    ["65 arrays", nest(64, [])],
  ]) {
    assert.throws(() => canonicalize(v), CanonicalError, name);
  }
});

test("request hash vector", async () => {
  const v = JSON.parse(readFileSync(join(ROOT, "clients", "testdata", "model-request.json"), "utf8"));
  assert.equal(await requestHash(v.request), v.request_hash);
});

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.close?.();
});

function client(t) {
  if (server.skip) {
    t.skip(server.skip);
    return undefined;
  }
  return new ArtifactdClient(server.url);
}

test("problems carry their fields; refused writes change nothing", async (t) => {
  const c = client(t);
  if (!c) return;
  await c.ensureContext("problems");
  const before = await c.hash("problems");
  await assert.rejects(c.putArtifact("problems", { type: "answer", data: {} }), (e) => {
    assert.ok(e instanceof ProblemError);
    assert.equal(e.status, 422);
    assert.equal(e.code, "validation");
    assert.equal(e.errors[0].pointer, "/data/text");
    assert.equal(e.errors[0].rule, "required");
    return true;
  });
  assert.equal((await c.hash("problems")).context_hash, before.context_hash);
  await c.recordFetch("problems", { id: "f", url: "https://example.com/", status: 200, body: "" });
  await assert.rejects(c.putArtifact("problems", { id: "c", type: "claim", data: { text: "x" }, edges: [{ rel: "derived_from", to: "f" }] }), (e) => {
    assert.ok(e instanceof QuarantinedError);
    assert.deepEqual(e.extensions.tainted_by.roots, ["f"]);
    return true;
  });
  await assert.rejects(c.artifact("problems", "c"), NotFoundError);
  await assert.rejects(c.ensureContext("problems", { quarantine: "observe" }), (e) => e instanceof ProblemError && e.code === "exists");
  assert.equal((await c.ensureContext("problems")).quarantine, "enforce");
});

test("the ids . and .. are refused as path segments, and read through the state", async (t) => {
  const c = client(t);
  if (!c) return;
  await c.ensureContext("dots");
  await c.putArtifact("dots", { id: ".", type: "note", data: { text: "dot" } });
  await c.putArtifact("dots", { id: "..", type: "note", data: { text: "dots" }, edges: [{ rel: "derived_from", to: "." }] });
  for (const id of [".", ".."]) {
    for (const read of [() => c.artifact("dots", id), () => c.audit("dots", id), () => c.related("dots", id)]) {
      await assert.rejects(read(), (e) => e instanceof TypeError && e.message.includes("state()") && e.message.includes(JSON.stringify(id)));
    }
  }
  const ids = (await c.state("dots")).artifacts.map((a) => a.id).sort();
  assert.deepEqual(ids, [".", ".."]);
  // Other ids with dots go as they are: one absent is the server's 404.
  await assert.rejects(c.artifact("dots", ".x"), NotFoundError);
});

test("blobs are read through the context that holds them", async (t) => {
  const c = client(t);
  if (!c) return;
  await c.ensureContext("blobs-a");
  await c.ensureContext("blobs-b");
  const bytes = new TextEncoder().encode("only context a sent these bytes");
  const put = await c.putBlob("blobs-a", bytes);
  assert.equal(put.size, bytes.length);
  assert.deepEqual(new Uint8Array(await c.getBlob("blobs-a", put.digest)), bytes);
  await assert.rejects(c.getBlob("blobs-b", put.digest), NotFoundError);
  const f = await c.recordFetch("blobs-b", { id: "f", url: "https://example.com/", status: 200, body: "a fetched page of context b" });
  assert.equal(new TextDecoder().decode(await c.getBlob("blobs-b", f.body_blob)), "a fetched page of context b");
  await assert.rejects(c.getBlob("blobs-a", f.body_blob), NotFoundError);
});

test("parent compare-and-set: one winner; CAS retries land every write", async (t) => {
  const c = client(t);
  if (!c) return;
  await c.ensureContext("cas");
  const head = (await c.hash("cas")).commit;
  const results = await Promise.allSettled(
    Array.from({ length: 6 }, (_, i) => c.putArtifact("cas", { id: "n", type: "note", data: { text: String(i) }, parent: head })),
  );
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
  assert.ok(results.filter((r) => r.status === "rejected").every((r) => r.reason instanceof StaleParentError));
  await Promise.all(
    Array.from({ length: 6 }, () =>
      c.putArtifactCAS(
        "cas",
        async (h) => {
          let n = 0;
          try {
            n = /** @type {any} */ ((await c.artifact("cas", "counter", { at: h })).data).n;
          } catch (e) {
            if (!(e instanceof NotFoundError)) throw e;
          }
          return { id: "counter", type: "note", data: { text: "counter", n: n + 1 } };
        },
        { attempts: 50 },
      ),
    ),
  );
  const a = await c.artifact("cas", "counter");
  assert.equal(a.data.n, 6);
  assert.equal(a.version, 6);
});

test("agent loop: record, re-run, replay with no model call, same hash", async (t) => {
  const c = client(t);
  if (!c) return;
  const lines = [];
  let calls = 0;
  const model = (req) => {
    calls++;
    return standInModel(req);
  };
  const first = await run(c, "js-run-1", new ModelRecorder(c, { context: "js-run-1" }), model, (l) => lines.push(l));
  assert.ok(first.verified, lines.join("\n"));
  assert.equal(first.byHash, false, "verify fell back to GET .../hash; the server has POST .../verify");
  assert.ok(lines.some((l) => l.startsWith("fetch-report: RETRIEVED")), lines.join("\n"));
  assert.ok(lines.some((l) => l.includes("answer is confirmed")));
  const again = await run(c, "js-run-1", new ModelRecorder(c, { context: "js-run-1" }), model, () => {});
  assert.equal(again.contextHash, first.contextHash);
  calls = 0;
  const second = await run(c, "js-run-2", new ModelRecorder(c, { context: "js-run-2", mode: "replay", source: "js-run-1" }), model, () => {});
  assert.equal(calls, 0, "replay called the model");
  assert.equal(second.contextHash, first.contextHash);
  assert.ok((await c.compare("js-run-1", "js-run-2@main")).equal);
  await assert.rejects(run(c, "js-run-3", new ModelRecorder(c, { context: "js-run-3", mode: "replay" }), model, () => {}), ReplayMissError);
  assert.equal(calls, 0);
});

test("the example as a user runs it, then replay --verify offline", async (t) => {
  const s = await startServer();
  if (s.skip) return t.skip(s.skip);
  try {
    const env = { ...process.env, ARTIFACTD_URL: s.url };
    const script = join(ROOT, "clients", "js", "examples", "agent.js");
    const one = spawnSync(process.execPath, [script, "--context", "run-1"], { env, encoding: "utf8" });
    assert.equal(one.status, 0, one.stderr + one.stdout);
    const two = spawnSync(process.execPath, [script, "--context", "run-2", "--replay", "--source", "run-1"], { env, encoding: "utf8" });
    assert.equal(two.status, 0, two.stderr + two.stdout);
    const hashOf = (out) => /context hash (sha256:[0-9a-f]{64})/.exec(out)[1];
    assert.equal(hashOf(two.stdout), hashOf(one.stdout));
    await s.stop();
    assert.equal(s.replayVerify("run-1", hashOf(one.stdout)), 0);
    assert.equal(s.replayVerify("run-2", hashOf(one.stdout)), 0);
  } finally {
    await s.close();
  }
});
