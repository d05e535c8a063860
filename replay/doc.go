// Package replay rebuilds, compares and combines states from a recorded
// commit chain alone, with no agent run and no store: it folds, verifies,
// diffs, merges and reads or writes bundles.
//
// The package is pure: it imports neither Badger nor os, net or a clock.
// Records arrive through a Source (the store implements one over Badger,
// Bundle over an exported file) and bundles are read and written through
// io.Reader and io.Writer; the caller persists what replay decides.
//
// # Glossary
//
//   - fold: replay every op of a chain, parents first, re-hashing each
//     commit id, ops list and context hash (Fold, FoldCommits; one commit
//     onto its parent's state: ApplyCommit).
//   - diff: the artifacts added, removed and changed, the edges added,
//     removed and re-attributed, and the trust statuses that changed
//     between two states (Diff, DiffResult).
//   - merge base: the common ancestor of two commits with the highest Seq,
//     ties broken by the smaller id (MergeBase). After a criss-cross two
//     commits have several best common ancestors, none descending from
//     another (MergeBases); a merge is then made against them all
//     (MergeOver): what they disagree on is merged against a virtual
//     base, what every base that changed it since their own merge base
//     (MergeBasesOf) changed it to; when two changed it differently, or
//     the bases have no single merge base, it has no base, and the sides
//     conflict on it when they differ.
//   - three-way merge: a change made on one side since the merge base is
//     taken, the same change made on both sides is taken once; changes
//     that disagree, and merged edges that would dangle or close a
//     dependency cycle, are Conflicts; every conflict is reported at once and
//     nothing is applied until each has a Resolution (Merge, MergeCommits;
//     PrepareMerge tells a fast-forward from a three-way merge).
//   - conflict key: what a Resolution names a Conflict by — the artifact's
//     id, "edge:from -rel-> to", "cycle:from -rel-> to", escaped where an id
//     would make it ambiguous, so no two conflicts share one (ArtifactKey,
//     EdgeConflictKey, CycleKey; ParseKey reads one back).
//   - fast-forward: merging a descendant into its ancestor; the ancestor's
//     branch just moves, no merge commit is written.
//   - bundle: one JSON Lines file holding a context's header, commits with
//     their recorded ops, objects and blobs (format "artifactd-bundle/v1",
//     see bundle.go); a Bundle is a Source, so Fold verifies it directly.
package replay
