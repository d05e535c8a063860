// The official TypeScript MCP client against artifactd: `artifactd mcp
// --server URL` over stdio, and serve's /mcp over streamable HTTP, both
// against a real `artifactd serve` this test starts (with a bearer token).
//
//   npm ci && node --test            (builds the binary with go build)
//   ARTIFACTD_BIN=/path/to/artifactd node --test
//
// With CI set, a missing Go toolchain or binary fails the test; without it
// the test skips with a message.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const token = "ts-test-token-0123456789";
const tools = ["audit", "check_trust", "diff", "link", "provenance", "record_artifact",
  "record_tool_result", "submit_fetch", "verify"];

let dir, bin, serve, base, skip;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "artifactd-mcp-ts-"));
  bin = process.env.ARTIFACTD_BIN;
  if (!bin) {
    bin = join(dir, "artifactd");
    try {
      execFileSync("go", ["build", "-o", bin, "./cmd/artifactd"], { cwd: repo, stdio: "inherit" });
    } catch (err) {
      if (process.env.CI) throw new Error(`go build failed (CI is set, so this is a failure): ${err.message}`);
      skip = `cannot build artifactd (${err.message}); set ARTIFACTD_BIN`;
      return;
    }
  }
  serve = spawn(bin, ["serve", "--data", join(dir, "data"), "--addr", "127.0.0.1:0"], {
    env: { ...process.env, ARTIFACTD_TOKENS: `${token} write *` },
    stdio: ["ignore", "pipe", "inherit"],
  });
  base = await new Promise((ok, fail) => {
    let out = "";
    serve.stdout.on("data", (b) => {
      out += b;
      const m = out.match(/serving (http:\/\/[^ ]+)/);
      if (m) ok(m[1]);
    });
    serve.on("exit", (code) => fail(new Error(`serve exited with ${code} before listening`)));
  });
  for (const id of ["stdio-run", "http-run"]) {
    const r = await fetch(`${base}/v1/contexts`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ id }),
    });
    assert.equal(r.status, 201, `create context ${id}: ${await r.text()}`);
  }
});

after(async () => {
  if (serve && serve.exitCode === null) {
    const exited = new Promise((ok) => serve.on("exit", ok));
    serve.kill("SIGTERM");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function textOf(res) {
  return res.content.filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function ok(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}: ${textOf(res)}`);
  assert.ok(res.structuredContent, `${name}: no structured content`);
  return res.structuredContent;
}

async function refused(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name} should be refused: ${textOf(res)}`);
  return textOf(res);
}

// coreFlow: list the tools, record, a quarantine refusal naming the root,
// check_trust, FAILED then RETRIEVED lifting it, verify match true.
async function coreFlow(client, ctx) {
  const listed = (await client.listTools()).tools;
  assert.deepEqual(listed.map((t) => t.name).sort(), tools);
  for (const t of listed) {
    assert.equal(t.inputSchema.type, "object", t.name);
    assert.ok(t.inputSchema.required.includes("context"), `${t.name} requires context`);
    assert.ok(t.outputSchema, `${t.name} has an output schema`);
  }

  const q = await ok(client, "record_artifact", { context: ctx, id: "q1", type: "question", data: { text: "What does the widget cost?" } });
  assert.equal(q.artifact.trust.status, "confirmed");

  const evidence = { context: ctx, id: "fetch:price", url: "https://shop.example/p", status: 200, headers: { "content-type": "application/json" } };
  const failed = await ok(client, "submit_fetch", { ...evidence, body: "" });
  assert.equal(failed.verdict, "FAILED");

  const claim = { context: ctx, id: "c1", type: "claim", data: { text: "It costs 19.99" }, edges: [{ rel: "derived_from", to: "fetch:price" }] };
  const why = await refused(client, "record_artifact", claim);
  assert.match(why, /409 quarantined/);
  assert.match(why, /Poison root: fetch:price/);
  assert.match(why, /Path: c1 -> fetch:price|Path: .*fetch:price/);

  let trust = await ok(client, "check_trust", { context: ctx, id: "fetch:price" });
  assert.equal(trust.status, "poison_root");
  assert.equal(trust.may_build_on, false);

  const retrieved = await ok(client, "submit_fetch", { ...evidence, body: '{"price": 19.99}' });
  assert.equal(retrieved.verdict, "RETRIEVED");
  trust = await ok(client, "check_trust", { context: ctx, id: "fetch:price" });
  assert.equal(trust.status, "confirmed");
  assert.equal(trust.may_build_on, true);

  const c = await ok(client, "record_artifact", claim);
  assert.equal(c.artifact.trust.status, "confirmed");
  const a = await ok(client, "record_artifact", { context: ctx, id: "a1", type: "answer", data: { text: "19.99" }, edges: [{ rel: "supported_by", to: "c1" }] });

  const audit = await ok(client, "audit", { context: ctx, id: "a1" });
  assert.equal(audit.trust.status, "confirmed");
  assert.deepEqual(audit.sources.map((s) => s.locator), ["https://shop.example/p"]);

  const v = await ok(client, "verify", { context: ctx, hash: a.context_hash });
  assert.equal(v.match, true);
  assert.equal(v.context_hash, a.context_hash);
}

test("artifactd mcp --server over stdio", async (t) => {
  if (skip) return t.skip(skip);
  const client = new Client({ name: "ts-test", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: bin, args: ["mcp", "--server", base, "--token", token], stderr: "inherit" }));
  try {
    await coreFlow(client, "stdio-run");
  } finally {
    await client.close();
  }
});

test("serve /mcp over streamable HTTP", async (t) => {
  if (skip) return t.skip(skip);
  const client = new Client({ name: "ts-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  }));
  try {
    await coreFlow(client, "http-run");
  } finally {
    await client.close();
  }
});

test("serve /mcp without a token is 401 problem+json", async (t) => {
  if (skip) return t.skip(skip);
  const r = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });
  assert.equal(r.status, 401);
  assert.equal(r.headers.get("content-type"), "application/problem+json");
});
