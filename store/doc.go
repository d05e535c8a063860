// Package store persists artifactd's repositories in an embedded Badger
// database; it is the only package that imports Badger.
//
// # Glossary
//
//   - context: one agent run, a repository of its own with branches.
//   - commit: an atomic, durable change of a branch (replay.Commit).
//   - ref: a branch name pointing at a commit.
//   - object: the canonical JSON data of an artifact, keyed by its content
//     hash and shared by every context and version that has it.
//   - blob: raw bytes (response bodies, long outputs) keyed by SHA-256.
//   - state map: a persistent, content-addressed hash trie holding the whole
//     state of one commit (artifact metadata, edges, tombstones). Commits
//     share unchanged subtrees, so every commit is a checkpoint that costs
//     only the nodes on the paths it changed. See trie.go.
//   - head: the in-memory state of a branch head (graph.State with its
//     incremental context hash and trust index), rebuilt from the state map
//     on first use.
//
// # Key layout (format version 1)
//
// Parts are joined with a NUL byte; digests are 32 raw bytes.
//
//	meta NUL format                    -> "1"
//	ctx NUL <ctx>                      -> ContextInfo JSON
//	ref NUL <ctx> NUL <branch>         -> commit id
//	cmt NUL <ctx> NUL <commit>         -> replay.Commit JSON
//	seq NUL <ctx> NUL <uint64 BE>      -> commit id (insertion order)
//	ops NUL <ctx> NUL <commit><u32 BE> -> JSON array of up to ChunkOps recorded ops
//	obj NUL <content hash>             -> canonical data
//	blob NUL <sha256>                  -> raw bytes
//	node NUL <node id>                 -> state-map node (id = SHA-256 of the bytes)
//	type NUL <name>                    -> type record JSON (owned by httpapi)
//
// # Atomicity and durability
//
// Badger's WriteBatch is not atomic and a transaction is size-limited, so a
// commit is written in two steps. First the immutable records (objects,
// state-map nodes, op chunks) go through a WriteBatch: they are
// content-addressed or keyed by a commit id nothing references yet, so a
// crash leaves only unreachable records. Then one small transaction writes
// the commit record, its seq entry and the moved ref; it is atomic, so a
// commit of any size is wholly visible or not at all. The database is
// opened without per-write sync; the committer calls DB.Sync once per
// group, and no request of the group is acknowledged before that returns.
//
// # Group commit
//
// All writes go through one goroutine. It takes every queued request,
// applies them in order to the in-memory heads (same-branch requests see
// each other), writes the group and syncs once, then answers each request.
// A request refused on the way (stale parent, cycle, quarantine) is undone
// in memory at once and answered without touching the disk.
package store
