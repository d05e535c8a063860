// A small, dependency-free client of the artifactd HTTP API for Node 20+
// and browsers (it uses only fetch, TextEncoder and crypto.subtle).

import { canonicalize, sha256Digest, CanonicalError } from "./canonical.js";

export { canonicalize, sha256Digest, CanonicalError };

export const PROBLEM_TYPE_PREFIX = "urn:artifactd:problem:";

/**
 * The most bytes of a successful answer read unless options.maxAnswerBytes
 * says otherwise: 1 GiB, as the Go client (client.DefaultMaxAnswerBytes).
 */
export const DEFAULT_MAX_ANSWER_BYTES = 2 ** 30;
/** The most bytes read of a refusal that is JSON (a problem document), or maxAnswerBytes when that is less. */
export const MAX_PROBLEM_BYTES = 16 * 2 ** 20;
/**
 * The most bytes of a refusal that is not a problem kept as its detail
 * (and read at all when it is not JSON): the rest is cut, and the detail
 * ends with a marker saying so.
 */
export const MAX_DETAIL_BYTES = 4 * 2 ** 10;

/**
 * A successful answer longer than the client reads (options.maxAnswerBytes):
 * it is never decoded cut, and the request is not sent again.
 */
export class AnswerTooLargeError extends Error {
  constructor(message) {
    super(message);
    this.name = "AnswerTooLargeError";
  }
}

/** An RFC 9457 problem answered by the server (any non-2xx answer). */
export class ProblemError extends Error {
  constructor(method, path, status, body) {
    const b = body && typeof body === "object" ? body : { type: "about:blank", status, detail: String(body ?? "") };
    const type = String(b.type ?? "about:blank");
    const code = type.startsWith(PROBLEM_TYPE_PREFIX) ? type.slice(PROBLEM_TYPE_PREFIX.length) : type;
    const errors = Array.isArray(b.errors) ? b.errors.filter((e) => e && typeof e === "object") : [];
    // The answer's status when the body's (optional, advisory) is no
    // integer: a proxy's problem may say "status": "Too Many Requests".
    const st = Number.isInteger(b.status) ? b.status : status;
    const fields = errors.map((e) => `${e.parameter !== undefined ? "?" + e.parameter : e.pointer} [${e.rule}] ${e.detail}`);
    super([`${method} ${path}: ${st} ${code}: ${b.detail ?? ""}`, ...fields].join("; "));
    this.name = "ProblemError";
    this.method = method;
    this.path = path;
    this.type = type;
    this.code = code;
    this.title = String(b.title ?? "");
    this.status = st;
    this.detail = String(b.detail ?? "");
    this.instance = b.instance;
    this.errors = errors;
    // The delay the answer's Retry-After asked for, in ms (undefined
    // without one; 0 for a date already past).
    this.retryAfterMs = undefined;
    this.extensions = {};
    for (const [k, v] of Object.entries(b)) {
      if (!["type", "title", "status", "detail", "instance", "errors"].includes(k)) this.extensions[k] = v;
    }
  }
}

/** A write whose parent was not the branch head (code stale-parent). */
export class StaleParentError extends ProblemError {
  constructor(...a) {
    super(...a);
    this.name = "StaleParentError";
  }
}

/** A write resting on an unconfirmed artifact (code quarantined). */
export class QuarantinedError extends ProblemError {
  constructor(...a) {
    super(...a);
    this.name = "QuarantinedError";
  }
}

/**
 * A write answered 503 commit-outcome-unknown: the server sent its commit
 * to the database (PostgreSQL) and lost the answer, so it may or may not
 * have landed. The client never sends such a write again on its own (only
 * the idempotent PUT of a context is retried after any 503): read the branch
 * head (hash(), or what else the write changes) before retrying, and retry
 * with the head you read as its parent, so that a write that landed is
 * refused as stale rather than applied twice.
 */
export class CommitOutcomeUnknownError extends ProblemError {
  constructor(...a) {
    super(...a);
    this.name = "CommitOutcomeUnknownError";
  }
}

/** A 404 problem. */
export class NotFoundError extends ProblemError {
  constructor(...a) {
    super(...a);
    this.name = "NotFoundError";
  }
}

