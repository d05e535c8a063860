// The example agent loop of the JavaScript client: question → fetch
// through the gate → claims with edges → answer → audit → context hash →
// verify. Its "model" is a stand-in function: run it once to record,
// then with --replay against a new context; the replay answers from the
// recorded model call (no model, no network, no key) and reaches the same
// context hash.
//
//   artifactd serve &
//   node examples/agent.js --context run-1
//   node examples/agent.js --context run-2 --replay --source run-1
//
// The JSDoc types below are checked with `tsc --strict` against the types
// openapi-typescript generates from GET /openapi.json (test/openapi.test.js).

import { ArtifactdClient, ModelRecorder, modelRequest } from "../src/index.js";

/** @typedef {import("../generated/openapi.js").components["schemas"]} Schemas */

const PAGE = `<html><head><title>Annual report 2025</title></head><body>
<h1>Annual report 2025</h1>
<p>Revenue for the year was 12.4 million euros, up from 10.1 million in 2024.
The board attributes the growth to the new subscription product.</p></body></html>`;
const QUESTION = "How much did revenue grow in 2025?";
const EXTRACT = "Revenue 2025: 12.4 million euros; 2024: 10.1 million.";

/** @param {import("../src/index.js").ModelRequest} _request */
export function standInModel(_request) {
  return { text: "Revenue grew from 10.1 to 12.4 million euros (22.8 %).", finish_reason: "stop" };
}

/**
 * @param {ArtifactdClient} client
 * @param {string} ctx
 * @param {ModelRecorder} recorder
 * @param {(request: import("../src/index.js").ModelRequest) => {text: string}} [model]
 * @param {(line: string) => void} [log]
 */
export async function run(client, ctx, recorder, model = standInModel, log = console.log) {
  await client.ensureContext(ctx, { quarantine: "enforce" }); // safe to repeat
  /** @type {Schemas["ArtifactRequest"]} */
  const question = { id: "question", type: "question", produced_by: "user", data: { text: QUESTION } };
  await client.putArtifact(ctx, question);
  /** @type {Schemas["FetchRequest"]} */
  const evidence = {
    id: "fetch-report",
    url: "https://example.com/reports/2025",
    status: 200,
    headers: { "content-type": "text/html; charset=utf-8" },
    body: PAGE,
  };
  /** @type {Schemas["FetchWrite"]} */
  const verdict = await client.recordFetch(ctx, evidence);
  log(`fetch-report: ${verdict.verdict} ${verdict.reason ?? ""}`);
  /** @type {Schemas["ArtifactRequest"]} */
  const report = {
    id: "report",
    type: "document",
    produced_by: "reader",
    data: { url: evidence.url, text: EXTRACT },
    edges: [{ rel: "extracted_from", to: "fetch-report" }],
  };
  await client.putArtifact(ctx, report);
  const response = await recorder.call(
    modelRequest({ model: "stand-in-1", parameters: { temperature: 0 }, messages: [{ role: "user", content: `${QUESTION}\n\n${EXTRACT}` }] }),
    model,
  );
  /** @type {Schemas["ArtifactRequest"]} */
  const claim = {
    id: "growth",
    type: "claim",
    produced_by: "model",
    data: { text: "Revenue grew 22.8 % in 2025", value: 22.8, model_text: response.text },
    edges: [{ rel: "calculated_from", to: "report" }],
  };
  await client.putArtifact(ctx, claim);
  /** @type {Schemas["ArtifactWrite"]} */
  const written = await client.putArtifact(ctx, {
    id: "answer",
    type: "answer",
    produced_by: "agent",
    data: { text: "Revenue grew by 22.8 % (10.1 → 12.4 million euros)." },
    edges: [
      { rel: "supported_by", to: "growth" },
      { rel: "responds_to", to: "question" },
    ],
  });
  /** @type {Schemas["Audit"]} */
  const audit = await client.audit(ctx, written.artifact.id);
  log(`audit: answer is ${audit.trust.status}; ${audit.summary.confirmed} confirmed, ${audit.summary.quarantined} quarantined; sources ${audit.sources.length}`);
  /** @type {Schemas["Hash"]} */
  const h = await client.hash(ctx);
  const v = await client.verify(ctx, h.context_hash, { at: h.commit });
  log(`context hash ${h.context_hash}`);
  log(`verify: match=${v.match} (${v.byHash ? "compared with GET .../hash (this server has no verify route)" : "replayed by the server"})`);
  return { contextHash: h.context_hash, verified: v.match, byHash: Boolean(v.byHash) };
}

async function main() {
  const args = process.argv.slice(2);
  /** @param {string} name @param {string} def @returns {string} */
  const flag = (name, def) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
  };
  const server = flag("--server", process.env.ARTIFACTD_URL ?? "http://127.0.0.1:7070");
  const ctx = flag("--context", "example-agent");
  const replay = args.includes("--replay");
  const client = new ArtifactdClient(server, { token: process.env.ARTIFACTD_TOKEN });
  const recorder = new ModelRecorder(client, { context: ctx, mode: replay ? "replay" : "record", source: flag("--source", ctx) });
  const result = await run(client, ctx, recorder);
  process.exitCode = result.verified ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error("agent:", e.message);
    process.exitCode = 1;
  });
}
