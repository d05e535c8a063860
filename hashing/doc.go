// Package hashing turns artifactd state into the hashes of the ctx/v1
// contract (docs: HASHING.md): canonical JSON, content hashes, leaves, the
// bucketed context hash and commit ids.
//
// Everything here is a pure function of its arguments: the package does no
// I/O, reads no clock and keeps no global state, so any other implementation
// of HASHING.md, in any language, must produce the same bytes. Treat every
// output as a public API: changing one byte breaks every stored hash.
//
// # Glossary
//
//   - Canonical JSON: the RFC 8785 (JCS) form of a JSON text, produced by
//     [Canonicalize]: no whitespace, object keys sorted by UTF-16 code units,
//     minimal string escapes, numbers as ECMAScript Number.prototype.toString
//     writes them. Input that would lose information (duplicate keys,
//     invalid UTF-8, lone surrogates, non-finite numbers, integers beyond
//     2^53, nesting deeper than 64) is refused with a [*CanonError].
//   - Content hash: SHA-256 of the canonical JSON of an artifact's data
//     object ([ContentHash]), written "sha256:" + 64 lowercase hex digits.
//   - Leaf: the 32-byte SHA-256 of the canonical JSON describing one artifact
//     ([ArtifactLeaf]: id, type, version, content hash, producer) or one edge
//     ([EdgeLeaf]: from, rel, to and optional attrs). A state is its set of
//     leaves.
//   - Bucket: the leaves whose first byte is b, for b in 0..255, kept in
//     bytewise order. A bucket's digest is the SHA-256 of its leaves
//     concatenated.
//   - Mark: the SHA-256 state after every 128 leaves of a bucket, which
//     an [Accumulator] keeps so that a changed bucket is hashed again from
//     the last mark before its first change rather than from its start
//     (marks.go). Marks change how much is hashed, never the digest.
//   - Cold accumulator: an [Accumulator] that knows each bucket's digest
//     and length but holds none of its leaves ([NewColdAccumulator]): the
//     context hash needs only the digests, and a bucket's leaves are asked
//     of the caller's [BucketLoader] the first time an operation needs them,
//     and checked against its digest (cold.go). The loader is the caller's:
//     the package itself still reads nothing.
//   - Context hash: SHA-256 of "artifactd/ctx/v1" followed, for each non-empty
//     bucket in ascending order, by the bucket byte and the bucket digest
//     ([ContextHash], or incrementally [Accumulator]). It depends only on the
//     set of leaves, never on history or insertion order; the empty state
//     hashes to [EmptyContextHash].
//   - Commit id: SHA-256 of the canonical JSON of a commit header (parents,
//     context hash, ops hash, author, message, time), see [CommitID]. Commit
//     ids chain like git; context hashes compare states.
package hashing