function problem(method, path, status, bytes, cut, retryAfterMs) {
  const e = problemOf(method, path, status, bytes, cut);
  e.retryAfterMs = retryAfterMs;
  return e;
}

const isSpace = (c) => c === 0x20 || (c >= 0x09 && c <= 0x0d);

/**
 * The detail of a refusal whose body (all of it, or its start when cut) is
 * not a problem: its text, at most MAX_DETAIL_BYTES of it (cut at a
 * character boundary), with a marker when anything was left out.
 */
function detailOf(bytes, cut) {
  let a = 0;
  let b = bytes.length;
  while (a < b && isSpace(bytes[a])) a++;
  while (b > a && isSpace(bytes[b - 1])) b--;
  const text = bytes.subarray(a, b);
  const decoder = new TextDecoder();
  if (text.length <= MAX_DETAIL_BYTES && !cut) return decoder.decode(text);
  let n = Math.min(text.length, MAX_DETAIL_BYTES);
  while (n > 0 && n < text.length && (text[n] & 0xc0) === 0x80) n--;
  // The read may have stopped inside a character: drop its first bytes too.
  for (let i = n - 1; i >= 0 && i >= n - 4; i--) {
    const lead = text[i];
    if ((lead & 0xc0) !== 0x80) {
      const need = (lead & 0xe0) === 0xc0 ? 2 : (lead & 0xf0) === 0xe0 ? 3 : (lead & 0xf8) === 0xf0 ? 4 : 1;
      if (n - i < need) n = i;
      break;
    }
  }
  const shown = decoder.decode(text.subarray(0, n));
  if (cut) return `${shown} … [cut: the answer was longer than ${bytes.length} bytes]`;
  return `${shown} … [cut: ${n} of ${text.length} bytes shown]`;
}

function problemOf(method, path, status, bytes, cut) {
  let body;
  try {
    body = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    body = { type: "about:blank", status, detail: detailOf(bytes, cut) };
  }
  const code = String(body?.type ?? "").slice(PROBLEM_TYPE_PREFIX.length);
  if (code === "stale-parent") return new StaleParentError(method, path, status, body);
  if (code === "quarantined") return new QuarantinedError(method, path, status, body);
  if (code === "commit-outcome-unknown") return new CommitOutcomeUnknownError(method, path, status, body);
  if (status === 404) return new NotFoundError(method, path, status, body);
  return new ProblemError(method, path, status, body);
}

const seg = encodeURIComponent;

/**
 * An artifact id as a path segment. The ids "." and ".." are valid, but
 * every WHATWG URL parser (fetch's included) drops them from a path, and
 * their escapes too, so the request would reach another route: they are
 * refused here, naming the reads that carry them.
 */
