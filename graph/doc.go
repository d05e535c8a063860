// Package graph holds the state of a context — artifacts joined by typed
// provenance edges — and answers every question about it: how ops change
// it, what rests on what, which artifacts can be trusted, and why.
//
// The package is pure: no I/O, no clock, no logging, no randomness.
// Everything it returns is a function of the state (and of the callbacks
// the caller passes, such as a BaseFunc), and every list it returns has a
// defined order, so two replays of the same commit give the same answers
// byte for byte.
//
// A typical write, as the store performs it (a decision is made on forks
// and taken only once it is durable, so a refusal costs no undo):
//
//  1. next := head.Fork(); changes, err := next.ApplyOps(ops) — validate
//     and apply to an overlay of the head, atomically; the head is not
//     touched.
//  2. tainted := TaintedLinks(next, index, changes) — judge the new
//     dependency edges on the state after the commit; in enforce mode
//     refuse (drop next) when any rests on an unconfirmed artifact. Or,
//     on a fork of the index, tainted := fork.ApplyTainted(next, changes):
//     the same judgment on the fork brought up to date, the incremental
//     update run once (the store's way; a refusal drops the fork too).
//  3. persist, then head.Absorb(next) and index.Apply(head, changes) (or
//     absorb the fork likewise) — in time proportional to what changed.
//
// # Glossary
//
//   - Artifact: one typed JSON document (id, type, data, producer) with
//     its derived version and content hash.
//   - Edge: a typed link (from, rel, to) pointing from an artifact to what
//     it rests on or refers to: an answer is supported_by its evidence.
//   - Dependency relation: a relation registered with the depends flag
//     (derived_from, supported_by, calculated_from, extracted_from, quotes,
//     uses). Only dependency edges carry trust, and they must stay
//     acyclic. Others (mentions, cites…) are provenance only.
//   - State: the artifacts and edges at one commit, with adjacency indexes
//     and its incremental context hash.
//   - Fork: a State (or TrustIndex) that holds only what changed over
//     another it never changes; Absorb makes the other what the fork
//     shows.
//   - Trust: confirmed(a) = base(a) and every dependency of a is
//     confirmed. Base comes from the type's Role: source types are
//     confirmed by themselves, derived types by their dependencies, a
//     fetch_verdict iff its verdict is RETRIEVED, a tool_error never.
//   - Poison root: an artifact whose base is false (a failed fetch, a tool
//     error, an unknown type).
//   - Quarantined: an artifact whose base is true but that rests, directly
//     or through others, on a poison root. A later RETRIEVED re-fetch of
//     the root lifts it without any manual step.
//   - Blast radius: the number of artifacts a poison root quarantines; the
//     total blast radius counts every quarantined artifact once.
//   - Provenance: the subgraph reached from an artifact by following its
//     edges outward: everything it rests on or refers to.
package graph
