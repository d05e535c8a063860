// Package store keeps artifactd's repositories — contexts, branches,
// commits, state maps, objects and blobs — through one storage driver of
// package kv (embedded Badger by default, PostgreSQL or memory by
// Options.Driver).
//
// # Layers
//
// The store decides commits with the pure core (package graph applies
// ops, checks cycles, trust and taint; package hashing fingerprints) and
// keeps them through the seam (package kv): content-addressed records are
// put idempotently, and a commit group's visible records land in one
// atomic Commit whose compare-and-swaps move its refs. Only the Badger
// driver imports Badger and only the PostgreSQL driver imports pgx
// (store/kv's import test keeps it so). Several stores — several
// artifactd processes — may share one database: their commit groups take
// turns on a context through the driver's holds (kv.Locker), and a group
// that loses a swap to another process anyway is decided again on what is
// stored now.
//
// # Glossary
//
//   - context: one agent run, a repository of its own with branches.
//   - commit: an atomic, durable change of a branch (replay.Commit).
//   - ref: a branch name pointing at a commit.
//   - object: the canonical JSON data of an artifact, keyed by its content
//     hash and shared by every context and version that has it.
//   - blob: raw bytes (response bodies, long outputs) keyed by SHA-256.
//   - state map: a persistent, content-addressed trie holding the whole
//     state of one commit (artifact metadata, edges, tombstones), its
//     entries in key order. Commits share unchanged subtrees, so every
//     commit is a checkpoint that costs only the nodes on the paths it
//     changed, and artifacts written together (neighbouring ids) share
//     those paths. See trie.go.
//   - head: a branch head as the committer and readers use it: a
//     graph.State with its incremental context hash, and its trust index.
//     A head whose commit's map holds its index (format 3 on) is opened over
//     that map (lazy.go): the state and trust index read through it
//     (graph.NewStateOver, graph.NewTrustIndexOver on a mapSource) and
//     hold only what changed since; lookups walk the trie through the
//     node cache (nodecache.go: it keeps branches before leaves, so a
//     point read of a map whose leaves do not fit costs one read, its
//     leaf), an artifact's edges are one prefix each way, and whole
//     reads walk a prefix a window at a time, each window's nodes read a
//     level at a time, the next window's while this one's entries are
//     yielded (rangeWalk; prefetch.go; a view loaded whole or of an old
//     commit with half the cores, so that the committer is not left
//     waiting for a processor behind it — readerWorkers); a request of
//     many ops first reads
//     the nodes its lookups will need a level at a time (readAhead) — of
//     a big one, those of its first 4,096 keys, and the rest in parts of
//     as many from a goroutine of their own while it is decided, a lookup
//     that needs a node not read yet waiting for the part being read —
//     and
//     until it is decided the map keeps what its lookups found, absent
//     keys included, since a decision asks for most entries several times.
//     Nodes and the payloads reads serve, content-addressed, are read
//     with kv.GetSame, so that a read of one context's map does not wait
//     behind another's write in flight (the Badger driver reads them in a
//     shared snapshot; a record that fails its check is read again
//     afresh before it is called corrupt). Its
//     context hash's leaves come from a leaf checkpoint (leaves.go,
//     leafbuckets.go: written after a walk, when the cache evicts a big
//     head that has none, and at Close), kept bucket by bucket: the head
//     opens over the checkpoint's table of bucket digests holding no
//     leaves (hashing.NewColdAccumulator), and a commit reads the buckets
//     it changes — two of 256 for a one-artifact commit — each checked
//     against its digest; failing a checkpoint of its own commit, from
//     the context's newest one (its hint) and the diff of the two
//     commits' maps; failing that, a walk of the map. A checkpoint
//     written deletes those of the context no head needs (none of its
//     branches or its hint is at them, no cached head, nor one evicted
//     and still to write its own, was opened from them; none while a
//     head of the context is being opened). Once
//     it holds 4,096 changes and no reader has it pinned it is opened
//     again over its newest commit (head.rebase), so a head's memory is
//     the buckets its commits read (about 40 bytes a leaf) and a bounded
//     set of changes. A head of
//     an older map is loaded whole, as before. Heads are a cache: they are evicted least recently
//     used when their estimated size passes 60 % of Options.CacheBytes
//     (default 128 MiB; the node, payload and old-state caches share the
//     rest), never while a commit group holds one nor the most recently
//     used one, and a reader caches a head it loaded only while it is
//     still the branch's durable head. A big head, one that takes more
//     than half that budget (a context of a million artifacts at the
//     default), is kept beside it rather than opened again — reading
//     its buckets again — whenever a small head needs the room: the one used
//     last such head, while used within 30 s (bigHeadKeep); the other
//     heads keep the whole budget beside it. Dropping a big head in use
//     (two big contexts at once) is warned of, once a minute at most; an
//     evicted head writes no checkpoint while the one its context's hint
//     names is a sixteenth of its state away or less (checkpointHead).
//   - view: what Read hands a reader. At a branch head, the head pinned
//     as a snapshot. At an older commit, the state loaded whole and
//     cached (ReadCommit) when it fits the old-state cache (15 % of the
//     budget) or its map predates format 3; a bigger one would be loaded
//     again on every read, so it is opened over its map for the read
//     (openAt), its context-hash leaves read only if the reader asks for
//     the hash, a fork or a clone; it reads under the read's context, so
//     a walk of it (those leaves, a whole read) stops at its next window
//     once the request ends, and View.Err says so. An audit walks the map unless the
//     provenance is more than a 64th of the state (View.Audit), and then
//     loads the state whole if it fits the head budget. A merge reads
//     base and theirs over their maps too (ReadSparse), and only what the
//     two sides changed: the diff from the base to theirs, and in the
//     committer the diff from the base to the head it lands on
//     (Planning.DiffFrom, which sees the group's unwritten nodes); after
//     a criss-cross, every merge base, and the diffs from the first to
//     the others, and the bases' own merge base, of which it looks up
//     only what the bases disagree on. A
//     diff's far side is read over its map too, and the API's comparison
//     of two runs (of one context or two) is the diff of their maps
//     (DiffStates, which reads what differs a window at a time, each a
//     level at a time, and lets each window go before the next:
//     diffWindows); the UI diffs two commits of one context so and
//     passes over the artifacts of two contexts, and carries a list of
//     ids to another commit through the diff of the artifacts' part of
//     the two maps alone (DiffArtifactsWithin). A page of a list (the
//     artifacts or edges after a cursor, the outbox's effects) is a walk
//     of the map from the
//     cursor's key (mapSource.walk through graph.Ranger): it skips, unread,
//     what sorts before the cursor, and stops with the read's context.
//   - definitions: the types and relations a context uses, recorded in
//     its own history as artifactd.type/… and artifactd.relation/…
//     artifacts (graph.DefinitionOps decides which a commit must record;
//     CommitRequest.Types and Relations carry what the writer validated
//     against). Their payloads are loaded with every state, so trust is a
//     function of the chain alone. The root commit's message names the
//     context's ruleset of built-ins.
//
// # Key layout (format version 5)
//
// Parts are joined with a NUL byte; digests are 32 raw bytes.
//
//	meta NUL format                    -> "5"
//	meta NUL registry                  -> 16 random bytes, new with every type or relation record
//	ctx NUL <ctx>                      -> ContextInfo JSON
//	ref NUL <ctx> NUL <branch>         -> commit id
//	cmt NUL <ctx> NUL <commit>         -> replay.Commit JSON
//	seq NUL <ctx> NUL <uint64 BE>      -> commit id (insertion order)
//	ops NUL <ctx> NUL <commit><u32 BE> -> canonical JSON array of up to ChunkOps recorded ops
//	obj NUL <content hash>             -> canonical data
//	blob NUL <sha256>                  -> raw bytes (a blob of at most BlobChunkSize bytes, or any blob written before chunking)
//	blobm NUL <sha256>                 -> manifest of a larger blob: 0x01, uvarint size, uvarint chunk size, SHA-256 of each chunk
//	blobc NUL <sha256><u32 BE>         -> chunk i of a larger blob (written before its manifest)
//	cblob NUL <ctx> NUL <sha256>       -> "" (the context holds the blob: it may read it; a gate output's blobs are held in its commit's write, CommitRequest.Blobs)
//	meta NUL blob-members              -> "1" (written with a new store, or when BackfillBlobMembers ran: from then on a context reads and exports only the blobs it holds, and fsck expects it to hold every blob its fetch verdicts name)
//	spill NUL <unix ns BE> NUL <sha256> -> context id (a spilled tool output's blob, by when it was spilled, and the context that spilled it — "" in stores written before; spill.go)
//	pruned NUL <sha256>                -> {"pruned_at"} (its bytes were pruned, serve --spill-retention; or an import of an earlier version took a bundle's pruned line so)
//	cpruned NUL <ctx> NUL <sha256>     -> {"pruned_at"} (the bundle the context was imported from lists the blob as pruned: so it reads through that context only; spill.go)
//	node NUL <node id>                 -> state-map node (id = SHA-256 of the bytes)
//	type NUL <name>                    -> type record JSON (owned by the registry, not the chain)
//	reldef NUL <name>                  -> relation record JSON (likewise)
//	ltab NUL <ctx> NUL <context hash>  -> a leaf checkpoint's table: each non-empty bucket's number, uvarint length and digest (leafbuckets.go)
//	lbkt NUL <ctx> NUL <bucket digest> -> the leaves of one bucket of the context's checkpoints, sorted
//	lgen NUL <ctx>                      -> uint64 BE: the context's checkpoint generation, swapped by each table written and each sweep
//	leaves NUL <context hash><u32 BE>  -> part i of a leaf checkpoint kept whole by an earlier release: up to 32,768 of the state's leaves, sorted (leaves.go; read, then deleted)
//	leafat NUL <ctx>                    -> the commit whose state the context's newest leaf checkpoint holds (a hint)
//	rev NUL <ctx> NUL <to> NUL <commit> -> the edges commit first linked to to: { uvarint len(rel) rel uvarint len(from) from }*, sorted
//
// A state map's entries (trie.go) are 'a' id (an artifact's metadata),
// 't' id (a tombstone), 'e' from NUL rel NUL to (an edge and its attrs),
// and, since format 3, the index that lets a commit be decided without
// the state loaded whole: 'q' id (the trust entry of an unconfirmed
// artifact: whether its base holds, how many of its dependency edges
// point at unconfirmed artifacts, and a poison root's reason; a confirmed
// artifact has none) and the reverse edges (each edge again from the end
// it points at, so an artifact's dependents are one prefix). The commit
// record's index (replay.MapIndex) keeps the sizes that go with them:
// tombstones, poison roots, quarantined artifacts and the live artifacts
// of each type. fsck checks the sizes of every commit, the artifact,
// tombstone and edge entries of every commit's map against the replayed
// state (the diff of its map against its first parent's must change what
// its ops changed, to what they made), and every entry at every branch
// head against the state and trust computed afresh.
//
// Since format 4 the reverse edges are not in the map but in the
// context's reverse index (rev keys; MapIndex.ReverseApart): a new edge
// is indexed once, in its commit's record for its target, written before
// the commit is visible and never again (a commit linking 10,000
// artifacts to one hub writes one record).
// In the map they were 'r' to NUL rel NUL from entries, and a commit
// linking to random earlier artifacts rewrote a random leaf and its path
// per edge — the larger the map, the more of it each commit copied
// (docs/BENCHMARKS.md, "Reverse edges apart"). The index is a superset —
// every branch's edges, and edges unlinked since — so a read of an
// artifact's dependents looks each named edge up in the map it reads
// (edges written together share their leaves), and fsck checks that
// every edge of every commit's map has its entry — for each commit, the
// edges its map adds to its first parent's, at a branch head or not — and
// at each branch head every edge of its state. A map of format 3 keeps its
// 'r' entries and so do the commits after it (one map never mixes the
// two); a new context, and the first commit onto a map written before
// format 3, keep them apart.
//
// Format 5 changed no key: with it, the Badger driver may keep the value
// of a record put with kv.PutSame — a bulk commit's payloads, state-map
// nodes and op chunks — in a pack file beside its tree, the tree holding
// where (badgerkv's pack.go). A binary of format 4 would read those
// pointers as values, so the store is stamped 5 on open and such a
// binary refuses it; the PostgreSQL driver stores every value as it is.
//
// Format 3 added the index; a map written before has none, and its
// commit record no Index. Such a head is loaded whole, and the first
// commit onto it writes the whole index with its own changes (in the
// committer, about what loading the head costs; once per head).
//
// Format 2 changed only the state map's layout: format 1 keyed its trie by
// SHA-256 of each entry's key, which scattered the entries a commit wrote
// over the whole map. A store of format 1, 2, 3 or 4 opens as it is: Open
// stamps it 5, so that an older binary refuses it rather than misread the
// new maps or packed records. The old tries stay readable (lookups, walks, diffs, fsck), and
// the first commit onto a branch head rebuilds that head's state map in
// the ordered layout, in the committer, with the entries and new nodes
// in memory outside the cache budget — about what loading the head
// costs. Each head does so once; a branch created later at an old commit
// rebuilds again, and a diff or merge whose side is an old commit reads
// both maps whole. There is no rolling upgrade or downgrade: stop every
// older process sharing a store before the first process of a newer
// format opens it (an older one left running fails its reads with a corruption error;
// it does not write over the new maps).
//
// The ops chunks of a commit, joined, are the canonical JSON its ops hash
// covers (HASHING.md §5); the committer writes them in one pass (opsenc.go)
// and a fold reads them back with a scanner for exactly that shape.
//
// # Atomicity and durability
//
// A commit group is written in one of two ways. A group whose records fit
// in half of the driver's limits (kv.LimitsOf: Badger's transaction
// limits; a generous default for a database server) — every group of
// small commits — is written in one kv Commit: one round trip, atomic as
// a whole. A larger group, and a bulk one (its immutable records and new
// nodes past bulkGroupBytes, 1 MiB: the Badger driver keeps what it puts
// so in a pack, out of its compactions), first puts its immutable records
// (objects, state-map nodes, op chunks) with kv.PutSame (their keys name their
// values, so a driver may skip reading each key), in parts of 8 MiB from
// other goroutines while the committer goes on building: they are
// content-addressed or keyed by a commit id nothing references yet, so a
// crash leaves only unreachable records. Then one small Commit writes the
// commit records, their seq entries and the moved refs, so a commit of any
// size is wholly visible or not at all. Every kv write is durable when it
// returns (the Badger driver opens the database with Badger's SyncWrites,
// unless Options.NoSync: the value log is synced before the write-ahead
// log that points into it), so the puts are durable before the Commit
// that makes them reachable; no request of the group is acknowledged
// before that Commit returns.
//
// Every ref the group moves is a swap expecting the value the group
// decided on (the head it built on; no value for a new branch), every
// seq entry and new context record a swap expecting no value. When a
// swap fails — another process committed first — nothing was written:
// the group's heads stay as they were (the next group catches them up
// with the stored ref), its sequence counters are dropped and, after a pause
// of a few random milliseconds (longer after each loss, so that racing
// processes take turns), its requests are decided again on the stored
// heads. A request whose own Parent is no longer the head then gets
// ErrStale; one that keeps losing for 30 seconds gets ErrStale saying so.
// A driver that says other processes write through it (kv.Sharer:
// PostgreSQL) must have holds (kv.Locker; Open refuses it otherwise): a
// group first holds the context records of every context it writes to,
// decides, and commits its visible records through the hold, so that the
// processes writing to one context take turns in the order they asked
// rather than race on the swaps — where the process with the warmest
// cache wins again and again and the others starve. With holds a lost
// swap is rare (two processes creating one context). Such a driver also
// makes the committer read each branch's ref before it
// trusts a cached head — a head a few commits behind catches up by
// applying their recorded ops, as a replay does, checking each context
// hash — and a context's sequence counter once per group; a read of a
// branch head whose ref moved reads that ref's commit. A group whose
// Commit the driver sent and then lost the answer to (kv.ErrOutcomeUnknown:
// a database connection that broke after COMMIT went out, and a server
// that could not then tell the driver the outcome) landed whole
// or not at all, and the stored refs tell which: it answers every request
// with that error, drops the heads it wrote to and its contexts'
// sequence counters as a failed group does, and the store goes on taking
// writes — the next read or group loads them from storage. A group whose
// Commit the driver knows wrote nothing (kv.ErrNotWritten: pgkv's
// connection broke before COMMIT went out, and running it again on fresh
// connections failed too) answers every request with that error (503
// unavailable at the API), drops its heads and sequence counters the same
// way, and the store goes on taking writes. A group that
// fails otherwise answers every request with the error and stops the
// store's writes (ErrWriteFailed): its outcome is unknown until a restart.
//
// # Group commit
//
// Requests queue per context; a context with requests queued and no
// committer is ready. Up to four committers (smallCommitters) take the
// ready contexts' requests in the order they came, several contexts' in
// one group while it stays small (bigOps ops in all, no merge), so that
// many writers share a sync; a context whose requests would make the
// group bigger starts a group of its own, whose committer steps out of
// the four while it decides it (another is started), so a long commit of
// one context holds up only the requests of that context queued behind
// it, never another context's by its size. At most four big groups are
// decided at once (bigCommitters): a context that would start a fifth
// stays ready, and the small work behind it is taken. On a shared driver
// a committer steps out too while it waits for other processes' holds of
// its group's contexts, and a group of several contexts takes their
// requests queued meanwhile only while it stays small. A group of few ops
// can still be slow (large payloads, the first open of a cold big head),
// and the contexts in it wait with it, as in any group commit. A committer
// takes a group (up to Options.MaxBatch requests),
// decides them in order (same-branch requests see each other, and a
// request sees the refs, contexts and commits made by earlier requests of
// its group), writes the group and syncs once, then answers each request.
//
// The heads do not change while a group decides and writes (on a shared
// driver a cached head first catches up with other processes' durable
// commits when the group takes it, see below). The group
// keeps a view of each head it commits to (headFork: a fork of the head's
// state and of its trust index, graph.State.Fork, and the group's newest
// commit on the branch). Each commit request is decided (decide.go: its
// parent, the definitions it records, its ops, its check and quarantine)
// on a fork of that view — pure, but for reads of stored records (the
// payloads of definitions, a merge's commits, a fetch verdict's payload
// the head no longer holds) — and nothing is staged; then it is staged
// (group.stage: payloads, op chunks, state-map nodes — trieMutations is
// the pure part —, the commit record and the ref move); only then does
// the view take the commit's fork (headFork.take). A request refused on
// the way (stale parent, cycle, quarantine) or whose staging fails leaves
// nothing to undo: its fork is dropped. It is answered at once when the
// group has moved no ref yet, and otherwise with the group — its refusal
// may rest on the group's earlier commits, which are not durable yet (and
// a client reading after the refusal must see them). Once the group is
// durable, each head absorbs its view (headFork.advance) in time
// proportional to what the group changed; a group that fails or loses a
// swap leaves the heads as they were (a failed group also drops them
// from the cache, as the store may hold part of it). Heads touched by a group stay
// write-locked until then, so a read of a branch head never sees a commit
// that is not durable. Readers that load a head themselves cache it only
// when no ref move or failed group
// intervened (Store.head).
//
// A read of a branch head (Store.Read) takes the head's read lock only to
// pin its state and trust index as a snapshot, then reads without it. A
// group that lands on a pinned head leaves the pinned state as it is: the
// group's view, a fork over it, becomes the head's state, and the pinned
// states below (head.layers) collapse into each other once their readers
// are gone, at the next commit; a head layered over maxLayers pinned
// states instead starts afresh: a head read through its map is opened
// again over the map of the commit just made (head.reopen: a copy of the
// context hash's leaves, nothing read), a head loaded whole becomes a
// whole copy of its view (read from the layers only, O(state)). So a long read
// (an audit, a state export, the UI) neither sees commits that land while
// it runs nor holds them up, in its own context or any other; the
// committer takes a head's lock at once, waiting at most for a reader's
// pinning. Before each group the
// committer checks that the data directory's file system (Badger only) keeps
// Options.ReserveBytes free (ErrNoSpace otherwise: reads go on, writes
// resume when there is room) and that no read has reported corruption
// (NoteCorruption; Health says what to run).
//
// Reads that go to the driver directly (Resolve of a commit id, the
// commit list, Branches, ListContexts) do not wait for the group in
// flight: they may see its commits a moment before its requests are
// answered, but never before they are durable while writes succeed — a
// Badger write becomes visible only after its syncs, a PostgreSQL one
// when its transaction commits (GetContext and writes see a new context
// only once its group is done). If a group's Commit fails, the store stops taking writes
// (ErrWriteFailed) and the outcome of the group is whatever the driver
// recovers on restart; fsck checks it — unless the failure is
// kv.ErrOutcomeUnknown (above), whose outcome the stored refs already
// tell, or kv.ErrNotWritten, which wrote nothing. No writer is ever told "committed" before that Commit returned.
package store
