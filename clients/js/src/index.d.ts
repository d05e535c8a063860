export { canonicalize, sha256Digest, CanonicalError } from "./canonical.js";

export declare const PROBLEM_TYPE_PREFIX: "urn:artifactd:problem:";
/** The most bytes of a successful answer read unless maxAnswerBytes says otherwise: 1 GiB. */
export declare const DEFAULT_MAX_ANSWER_BYTES: number;
/** The most bytes read of a refusal that is JSON (16 MiB), or maxAnswerBytes when that is less. */
export declare const MAX_PROBLEM_BYTES: number;
/** The most bytes of a refusal that is not a problem kept as its detail (4 KiB), cut at a character and marked. */
export declare const MAX_DETAIL_BYTES: number;

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object: artifact data, edge attrs. */
export type JsonObject = { [key: string]: unknown };

/** One entry of a problem's errors list. */
export interface FieldError {
  pointer?: string;
  parameter?: string;
  rule: string;
  detail: string;
}

/** An RFC 9457 problem answered by the server (any non-2xx answer). */
export declare class ProblemError extends Error {
  method: string;
  path: string;
  type: string;
  /** The type without "urn:artifactd:problem:" (stale-parent, quarantined, validation…). */
  code: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  errors: FieldError[];
  /** Other members: tainted_by, cycle, conflicts, head… */
  extensions: Record<string, unknown>;
  /** The delay the answer's Retry-After asked for, in ms (undefined without one; 0 for a date already past). */
  retryAfterMs?: number;
}
export declare class StaleParentError extends ProblemError {}
export declare class QuarantinedError extends ProblemError {}
/**
 * A write answered 503 commit-outcome-unknown: its commit may or may not
 * have landed. Read the branch head before retrying; the client sends no
 * POST again after it.
 */
export declare class CommitOutcomeUnknownError extends ProblemError {}
export declare class NotFoundError extends ProblemError {}
/** A successful answer longer than maxAnswerBytes: never decoded cut, and not sent again. */
export declare class AnswerTooLargeError extends Error {}
export declare class ReplayMissError extends Error {
  requestHash: string;
  context: string;
}

export interface ContextInfo {
  id: string;
  quarantine: "enforce" | "observe";
  created: string;
}
export interface Edge {
  rel: string;
  to: string;
  attrs?: JsonObject;
}
export interface ArtifactInput {
  id?: string;
  type: string;
  data: JsonObject;
  produced_by?: string;
  edges?: Edge[];
  parent?: string;
  branch?: string;
  quarantine?: "enforce" | "observe";
}
export interface Trust {
  id: string;
  status: "confirmed" | "quarantined" | "poison_root";
  reason?: string;
  roots?: string[];
  path?: string[];
}
export interface Artifact {
  id: string;
  type: string;
  version: number;
  content_hash: string;
  produced_by: string;
  data?: JsonObject;
  trust?: Trust;
  written_in?: string;
}
/** Why a write rests on an unconfirmed artifact: the edge, the poison roots, one path. */
export interface TaintedBy {
  edge: { from: string; rel: string; to: string };
  roots: string[];
  reasons: string[];
  path: string[];
}
export interface ArtifactWrite {
  commit: string;
  context_hash: string;
  noop?: boolean;
  artifact: Artifact;
  trust_at?: string;
  /** In observe mode: what the write rests on that is not confirmed. */
  tainted?: TaintedBy[];
}
export interface FetchEvidence {
  id?: string;
  /** What was read: "http" (the default: url, status, headers), "file" (path, size) or "tool". */
  kind?: "http" | "file" | "tool";
  /** Required for an http read. */
  url?: string;
  path?: string;
  size?: number;
  tool?: string;
  content_type?: string;
  produced_by?: string;
  final_url?: string;
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  body_base64?: string;
  error?: string | null;
  perform?: boolean;
  edges?: Edge[];
  branch?: string;
}
export interface FetchWrite extends ArtifactWrite {
  verdict: "RETRIEVED" | "FAILED" | "UNKNOWN";
  layer?: "transport" | "extraction" | "fingerprint";
  reason?: string;
  body_blob: string;
  /** The extracted text the gate judged (bounded; text_blob holds all of it). */
  text?: string;
  text_blob?: string;
}
export type CommitOp =
  | { op: "put"; artifact: { id?: string; type: string; data: JsonObject; produced_by?: string } }
  | { op: "delete"; id: string }
  | { op: "link"; from: string; rel: string; to: string; attrs?: JsonObject }
  | { op: "unlink"; from: string; rel: string; to: string };
