// RFC 8785 (JCS) canonical JSON and SHA-256 digests, as artifactd hashes
// them. JSON.stringify already writes strings and numbers the way JCS
// wants; what is left is sorting members by UTF-16 code units (the default
// string order of Array.prototype.sort) and refusing what the server
// refuses: non-finite numbers and lone surrogates. (A JavaScript number is
// a double; JSON.stringify writes a large one in the exact canonical form
// of that double, which the server accepts.)

export class CanonicalError extends Error {
  constructor(message) {
    super(message);
    this.name = "CanonicalError";
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function encode(v, out, depth) {
  if (depth > 64) throw new CanonicalError("nesting deeper than 64");
  if (v === null) {
    out.push("null");
  } else if (typeof v === "boolean") {
    out.push(v ? "true" : "false");
  } else if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new CanonicalError("non-finite number");
    out.push(Object.is(v, -0) ? "0" : JSON.stringify(v));
  } else if (typeof v === "string") {
    if (LONE_SURROGATE.test(v)) throw new CanonicalError("lone surrogate in string");
    out.push(JSON.stringify(v));
  } else if (Array.isArray(v)) {
    out.push("[");
    v.forEach((x, i) => {
      if (i) out.push(",");
      encode(x === undefined || typeof x === "function" ? null : x, out, depth + 1);
    });
    out.push("]");
  } else if (typeof v === "object") {
    if (typeof v.toJSON === "function") return encode(v.toJSON(), out, depth);
    const keys = Object.keys(v).filter((k) => v[k] !== undefined && typeof v[k] !== "function").sort();
    out.push("{");
    keys.forEach((k, i) => {
      if (i) out.push(",");
      encode(k, out, depth + 1);
      out.push(":");
      encode(v[k], out, depth + 1);
    });
    out.push("}");
  } else {
    throw new CanonicalError(`cannot encode a ${typeof v}`);
  }
}

/** Returns the canonical JSON text of value. */
export function canonicalize(value) {
  const out = [];
  encode(value, out, 1);
  return out.join("");
}

/** Resolves to "sha256:<hex>" of the UTF-8 canonical JSON of value. */
export async function sha256Digest(value) {
  const bytes = new TextEncoder().encode(canonicalize(value));
  const digest = await globalThis.crypto.subtle.digest("SHA-256", bytes);
  return "sha256:" + Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