function idSeg(id) {
  if (id === "." || id === "..") {
    throw new TypeError(
      `artifact id ${JSON.stringify(id)} cannot be sent in a URL path (URL parsers drop "." and ".." segments, escaped or not); read it through state()`,
    );
  }
  return seg(id);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The longest delay setTimeout waits for (it fires at once past it). */
const MAX_TIMER_MS = 2 ** 31 - 1;

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const MONTH = MONTHS.join("|");
// The three forms of an HTTP-date (RFC 9110 section 5.6.7), all GMT:
// IMF-fixdate, the obsolete RFC 850 form (two-digit year) and asctime.
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) (${MONTH}) (\\d{4}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`);
const RFC850_DATE = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-(${MONTH})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`);
const ASCTIME_DATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (${MONTH}) {1,2}(\\d{1,2}) (\\d{2}):(\\d{2}):(\\d{2}) (\\d{4})$`);

/** An HTTP-date as ms since the epoch; undefined for anything else. */
function parseHttpDate(v) {
  let day, month, year, h, m, s;
  let f = IMF_FIXDATE.exec(v);
  if (f) [, day, month, year, h, m, s] = f;
  else if ((f = RFC850_DATE.exec(v))) {
    [, day, month, year, h, m, s] = f;
    year = Number(year) + (Number(year) >= 69 ? 1900 : 2000); // as Go's time package reads "06"
  } else if ((f = ASCTIME_DATE.exec(v))) [, month, day, h, m, s, year] = f;
  else return undefined;
  [day, year, h, m, s] = [day, year, h, m, s].map(Number);
  const mon = MONTHS.indexOf(month);
  const d = new Date(0);
  d.setUTCFullYear(year, mon, day); // Date.UTC would read years 0-99 as 1900-1999
  d.setUTCHours(h, m, s);
  // Date.UTC carries an overflow over (32 Jan is 1 Feb, 24:00 the next
  // day); a date that does not read back the same is no date.
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== mon || d.getUTCDate() !== day || d.getUTCHours() !== h || d.getUTCMinutes() !== m || d.getUTCSeconds() !== s) return undefined;
  return d.getTime();
}

/**
 * A Retry-After value, delta-seconds or an HTTP-date, as ms from now (0
 * for a date already past); undefined when absent or malformed.
 */
function parseRetryAfter(value) {
  const v = (value ?? "").trim();
  if (!v) return undefined;
  if (/^[0-9]+$/.test(v)) return Number(v) * 1000;
  const t = parseHttpDate(v);
  return t === undefined ? undefined : Math.max(0, t - Date.now());
}

/**
 * Whether a refusal that carried a Retry-After says its request was not
 * processed, so that sending it again cannot write twice. A 503
 * "overloaded" is answered by the server's connection and large-body
 * guards before the request is routed: no handler ran, whatever the
 * method. artifactd sends no 429 and no other 503 with a Retry-After; one
 * from a proxy in front does not say whether a write went through, so only
 * a safe request is sent again after it. status is the answer's HTTP
 * status, whatever the body says.
 */
function notProcessed(status, p, safe) {
  if (status === 503) return safe || p.code === "overloaded";
  return status === 429 && safe;
}

/** Whether a Content-Type is JSON: application/json, application/problem+json or another +json type. */
function isJSON(contentType) {
  const mt = (contentType ?? "").split(";", 1)[0].trim().toLowerCase();
  return mt === "application/json" || mt.endsWith("+json");
}

/**
 * The first most bytes of an answer's body, and whether there was more
 * (the rest is not read: the body is cancelled).
 */
async function readAtMost(res, most) {
  if (!res.body || typeof res.body.getReader !== "function") {
    // A fetch of the caller's whose answer has no stream.
    const all = new Uint8Array(await res.arrayBuffer());
    return all.length > most ? { bytes: all.subarray(0, most), cut: true } : { bytes: all, cut: false };
  }
  const reader = res.body.getReader();
  const parts = [];
  let got = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (got + value.length > most) {
      parts.push(value.subarray(0, most - got));
      got = most;
      reader.cancel().catch(() => {});
      return { bytes: concat(parts, got), cut: true };
    }
    parts.push(value);
    got += value.length;
  }
  return { bytes: concat(parts, got), cut: false };
}

function concat(parts, length) {
  if (parts.length === 1) return parts[0];
  const all = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
}

/** Whether a body can be sent a second time (a stream cannot). */
function resendable(body) {
  return !(body && (typeof body.getReader === "function" || typeof body.pipe === "function" || typeof body[Symbol.asyncIterator] === "function"));
}

/**
 * One artifactd server. Safe requests (GET, and the idempotent PUT of a
 * context) are retried after a network error or a 503 (options.retries,
 * pausing options.backoffMs, doubled each time); other writes never are,
 * with one exception: a refusal with a Retry-After (delta-seconds or an
 * HTTP-date) that says the request was not processed is sent again after
 * that delay, at most options.retryAfter times (default 3; 0 turns this
 * off and such answers are handled as the others). That is a 503
 * "overloaded", which the server answers before routing the request, for
 * any method, writes included; and a 429 or another 503 (which artifactd
 * never sends with a Retry-After: they come from a proxy in front and do
 * not say whether a write went through) for safe requests only. A delay
 * over options.maxRetryAfterMs (default 30000; at most 2^31-1, a timer's
 * limit), or one that would end more
 * than timeoutMs after the call began, is not waited for: the ProblemError
 * is thrown at once, its retryAfterMs holding the delay asked for. Once the
 * client has waited, the whole call ends within timeoutMs. A stale parent
 * is retried only through putArtifactCAS.
 *
 * options.maxAnswerBytes (1 GiB by default, as the Go client) is the most
 * bytes of a successful answer read: a longer one throws
 * AnswerTooLargeError and is not sent again. A refusal is read to 16 MiB
 * (or maxAnswerBytes when less) when it is JSON; of any other (a proxy's
 * error page) 4 KiB are kept as the ProblemError's detail, cut at a
 * character boundary and marked as cut.
 *
 * options.token is sent as a bearer token, surrounding whitespace trimmed;
 * a token holding a control character is refused with a TypeError that
 * does not quote it.
 */
export class ArtifactdClient {
  constructor(baseUrl = "http://127.0.0.1:7070", options = {}) {
    this.baseUrl = String(baseUrl).replace(/\/+$/, "");
    let token = options.token;
    if (token !== undefined && token !== null) {
      // A token read from a file keeps its newline; one with a control
      // character inside cannot be sent, and Node's refusal of the header
      // would quote it.
      token = String(token).trim();
      if (/[\x00-\x1f\x7f]/.test(token)) {
        throw new TypeError("the bearer token holds a control character (CR, LF, NUL…): it cannot be sent in a header");
      }
    }
    this.token = token || undefined;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.retries = options.retries ?? 2;
    this.backoffMs = options.backoffMs ?? 100;
    this.retryAfter = options.retryAfter ?? 3;
    // A timer fires at once past 2^31-1 ms (about 24.8 days), so no
    // longer delay is waited for, whatever the option says.
    this.maxRetryAfterMs = Math.min(options.maxRetryAfterMs ?? 30000, MAX_TIMER_MS);
    // Each attempt, its answer read whole included, ends within timeoutMs
    // (0: no limit), as the Go and Python clients' requests do.
    this.timeoutMs = options.timeoutMs ?? 30000;
    this.maxAnswerBytes = options.maxAnswerBytes > 0 ? options.maxAnswerBytes : DEFAULT_MAX_ANSWER_BYTES;
  }

  /**
   * An answer's body: a successful one whole (at most maxAnswerBytes, else
   * AnswerTooLargeError), a refusal up to the bounds of refusals, with
   * whether it was cut.
   */
  async #answer(method, path, res) {
    let limit = this.maxAnswerBytes;
    if (!res.ok) limit = Math.min(limit, isJSON(res.headers.get("content-type")) ? MAX_PROBLEM_BYTES : MAX_DETAIL_BYTES);
    const length = (res.headers.get("content-length") ?? "").trim();
    if (res.ok && /^[0-9]+$/.test(length) && Number(length) > limit) {
      res.body?.cancel().catch(() => {});
      throw new AnswerTooLargeError(`${method} ${path}: the answer is ${length} bytes: the answer is longer than the client reads (${limit}; maxAnswerBytes)`);
    }
    const { bytes, cut } = await readAtMost(res, limit);
    if (cut && res.ok) {
      // Never a cut answer decoded as the whole.
      throw new AnswerTooLargeError(`${method} ${path}: the answer is longer than the client reads (${limit}; maxAnswerBytes)`);
    }
    return { bytes, cut };
  }

  async request(method, path, body, { contentType, raw } = {}) {
    const safe = method === "GET" || (method === "PUT" && path.startsWith("/v1/contexts/"));
    let retries = safe ? this.retries : 0;
    let waits = resendable(body) ? this.retryAfter : 0;
    let pause = this.backoffMs;
    const callDeadline = this.timeoutMs > 0 ? performance.now() + this.timeoutMs : Infinity;
    let waited = false;
    let last;
    for (;;) {
      let limit = this.timeoutMs;
      if (waited && limit > 0) {
        limit = Math.min(limit, callDeadline - performance.now());
        if (limit <= 0) throw last;
      }
      const headers = { Accept: "application/json, application/problem+json" };
      let payload;
      if (body !== undefined) {
        if (contentType) {
          headers["Content-Type"] = contentType;
          payload = body;
        } else {
          headers["Content-Type"] = "application/json";
          payload = JSON.stringify(body);
        }
      }
      if (this.token) headers.Authorization = `Bearer ${this.token}`;
      const signal = limit > 0 ? AbortSignal.timeout(Math.ceil(limit)) : undefined;
      let res;
      let answer;
      let cut = false;
      try {
        const init = { method, headers, body: payload, signal, redirect: "manual" };
        // fetch refuses a stream body without duplex "half" (Node's and
        // the browsers' alike).
        if (!resendable(payload)) init.duplex = "half";
        res = await this.fetch(this.baseUrl + path, init);
        // The answer is read within the same attempt: one cut short is a
        // transport error, retried like a failed connection.
        ({ bytes: answer, cut } = await this.#answer(method, path, res));
      } catch (err) {
        if (err instanceof AnswerTooLargeError) throw err;
        last = new Error(`${method} ${path}: ${err.message}`, { cause: err });
        answer = undefined;
      }
      if (answer !== undefined && res.ok) {
        if (raw) return answer;
        const text = new TextDecoder().decode(answer);
        if (!text) return undefined;
        if (!(res.headers.get("content-type") ?? "").startsWith("application/json")) return text;
        try {
          return JSON.parse(text);
        } catch (err) {
          last = new Error(`${method} ${path}: the answer is not JSON: ${err.message}`, { cause: err });
        }
      } else if (answer !== undefined) {
        last = problem(method, path, res.status, answer, cut, parseRetryAfter(res.headers.get("retry-after")));
        if (this.retryAfter > 0 && last.retryAfterMs !== undefined && notProcessed(res.status, last, safe)) {
          const delay = last.retryAfterMs;
          if (waits <= 0 || delay > this.maxRetryAfterMs || performance.now() + delay >= callDeadline) throw last;
          waits--;
          waited = true;
          await sleep(delay);
          continue;
        }
        if (res.status !== 503) throw last;
      }
      if (retries <= 0) throw last;
      retries--;
      await sleep(pause);
      pause *= 2;
    }
  }

  #at(path, at) {
    return at ? `${path}?at=${seg(at)}` : path;
  }

  // ---- contexts ----

  /** Create the context if absent; fine when it exists with the same settings. */
  ensureContext(ctx, { quarantine } = {}) {
    return this.request("PUT", `/v1/contexts/${seg(ctx)}`, quarantine ? { quarantine } : {});
  }

  context(ctx, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}`, at));
  }

  // ---- writes ----

  /** One artifact with its outgoing edges in one commit. */
  putArtifact(ctx, artifact) {
    return this.request("POST", `/v1/contexts/${seg(ctx)}/artifacts`, artifact);
  }

  /**
   * A write conditional on the head: build(head) returns the artifact; on
   * stale-parent the head is re-read and build called again, at most
   * attempts times.
   */
  async putArtifactCAS(ctx, build, { attempts = 5, branch } = {}) {
    let err;
    for (let i = 0; i < Math.max(1, attempts); i++) {
      const head = (await this.hash(ctx, { at: branch })).commit;
      const artifact = { ...(await build(head)), parent: head };
      if (branch) artifact.branch = branch;
      try {
        return await this.putArtifact(ctx, artifact);
      } catch (e) {
        if (!(e instanceof StaleParentError)) throw e;
        err = e;
      }
    }
    throw err;
  }

  /** One atomic commit of ops. */
  commit(ctx, body) {
    return this.request("POST", `/v1/contexts/${seg(ctx)}/commits`, body);
  }

  /** Fetch evidence through the gate: the server judges it. */
  recordFetch(ctx, evidence) {
    return this.request("POST", `/v1/contexts/${seg(ctx)}/fetches`, evidence);
  }

  recordToolResult(ctx, result) {
    return this.request("POST", `/v1/contexts/${seg(ctx)}/tool-results`, result);
  }

  /** Store raw bytes held by context ctx (201 new to it, 200 held already). */
  putBlob(ctx, bytes, contentType = "application/octet-stream") {
    return this.request("POST", `/v1/contexts/${seg(ctx)}/blobs`, bytes, { contentType });
  }

  /** Read a blob context ctx holds (uploaded, recorded by its gate outputs, or imported); NotFoundError otherwise. */
  getBlob(ctx, digest) {
    return this.request("GET", `/v1/contexts/${seg(ctx)}/blobs/${seg(digest)}`, undefined, { raw: true });
  }

  putType(name, type) {
    return this.request("PUT", `/v1/types/${seg(name)}`, type);
  }

  // ---- reads ----

  async artifact(ctx, id, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}/artifacts/${idSeg(id)}`, at));
  }

  async listArtifacts(ctx, { at, type, limit, cursor } = {}) {
    const q = new URLSearchParams();
    if (at) q.set("at", at);
    if (type) q.set("type", type);
    if (limit) q.set("limit", String(limit));
    if (cursor) q.set("cursor", cursor);
    const qs = q.toString();
    return this.request("GET", `/v1/contexts/${seg(ctx)}/artifacts${qs ? "?" + qs : ""}`);
  }

  async related(ctx, id, { at, rel, dir } = {}) {
    const q = new URLSearchParams();
    if (at) q.set("at", at);
    if (rel) q.set("rel", rel);
    if (dir) q.set("dir", dir);
    const qs = q.toString();
    return this.request("GET", `/v1/contexts/${seg(ctx)}/artifacts/${idSeg(id)}/related${qs ? "?" + qs : ""}`);
  }

  hash(ctx, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}/hash`, at));
  }

  async audit(ctx, id, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}/audit/${idSeg(id)}`, at));
  }

  quarantine(ctx, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}/quarantine`, at));
  }

  state(ctx, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}/state`, at));
  }

  /** Compare two runs, each "CTX" or "CTX@REF". */
  compare(a, b) {
    return this.request("GET", `/v1/compare?a=${seg(a)}&b=${seg(b)}`);
  }

  /**
   * Ask the server to rebuild the state from the commit chain and compare
   * its hash (POST .../verify). A server without that route answers 404
   * "no route": the hash of GET .../hash is compared instead and the
   * result has byHash: true.
   */
  async verify(ctx, hash, { at } = {}) {
    try {
      return await this.request("POST", `/v1/contexts/${seg(ctx)}/verify`, at ? { hash, at } : { hash });
    } catch (e) {
      if (!(e instanceof NotFoundError) || !e.detail.startsWith("no route for ")) throw e;
    }
    const h = await this.hash(ctx, { at });
    return { match: h.context_hash === hash, context_hash: h.context_hash, commit: h.commit, byHash: true };
  }

  modelCall(ctx, requestHash, { at } = {}) {
    return this.request("GET", this.#at(`/v1/contexts/${seg(ctx)}/model-calls/${seg(requestHash)}`, at));
  }
}

// ---- recorded model calls ----

/** A replayed call that was never recorded; the model was not called. */
export class ReplayMissError extends Error {
  constructor(requestHash, context) {
    super(`replay: no recorded model call ${requestHash} in context "${context}"; record it first (the model was not called)`);
    this.name = "ReplayMissError";
    this.requestHash = requestHash;
    this.context = context;
  }
}

/** The request object that is recorded and hashed (undefined members are left out). */
export function modelRequest({ model, parameters, messages, tools }) {
  const req = { model };
  if (parameters !== undefined) req.parameters = parameters;
  if (messages !== undefined) req.messages = messages;
  if (tools !== undefined) req.tools = tools;
  return req;
}

/** "sha256:<hex>" of the canonical JSON of a model request. */
export function requestHash(request) {
  return sha256Digest(request);
}

/**
 * Answers model calls in "record" mode (call the model, record the call)
 * or "replay" mode (answer from the record in source, never call the
 * model; a miss throws ReplayMissError). Both modes write the model_call
 * artifact into context, so a replayed run reaches the same context hash.
 */
export class ModelRecorder {
  constructor(client, { context, mode = "record", source, producedBy = "model" }) {
    if (mode !== "record" && mode !== "replay") throw new TypeError('mode must be "record" or "replay"');
    this.client = client;
    this.context = context;
    this.mode = mode;
    this.source = source ?? context;
    this.producedBy = producedBy;
  }

  async call(request, model) {
    if (typeof request?.model !== "string" || !request.model) throw new TypeError("request needs a model name");
    const h = await requestHash(request);
    let response;
    if (this.mode === "replay") {
      try {
        response = (await this.client.modelCall(this.source, h)).response;
      } catch (e) {
        if (e instanceof NotFoundError) throw new ReplayMissError(h, this.source);
        throw e;
      }
    } else {
      response = await model(request);
    }
    await this.client.putArtifact(this.context, {
      id: "model_call:" + h.slice("sha256:".length),
      type: "model_call",
      produced_by: this.producedBy,
      data: { model: request.model, request_hash: h, request, response },
    });
    return response;
  }
}
