// ArtifactdSaver: a LangGraph.js checkpointer that keeps every thread in
// an artifactd context. Each checkpoint is one commit made with a parent
// (compare-and-set on the branch head), so two writers that extend the
// same checkpoint never both succeed: the loser gets a
// CheckpointConflictError instead of a silently unreachable history.

import {
  BaseCheckpointSaver,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  getCheckpointId,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";

import { ArtifactdClient, NotFoundError, ProblemError, StaleParentError, canonicalize, sha256Digest } from "./index.js";

export const CHECKPOINT_TYPE = "langgraph_checkpoint";
export const WRITES_TYPE = "langgraph_writes";
export const HEAD_TYPE = "langgraph_head";

const CONTEXT_ID = /^[A-Za-z0-9._-]{1,128}$/;
const decoder = new TextDecoder();

/** Another writer moved the thread past the checkpoint this write extends. */
export class CheckpointConflictError extends Error {
  constructor(threadId, ns, expected, found) {
    super(
      `checkpoint conflict on thread "${threadId}"${ns ? ` (namespace "${ns}")` : ""}: this write extends checkpoint ` +
        `${expected ?? "(none: a new thread)"} but the thread's latest checkpoint is ${found}; another writer got there first ` +
        `and nothing was written. Reload the thread (getTuple) and run again, or use a new thread_id to fork.`,
    );
    this.name = "CheckpointConflictError";
    this.threadId = threadId;
    this.checkpointNs = ns;
    this.expected = expected ?? null;
    this.found = found;
  }
}

/**
 * An artifact id the saver would write holds another namespace's
 * checkpoint or writes, written by a saver that put checkpoint and task
 * ids with ':' into ids as they were (see idsOf). Nothing was written.
 */
export class LegacyIdError extends Error {
  constructor(id, data) {
    super(
      `artifact ${id} holds the ${data.task_id !== undefined ? `writes of task ${JSON.stringify(data.task_id)} of ` : ""}checkpoint ` +
        `${JSON.stringify(data.checkpoint_id)} of namespace ${JSON.stringify(data.checkpoint_ns)}, written by an earlier ArtifactdSaver ` +
        `that left ':' in checkpoint and task ids; nothing was written. Continue in a new thread_id, or delete that thread (deleteThread) first.`,
    );
    this.name = "LegacyIdError";
    this.id = id;
  }
}

function nsOf(config) {
  return config.configurable?.checkpoint_ns ?? "";
}

function threadOf(config, what) {
  const t = config.configurable?.thread_id;
  if (t === undefined || t === null || t === "") {
    throw new Error(`ArtifactdSaver.${what}: the config has no configurable.thread_id; pass { configurable: { thread_id: "…" } }`);
  }
  return String(t);
}

// A namespace, a checkpoint id and a task id are parts of artifact ids.
// A part goes in as it is when an id may hold it: printable, in NFC, none
// of the characters an id refuses (a zero-width joiner in an emoji, a
// variation selector…) and short enough that a writes id ("writes:" ns
// ":" uuid ":" uuid) fits in the server's 256 bytes. Otherwise it goes in
// as "#" and 32 hex digits of its SHA-256 (no plain one starts with "#");
// the artifacts' data keep it as it is. The parts are joined with ':',
// which a namespace holds ("node:task id"), so a checkpoint id or a task
// id holding one is hashed too: the parts after the namespace have no
// ':', and "checkpoint:a:b:c" is namespace "a:b" and checkpoint "c" only.
const PLAIN_PART = /^(?!#)(?:(?![\u034f\u115f\u1160\u3164\uffa0\u2800\p{Variation_Selector}])[\p{L}\p{M}\p{N}\p{P}\p{S} ])*$/u;
const MAX_ID_BYTES = 256;
const MAX_NS_BYTES = MAX_ID_BYTES - "writes:".length - 2 * 36 - 2;
const encoder = new TextEncoder();

/** s as a part of an artifact id of at most maxBytes; a last part (a checkpoint or task id) has no ':'. */
async function idPart(s, maxBytes, last = false) {
  if (PLAIN_PART.test(s) && !(last && s.includes(":")) && s === s.normalize("NFC") && encoder.encode(s).length <= maxBytes) return s;
  return "#" + (await sha256Digest(s)).slice(7, 39);
}

/**
 * The artifact ids of namespace ns. legacyCheckpoint and legacyWrites are
 * the ids the saver gave before checkpoint and task ids were hashed as
 * last parts (undefined where they are the same): a checkpoint or task id
 * with ':', or starting with '#', went in as it was, and such an id may
 * name another namespace's artifact, so what it names must be checked.
 */
async function idsOf(ns) {
  const part = await idPart(ns, MAX_NS_BYTES);
  const room = (prefix) => MAX_ID_BYTES - encoder.encode(prefix).length;
  const checkpoint = async (id) => `checkpoint:${part}:` + (await idPart(String(id), room(`checkpoint:${part}:`), true));
  const writes = async (id, task) => {
    const prefix = `writes:${part}:${await idPart(String(id), room(`checkpoint:${part}:`), true)}:`;
    return prefix + (await idPart(String(task), room(prefix), true));
  };
  return {
    head: `head:${part}`,
    checkpoint,
    writes,
    async legacyCheckpoint(id) {
      const old = `checkpoint:${part}:${id}`;
      return old === (await checkpoint(id)) ? undefined : old;
    },
    async legacyWrites(id, task) {
      const prefix = `writes:${part}:${id}:`;
      const old = prefix + (await idPart(String(task), room(prefix)));
      return old === (await writes(id, task)) ? undefined : old;
    },
  };
}

// MAX_INLINE_DEPTH and MAX_INLINE_BYTES bound a value kept inline in a
// checkpoint or a write: the server refuses a body nested deeper than 64
// levels, counted from the body's root (a value sits up to about ten
// levels down), or over 8 MiB of UTF-8 (a commit carries a checkpoint and
// its metadata, a write several values). Larger values go to blobs, and so
// do a write's values past MAX_WRITES_INLINE_BYTES together.
const MAX_INLINE_DEPTH = 48;
const MAX_INLINE_BYTES = 1 << 20;
const MAX_WRITES_INLINE_BYTES = 6 << 20;

/** The nesting depth of a JSON value (a scalar is 0). */
function depthOf(v) {
  let most = 0;
  const stack = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop();
    if (x === null || typeof x !== "object") continue;
    most = Math.max(most, d + 1);
    for (const y of Array.isArray(x) ? x : Object.values(x)) stack.push([y, d + 1]);
  }
  return most;
}

// DELETE_BATCH_BYTES bounds the body of one of deleteThread's commits:
// under the server's default --max-body (8 MiB) and its 1 MiB past which a
// body waits for --max-large-bodies. A server that refuses it as too large
// (a smaller --max-body) gets half as much, down to MIN_DELETE_BATCH_BYTES,
// which holds an artifact id's unlink and delete several times over.
const DELETE_BATCH_BYTES = 512 << 10;
const MIN_DELETE_BATCH_BYTES = 4 << 10;

/** A short pause before retry i of a write whose parent went stale: 2 ms and up to 2i ms more (at most 50), random, so racing writers spread out. */
function jitter(i) {
  return new Promise((r) => setTimeout(r, 2 + Math.random() * Math.min(50, 2 * i)));
}

export class ArtifactdSaver extends BaseCheckpointSaver {
  /**
   * @param {object} options
   * @param {ArtifactdClient} [options.client] the server (default http://127.0.0.1:7070)
   * @param {string} [options.prefix] prepended to a thread id to name its context (default "lg-")
   * @param {string} [options.quarantine] mode of the contexts created (default "enforce")
   * @param {number} [options.attempts] re-reads after a stale parent caused by this thread's own pending writes (default 5); a put or putWrites tries at most 20 times as often when the head keeps moving
   */
  constructor({ client, prefix = "lg-", quarantine = "enforce", attempts = 5, serde } = {}) {
    super(serde);
    this.client = client ?? new ArtifactdClient();
    this.prefix = prefix;
    this.quarantine = quarantine;
    this.attempts = attempts;
    this._setup = undefined;
    this._contexts = new Map();
    // LangGraph stores a task's writes while the put of their checkpoint
    // may still be on its way, or not even started (puts are chained, nodes
    // run meanwhile). Writes link to their checkpoint, so: putWrites waits
    // for a put already in flight; writes stored before their checkpoint
    // exists are linked by that checkpoint's put, which first waits for the
    // writes in flight. Keys are thread, namespace and checkpoint id.
    this._puts = new Map(); // key → promise of the put
    this._writes = new Map(); // key → Set of promises of putWrites
    this._orphans = new Map(); // key → ids of writes stored before the checkpoint
    this._writing = new Map(); // thread id → promise of the last putWrites queued on it, settled
  }

  /** Registers the three artifact types the saver writes (admin scope on "*"). Called once, lazily. */
  setup() {
    this._setup ??= (async () => {
      const open = { type: "object", additionalProperties: true };
      await this.client.putType(CHECKPOINT_TYPE, { role: "derived", description: "A LangGraph checkpoint (ArtifactdSaver).", schema: { ...open, required: ["checkpoint_id", "serde"] } });
      await this.client.putType(WRITES_TYPE, { role: "derived", description: "A LangGraph task's pending writes (ArtifactdSaver).", schema: { ...open, required: ["task_id", "writes"] } });
      await this.client.putType(HEAD_TYPE, { role: "derived", description: "A LangGraph thread's latest checkpoint (ArtifactdSaver).", schema: { ...open, required: ["checkpoint_id"] } });
    })().catch((e) => {
      this._setup = undefined;
      throw e;
    });
    return this._setup;
  }

  /** The context that holds a thread. */
  async contextFor(threadId) {
    const name = this.prefix + threadId;
    // A thread id that reads like a hashed one (32 hex digits) is hashed
    // too: taken as it is, it would name the context of the thread whose
    // id hashes to it.
    if (CONTEXT_ID.test(name) && name !== "." && name !== ".." && !/^[0-9a-f]{32}$/.test(String(threadId))) return name;
    return this.prefix + (await sha256Digest(String(threadId))).slice(7, 39);
  }

  /** The context of a thread, created (with the saver's types) if absent: tools use it to record what they fetch. */
  threadContext(threadId) {
    return this.#context(String(threadId), true);
  }

  async #context(threadId, create) {
    let ctx = this._contexts.get(threadId);
    if (ctx) return ctx;
    ctx = await this.contextFor(threadId);
    if (create) {
      await this.setup();
      await this.client.ensureContext(ctx, { quarantine: this.quarantine });
      this._contexts.set(threadId, ctx);
    }
    return ctx;
  }

  /** A value serialised, inline or as a blob; room.left, if given, is what inline values may still take, and is taken from. */
  async #encode(ctx, value, room) {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    if (type === "json") {
      try {
        const text = typeof bytes === "string" ? bytes : decoder.decode(bytes);
        const parsed = JSON.parse(text);
        canonicalize(parsed); // refuses what the server would refuse
        // Inline only what the request that carries it may hold: the
        // server counts nesting from the body's root, where a value sits
        // some levels down, and bounds the body's bytes.
        const size = typeof bytes === "string" ? encoder.encode(bytes).length : bytes.byteLength;
        if (depthOf(parsed) <= MAX_INLINE_DEPTH && size <= Math.min(MAX_INLINE_BYTES, room?.left ?? Infinity)) {
          if (room) room.left -= size;
          return { serde: type, value: parsed };
        }
      } catch {
        // fall through to a blob
      }
    }
    const blob = await this.client.putBlob(ctx, typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes);
    return { serde: type, blob: blob.digest };
  }

  async #decode(ctx, enc) {
    if (enc.blob) return this.serde.loadsTyped(enc.serde, await this.client.getBlob(ctx, enc.blob));
    return this.serde.loadsTyped(enc.serde, JSON.stringify(enc.value));
  }

  async #get(ctx, id, at) {
    try {
      return await this.client.artifact(ctx, id, { at });
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  /**
   * The artifact of checkpoint id of namespace ns at commit at, or
   * undefined: under its id, or under its legacy id (see idsOf) when its
   * data name that namespace and checkpoint.
   */
  async #checkpoint(ctx, ns, ids, id, at) {
    const named = (art) => art?.data.checkpoint_ns === ns && art.data.checkpoint_id === id;
    const art = await this.#get(ctx, await ids.checkpoint(id), at);
    if (named(art)) return art;
    const legacy = await ids.legacyCheckpoint(id);
    const old = legacy && (await this.#get(ctx, legacy, at));
    return named(old) ? old : undefined;
  }

  async #tuple(ctx, threadId, ns, art, at) {
    const d = art.data;
    if (d.thread_id !== String(threadId)) {
      // Another thread's checkpoint in this thread's context: never hand
      // it out as this thread's.
      throw new Error(`ArtifactdSaver: context ${ctx} holds a checkpoint of thread ${JSON.stringify(d.thread_id)}, not ${JSON.stringify(String(threadId))}`);
    }
    const checkpoint = await this.#decode(ctx, d.checkpoint);
    const metadata = await this.#decode(ctx, d.metadata);
    const rel = await this.client.related(ctx, art.id, { at, rel: "responds_to", dir: "in" });
    const keyed = [];
    for (const e of rel.edges) {
      const w = await this.#get(ctx, e.from, at);
      if (!w || w.type !== WRITES_TYPE) continue;
      for (const x of w.data.writes) {
        keyed.push({ key: writesSortKey(w.data.task_path ?? "", w.data.task_id, x.idx), write: [w.data.task_id, x.channel, await this.#decode(ctx, x.value)] });
      }
    }
    keyed.sort((a, b) => compareWritesSortKeys(a.key, b.key));
    const tuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: d.checkpoint_id } },
      checkpoint,
      metadata,
      pendingWrites: keyed.map((k) => k.write),
    };
    if (d.parent_checkpoint_id) {
      tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: d.parent_checkpoint_id } };
    }
    return tuple;
  }

  async getTuple(config) {
    const threadId = threadOf(config, "getTuple");
    const ns = nsOf(config);
    const ctx = await this.#context(threadId, false);
    let commit;
    try {
      commit = (await this.client.hash(ctx)).commit;
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
    const ids = await idsOf(ns);
    let id = getCheckpointId(config);
    if (!id) {
      const head = await this.#get(ctx, ids.head, commit);
      if (!head) return undefined;
      id = head.data.checkpoint_id;
    }
    const art = await this.#checkpoint(ctx, ns, ids, id, commit);
    if (!art) return undefined;
    return this.#tuple(ctx, threadId, ns, art, commit);
  }

  async *list(config, options = {}) {
    const threadId = threadOf(config, "list (this saver lists one thread at a time)");
    let { limit } = options;
    const { before, filter } = options;
    const ctx = await this.#context(threadId, false);
    let commit;
    try {
      commit = (await this.client.hash(ctx)).commit;
    } catch (e) {
      if (e instanceof NotFoundError) return;
      throw e;
    }
    // Without a checkpoint_ns every namespace of the thread is listed (as
    // LangGraph's savers do): the namespaces are those with a head.
    let namespaces = [config.configurable?.checkpoint_ns];
    if (namespaces[0] === undefined) {
      namespaces = [];
      let cursor;
      do {
        const page = await this.client.listArtifacts(ctx, { at: commit, type: HEAD_TYPE, limit: 1000, cursor });
        for (const a of page.items) {
          const head = await this.#get(ctx, a.id, commit);
          if (head) namespaces.push(head.data.checkpoint_ns);
        }
        cursor = page.next_cursor;
      } while (cursor);
    }
    // Each namespace's chain newest first, merged by checkpoint id (ids
    // are time-ordered), newest first.
    const chains = await Promise.all(
      namespaces.map(async (ns) => {
        const chain = this.#chain(ctx, ns, getCheckpointId(config), commit);
        return { chain, ns, next: await chain.next() };
      }),
    );
    const beforeId = before?.configurable?.checkpoint_id;
    for (;;) {
      let c;
      for (const x of chains) if (!x.next.done && (!c || x.next.value.data.checkpoint_id > c.next.value.data.checkpoint_id)) c = x;
      if (!c) return;
      const art = c.next.value;
      c.next = await c.chain.next();
      if (beforeId && !(art.data.checkpoint_id < beforeId)) continue;
      const tuple = await this.#tuple(ctx, threadId, c.ns, art, commit);
      if (filter && !Object.entries(filter).every(([k, v]) => tuple.metadata?.[k] === v)) continue;
      if (limit !== undefined) {
        if (limit <= 0) return;
        limit -= 1;
      }
      yield tuple;
    }
  }

  /** The checkpoint artifacts of namespace ns at commit, from id (or its head) along parents. */
  async *#chain(ctx, ns, given, commit) {
    const ids = await idsOf(ns);
    let id = given || (await this.#get(ctx, ids.head, commit))?.data.checkpoint_id;
    while (id) {
      const art = await this.#checkpoint(ctx, ns, ids, id, commit);
      if (!art) return;
      yield art;
      if (given) return; // a given checkpoint lists only itself
      id = art.data.parent_checkpoint_id;
    }
  }

  put(config, checkpoint, metadata) {
    const key = `${config.configurable?.thread_id}\u0000${nsOf(config)}\u0000${checkpoint.id}`;
    const p = this.#put(config, checkpoint, metadata, key, [...(this._writes.get(key) ?? [])]);
    this._puts.set(key, p);
    p.then(
      () => this._puts.delete(key),
      () => this._puts.delete(key),
    );
    return p;
  }

  async #put(config, checkpoint, metadata, key, writesInFlight) {
    await Promise.allSettled(writesInFlight);
    const threadId = threadOf(config, "put");
    const ns = nsOf(config);
    const ctx = await this.#context(threadId, true);
    const parentId = config.configurable?.checkpoint_id;
    const [cp, md, ids] = await Promise.all([this.#encode(ctx, checkpoint), this.#encode(ctx, metadata), idsOf(ns)]);
    const out = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
    const id = await ids.checkpoint(checkpoint.id);
    // A stale parent while this namespace's head is still parentId is no
    // conflict: the thread's own pending writes, or another namespace of
    // it (a subgraph), moved the context's head. Those are retried
    // without counting against attempts, within a bound and with a short
    // jittered pause; a changed namespace head is a conflict at once.
    const most = Math.max(1, this.attempts) * 20;
    for (let i = 0, counted = 0; counted < Math.max(1, this.attempts) && i < most; i++) {
      if (i) await jitter(i);
      const head = (await this.client.hash(ctx)).commit;
      const [headArt, taken] = await Promise.all([this.#get(ctx, ids.head, head), this.#get(ctx, id, head)]);
      const latest = headArt?.data.checkpoint_id ?? null;
      if (latest === checkpoint.id) return out; // already written (a retried request)
      if (taken && !(taken.data.checkpoint_ns === ns && taken.data.checkpoint_id === checkpoint.id)) throw new LegacyIdError(id, taken.data);
      if (latest !== (parentId ?? null)) throw new CheckpointConflictError(threadId, ns, parentId, latest);
      // The parent's artifact is under its id, or under its legacy id in
      // a thread written before checkpoint ids were hashed (see idsOf).
      let parent = parentId && (await ids.checkpoint(parentId));
      if (parentId && (await ids.legacyCheckpoint(parentId))) parent = (await this.#checkpoint(ctx, ns, ids, parentId, head))?.id ?? parent;
      const ops = [
        {
          op: "put",
          artifact: {
          id,
          type: CHECKPOINT_TYPE,
          produced_by: "langgraph",
          data: {
            thread_id: threadId,
            checkpoint_ns: ns,
            checkpoint_id: checkpoint.id,
            parent_checkpoint_id: parentId ?? null,
            ts: checkpoint.ts,
            step: metadata?.step ?? null,
            source: metadata?.source ?? null,
            serde: cp.serde,
            checkpoint: cp,
            metadata: md,
          },
          },
        },
        { op: "put", artifact: { id: ids.head, type: HEAD_TYPE, produced_by: "langgraph", data: { checkpoint_ns: ns, checkpoint_id: checkpoint.id } } },
      ];
      if (parentId) ops.push({ op: "link", from: id, rel: "derived_from", to: parent });
      const orphans = [...(this._orphans.get(key) ?? [])];
      for (const w of orphans) ops.push({ op: "link", from: w, rel: "responds_to", to: id });
      try {
        await this.client.commit(ctx, { ops, parent: head, author: "langgraph", message: `checkpoint ${checkpoint.id} (step ${metadata?.step})` });
        this._orphans.delete(key);
        return out;
      } catch (e) {
        // The head moved: maybe only pending writes of this thread, maybe
        // another writer's checkpoint. Re-read and check again.
        if (!(e instanceof StaleParentError)) throw e;
        if (latest !== (parentId ?? null)) counted++;
      }
    }
    throw new Error(`ArtifactdSaver.put: the head of thread "${threadId}" kept moving; gave up after ${most} tries`);
  }

  putWrites(config, writes, taskId, taskPath) {
    const key = `${config.configurable?.thread_id}\u0000${nsOf(config)}\u0000${config.configurable?.checkpoint_id}`;
    const put = this._puts.get(key);
    // This saver's putWrites on one thread go one at a time, in the order
    // they were called: each is made with the head as parent, and a graph
    // fanning out to many tasks would otherwise have them all race for it,
    // each stale parent a retry (300 tasks' writes at once took minutes,
    // and a third gave up); and a task's special writes (an error, an
    // interrupt) replace the one before, so the last called must land
    // last. The place in the queue is taken here, before anything is
    // awaited.
    const p = this.#queued(String(config.configurable?.thread_id), () => this.#putWrites(config, writes, taskId, taskPath, key, put));
    let set = this._writes.get(key);
    if (!set) this._writes.set(key, (set = new Set()));
    set.add(p);
    const done = () => {
      set.delete(p);
      if (set.size === 0 && this._writes.get(key) === set) this._writes.delete(key);
    };
    p.then(done, done);
    return p;
  }

  async #putWrites(config, writes, taskId, taskPath, key, put) {
    const threadId = threadOf(config, "putWrites");
    const ns = nsOf(config);
    const checkpointId = config.configurable?.checkpoint_id;
    if (!checkpointId) throw new Error("ArtifactdSaver.putWrites: the config has no configurable.checkpoint_id");
    const ctx = await this.#context(threadId, true);
    if (put) await put.catch(() => {});
    const ids = await idsOf(ns);
    const fresh = await ids.writes(checkpointId, taskId);
    const legacy = await ids.legacyWrites(checkpointId, taskId);
    // A task's writes are one artifact, read, merged and written back:
    // the write is made with the head it read as parent, so a concurrent
    // putWrites of the same task (from this saver or another process)
    // cannot overwrite it unseen. A stale parent is re-read and merged
    // again, with a short jittered pause; any commit to the thread's
    // context moves the head, so the bound is generous.
    const most = Math.max(1, this.attempts) * 20;
    let linked;
    let id;
    for (let attempt = 0; ; attempt++) {
      if (attempt) await jitter(attempt);
      const head = (await this.client.hash(ctx)).commit;
      let [existing, checkpointArt] = await Promise.all([this.#get(ctx, fresh, head), this.#checkpoint(ctx, ns, ids, checkpointId, head)]);
      id = fresh;
      if (existing && !(existing.data.checkpoint_ns === ns && existing.data.checkpoint_id === checkpointId && existing.data.task_id === taskId)) {
        throw new LegacyIdError(fresh, existing.data);
      }
      if (!existing && legacy) {
        // The task's writes as a thread written before checkpoint and
        // task ids were hashed holds them (see idsOf).
        const old = await this.#get(ctx, legacy, head);
        if (old?.data.checkpoint_ns === ns && old.data.checkpoint_id === checkpointId && old.data.task_id === taskId) [id, existing] = [legacy, old];
      }
      const byIdx = new Map((existing?.data.writes ?? []).map((w) => [w.idx, w]));
      // The values held inline share one request body, the kept ones too.
      const room = { left: MAX_WRITES_INLINE_BYTES - encoder.encode(JSON.stringify(existing?.data.writes ?? [])).length };
      for (const [i, [channel, value]] of writes.entries()) {
        const idx = WRITES_IDX_MAP[channel] ?? i;
        if (idx >= 0 && byIdx.has(idx)) continue; // regular writes are kept, special ones replaced
        byIdx.set(idx, { idx, channel, value: await this.#encode(ctx, value, room) });
      }
      const all = [...byIdx.values()].sort((a, b) => a.idx - b.idx);
      linked = Boolean(checkpointArt);
      try {
        await this.client.putArtifact(ctx, {
          id,
          type: WRITES_TYPE,
          produced_by: "langgraph",
          data: { checkpoint_ns: ns, checkpoint_id: checkpointId, task_id: taskId, task_path: taskPath ?? "", writes: all },
          edges: linked ? [{ rel: "responds_to", to: checkpointArt.id }] : undefined,
          parent: head,
        });
        break;
      } catch (e) {
        if (!(e instanceof StaleParentError)) throw e;
        if (attempt + 1 >= most) throw new Error(`ArtifactdSaver.putWrites: the head of thread "${threadId}" kept moving; gave up after ${most} tries`, { cause: e });
      }
    }
    if (!linked) {
      // The checkpoint's put links it (see the constructor).
      let ids = this._orphans.get(key);
      if (!ids) this._orphans.set(key, (ids = new Set()));
      ids.add(id);
    }
  }

  /** Runs fn after the putWrites queued on thread before it. */
  #queued(thread, fn) {
    const run = (this._writing.get(thread) ?? Promise.resolve()).then(fn);
    const settled = run.then(
      () => {},
      () => {},
    );
    this._writing.set(thread, settled);
    settled.then(() => {
      if (this._writing.get(thread) === settled) this._writing.delete(thread);
    });
    return run;
  }

  /**
   * Removes the thread's checkpoints and writes. artifactd keeps history:
   * earlier commits still hold them and still verify.
   *
   * The deletion is one commit when its ops fit in one request body
   * (DELETE_BATCH_BYTES, halved each time the server refuses a body as too
   * large), else several: it is then not atomic. The heads go first, so
   * from the first commit on list and getTuple without a checkpoint_id find
   * no thread; the writes, then the checkpoints follow. If it fails part
   * way, what is left stays readable by its checkpoint_id and another
   * deleteThread removes it. Artifacts written after deleteThread began are
   * left in place.
   */
  async deleteThread(threadId) {
    const ctx = await this.#context(String(threadId), false);
    let head;
    try {
      head = (await this.client.hash(ctx)).commit;
    } catch (e) {
      if (e instanceof NotFoundError) return;
      throw e;
    }
    const ids = [];
    for (const type of [HEAD_TYPE, WRITES_TYPE, CHECKPOINT_TYPE]) {
      const some = [];
      let cursor;
      do {
        const page = await this.client.listArtifacts(ctx, { at: head, type, limit: 1000, cursor });
        for (const a of page.items) some.push(a.id);
        cursor = page.next_cursor;
      } while (cursor);
      ids.push(...some.sort());
    }
    let budget = DELETE_BATCH_BYTES;
    const most = Math.max(1, this.attempts) * 20;
    for (let next = 0, part = 1, tries = 0; next < ids.length; ) {
      const body = { ops: [], parent: head, author: "langgraph", message: `delete thread ${threadId}` + (part > 1 ? ` (part ${part})` : "") };
      let size = encoder.encode(JSON.stringify(body)).length;
      const fits = (op) => {
        const n = encoder.encode(JSON.stringify(op)).length + 1;
        if (body.ops.length && size + n > budget) return false;
        body.ops.push(op);
        size += n;
        return true;
      };
      // Each artifact's edges are unlinked before it is deleted; a batch
      // may end between the two, and the next one reads what is left.
      const unlinked = new Set();
      let end = next;
      batch: for (; end < ids.length; end++) {
        let rel;
        try {
          rel = await this.client.related(ctx, ids[end], { at: head, dir: "both" });
        } catch (e) {
          if (e instanceof NotFoundError) continue; // deleted meanwhile by another writer
          throw e;
        }
        for (const e of rel.edges) {
          const k = `${e.from}\u0000${e.rel}\u0000${e.to}`;
          if (unlinked.has(k)) continue;
          if (!fits({ op: "unlink", from: e.from, rel: e.rel, to: e.to })) break batch;
          unlinked.add(k);
        }
        if (!fits({ op: "delete", id: ids[end] })) break;
      }
      if (body.ops.length === 0) break; // all deleted meanwhile
      try {
        head = (await this.client.commit(ctx, body)).commit;
        next = end;
        part++;
        tries = 0;
      } catch (e) {
        if (e instanceof ProblemError && e.status === 413 && budget > MIN_DELETE_BATCH_BYTES) {
          budget = Math.max(MIN_DELETE_BATCH_BYTES, budget >> 1);
          continue;
        }
        if (!(e instanceof StaleParentError) || ++tries >= most) throw e;
        await jitter(tries);
        head = (await this.client.hash(ctx)).commit;
      }
    }
    this._contexts.delete(String(threadId));
  }

  /** The commit that wrote a checkpoint (the state right after it). */
  async commitOf(config) {
    const threadId = threadOf(config, "commitOf");
    const ctx = await this.#context(threadId, false);
    const id = getCheckpointId(config);
    const ns = nsOf(config);
    const ids = await idsOf(ns);
    // NotFoundError (from the read under its id) when there is none.
    const art = (await this.#checkpoint(ctx, ns, ids, id)) ?? (await this.client.artifact(ctx, await ids.checkpoint(id)));
    return { context: ctx, commit: art.written_in };
  }

  /**
   * Verifies the state at the commit that wrote a checkpoint: the server
   * rebuilds it from the commit chain and compares its context hash (or,
   * on a server without the verify route, the hash is compared as read).
   */
  async verify(config) {
    const { context, commit } = await this.commitOf(config);
    const h = await this.client.hash(context, { at: commit });
    return { context, ...(await this.client.verify(context, h.context_hash, { at: commit })) };
  }
}