export interface CommitRequest {
  ops: CommitOp[];
  parent?: string;
  branch?: string;
  author?: string;
  message?: string;
  quarantine?: "enforce" | "observe";
}
export interface CommitWrite {
  commit: string;
  parents: string[];
  context_hash: string;
  noop?: boolean;
  ops?: number;
}
export interface Hash {
  commit: string;
  context_hash: string;
  artifacts: number;
  edges: number;
}
export interface Audit {
  context: string;
  commit: string;
  context_hash: string;
  answer: string;
  trust: Trust;
  artifacts: Artifact[];
  edges: { from: string; rel: string; to: string }[];
  sources: { locator: string; artifacts: string[] }[];
  summary: { confirmed: number; quarantined: number; poison_roots: number };
}
export interface Verification {
  match: boolean;
  context_hash: string;
  commit: string;
  commits?: number;
  ops?: number;
  /** Set when the server had no verify route and GET .../hash was compared. */
  byHash?: boolean;
}
export interface CompareSide {
  context: string;
  ref?: string;
  commit: string;
  context_hash: string;
}
export interface Comparison {
  equal: boolean;
  a: CompareSide;
  b: CompareSide;
  divergences: {
    producer: string;
    only_in_a: Artifact[];
    only_in_b: Artifact[];
    changed: { id: string; fields: string[]; a: Omit<Artifact, "id">; b: Omit<Artifact, "id"> }[];
    edges_only_in_a: { from: string; rel: string; to: string }[];
    edges_only_in_b: { from: string; rel: string; to: string }[];
    edges_changed: { from: string; rel: string; to: string; a_attrs: JsonObject | null; b_attrs: JsonObject | null }[];
  }[];
}
export interface ModelCall {
  request_hash: string;
  artifact: string;
  model: string;
  request: ModelRequest;
  response: unknown;
  written_in: string;
  commit: string;
}
export interface ModelRequest {
  model: string;
  parameters?: unknown;
  messages?: unknown;
  tools?: unknown;
}
export interface ClientOptions {
  /** Sent as a bearer token, surrounding whitespace trimmed; one holding a control character is refused (TypeError, which does not quote it). */
  token?: string;
  fetch?: typeof globalThis.fetch;
  /** Retries of safe requests after a network error or a 503 (default 2). */
  retries?: number;
  /** The first pause before such a retry, doubled each time (default 100). */
  backoffMs?: number;
  /**
   * How many times a refusal with a Retry-After that says the request was
   * not processed (503 "overloaded" for any method; a 429 or another 503
   * for GET and the PUT of a context) is sent again after that delay
   * (default 3; 0 turns it off).
   */
  retryAfter?: number;
  /** The longest Retry-After waited for, in ms (default 30000; at most 2^31-1, a timer's limit); a longer one is thrown at once. */
  maxRetryAfterMs?: number;
  /**
   * Each attempt, its answer read whole included, ends within timeoutMs
   * (default 30000; 0 for none); once a Retry-After was waited for, the
   * whole call does.
   */
  timeoutMs?: number;
  /**
   * The most bytes of a successful answer read (default 1 GiB); a longer
   * one throws AnswerTooLargeError. Refusals are read to 16 MiB (or this,
   * when less) when JSON, 4 KiB kept as the detail otherwise.
   */
  maxAnswerBytes?: number;
}
export interface At {
  at?: string;
}

/** One artifactd server. */
export declare class ArtifactdClient {
  constructor(baseUrl?: string, options?: ClientOptions);
  baseUrl: string;
  request<T = unknown>(method: string, path: string, body?: unknown, options?: { contentType?: string; raw?: boolean }): Promise<T>;
  ensureContext(ctx: string, options?: { quarantine?: "enforce" | "observe" }): Promise<ContextInfo>;
  context(ctx: string, options?: At): Promise<Record<string, unknown>>;
  putArtifact(ctx: string, artifact: ArtifactInput): Promise<ArtifactWrite>;
  putArtifactCAS(ctx: string, build: (head: string) => ArtifactInput | Promise<ArtifactInput>, options?: { attempts?: number; branch?: string }): Promise<ArtifactWrite>;
  commit(ctx: string, body: CommitRequest): Promise<CommitWrite>;
  recordFetch(ctx: string, evidence: FetchEvidence): Promise<FetchWrite>;
  recordToolResult(ctx: string, result: Record<string, unknown>): Promise<ArtifactWrite>;
  /** Store raw bytes held by context ctx (201 new to it, 200 held already); a stream is sent once, never again after a refusal. */
  putBlob(ctx: string, bytes: Uint8Array | string | Blob | ReadableStream<Uint8Array>, contentType?: string): Promise<{ digest: string; size: number }>;
  /** Read a blob context ctx holds; NotFoundError otherwise, whether or not another context holds it. */
  getBlob(ctx: string, digest: string): Promise<Uint8Array>;
  putType(name: string, type: { role?: "source" | "derived" | "never"; description?: string; schema: JsonObject | boolean }): Promise<unknown>;
  artifact(ctx: string, id: string, options?: At): Promise<Artifact>;
  listArtifacts(ctx: string, options?: At & { type?: string; limit?: number; cursor?: string }): Promise<{ commit: string; items: Artifact[]; next_cursor?: string }>;
  related(ctx: string, id: string, options?: At & { rel?: string; dir?: "out" | "in" | "both" }): Promise<{ commit: string; id: string; dir: string; edges: { from: string; rel: string; to: string; attrs?: JsonObject }[] }>;
  hash(ctx: string, options?: At): Promise<Hash>;
  audit(ctx: string, id: string, options?: At): Promise<Audit>;
  quarantine(ctx: string, options?: At): Promise<Record<string, unknown>>;
  state(ctx: string, options?: At): Promise<Record<string, unknown>>;
  compare(a: string, b: string): Promise<Comparison>;
  verify(ctx: string, hash: string, options?: At): Promise<Verification>;
  modelCall(ctx: string, requestHash: string, options?: At): Promise<ModelCall>;
}

export declare function modelRequest(request: ModelRequest): ModelRequest;
export declare function requestHash(request: ModelRequest): Promise<string>;

export declare class ModelRecorder {
  constructor(client: ArtifactdClient, options: { context: string; mode?: "record" | "replay"; source?: string; producedBy?: string });
  client: ArtifactdClient;
  context: string;
  mode: "record" | "replay";
  source: string;
  call<R = unknown>(request: ModelRequest, model: (request: ModelRequest) => R | Promise<R>): Promise<R>;
}
