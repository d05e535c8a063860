// RFC 8785 (JCS) canonical JSON and SHA-256 digests, as artifactd hashes
// them. JSON.stringify already writes strings and numbers the way JCS
// wants; what is left is sorting members by UTF-16 code units (the default
// string order of Array.prototype.sort) and refusing what the server
// refuses: non-finite numbers and lone surrogates. (A JavaScript number is
// a double; JSON.stringify writes a large one in the exact canonical form
// of that double, which the server accepts.)
//
// The value canonicalized is the one JSON.stringify writes, since that is
// the body the client sends and the server hashes: toJSON is called (with
// the member's key or the element's index), boxed strings, numbers and
// booleans (of any realm, told by their internal slot as JSON.stringify
// tells them) are their primitives, an array's holes and its undefined,
// function and symbol elements are null, and an object's members of those
// values are left out.

export class CanonicalError extends Error {
  constructor(message) {
    super(message);
    this.name = "CanonicalError";
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The deepest nesting of arrays and objects taken, as the server's (hashing.MaxDepth). */
const MAX_DEPTH = 64;

/**
 * The boxed primitives: their constructor (this realm's), the tag
 * Object.prototype.toString gives them (any realm's), the prototype method
 * that reads the box's internal slot (and throws for any other object) and
 * what JSON.stringify writes of the box.
 */
const BOXES = [
  [Number, "[object Number]", Number.prototype.valueOf, (v) => Number(v)],
  [String, "[object String]", String.prototype.valueOf, (v) => String(v)],
  [Boolean, "[object Boolean]", Boolean.prototype.valueOf, (v) => Boolean.prototype.valueOf.call(v)],
  [BigInt, "[object BigInt]", BigInt.prototype.valueOf, (v) => BigInt.prototype.valueOf.call(v)],
];

/** The tag Object.prototype.toString gives v, or "" when reading it throws. */
function tagOf(v) {
  try {
    return Object.prototype.toString.call(v);
  } catch {
    return ""; // a Symbol.toStringTag getter or a proxy's trap that throws: no box JSON.stringify unwraps
  }
}

/**
 * The primitive JSON.stringify writes for the object v when it is a boxed
 * number, string, boolean or bigint, else v. A box is told by its internal
 * slot, as JSON.stringify tells it: an object that only claims a box's tag
 * (Symbol.toStringTag) or prototype is an object. A plain object (the
 * common case) costs one prototype read; a box of this realm is found by
 * instanceof, its tag changed or not, and one of another realm (a
 * node:vm context's new Number(5), an iframe's) by its tag. Only a
 * candidate is probed, so a typed array or a Map throws nothing here.
 */
function unboxed(v) {
  const proto = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === null) return v;
  let box = BOXES.find(([ctor]) => v instanceof ctor);
  if (box === undefined) {
    const tag = tagOf(v);
    box = BOXES.find(([, t]) => t === tag);
    if (box === undefined) return v;
  }
  const [, , valueOf, primitive] = box;
  try {
    valueOf.call(v);
  } catch {
    return v; // not a box: Object.create(Number.prototype), a forged tag
  }
  return primitive(v);
}

/** The value JSON.stringify writes for v, the member key's or element index's value. */
function jsonValue(v, key) {
  if (v !== null && (typeof v === "object" || typeof v === "bigint") && typeof v.toJSON === "function") v = v.toJSON(key);
  if (v !== null && typeof v === "object" && !Array.isArray(v)) return unboxed(v);
  return v;
}

/** Whether JSON.stringify writes nothing for v (an object leaves the member out, an array writes null). */
const nothing = (v) => v === undefined || typeof v === "function" || typeof v === "symbol";

/** Appends the canonical text of v (a jsonValue) to out; depth counts the arrays and objects open around it. */
function encode(v, out, depth) {
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
  } else if (typeof v === "object" && depth >= MAX_DEPTH) {
    throw new CanonicalError(`arrays and objects nested deeper than ${MAX_DEPTH} levels`);
  } else if (Array.isArray(v)) {
    out.push("[");
    for (let i = 0; i < v.length; i++) {
      if (i) out.push(",");
      const x = jsonValue(v[i], String(i));
      encode(nothing(x) ? null : x, out, depth + 1);
    }
    out.push("]");
  } else if (typeof v === "object") {
    const members = [];
    for (const k of Object.keys(v)) {
      const x = jsonValue(v[k], k);
      if (!nothing(x)) members.push([k, x]);
    }
    members.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    out.push("{");
    members.forEach(([k, x], i) => {
      if (i) out.push(",");
      encode(k, out, depth + 1);
      out.push(":");
      encode(x, out, depth + 1);
    });
    out.push("}");
  } else {
    throw new CanonicalError(`cannot encode a ${typeof v}`);
  }
}

/** Returns the canonical JSON text of value. */
export function canonicalize(value) {
  const out = [];
  encode(jsonValue(value, ""), out, 0);
  return out.join("");
}

/** Resolves to "sha256:<hex>" of the UTF-8 canonical JSON of value. */
export async function sha256Digest(value) {
  const bytes = new TextEncoder().encode(canonicalize(value));
  const digest = await globalThis.crypto.subtle.digest("SHA-256", bytes);
  return "sha256:" + Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
