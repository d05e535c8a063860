package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// Source gives a fold the recorded chain. The store implements it over
// Badger and Bundle implements it over an exported file; a fold itself does
// no I/O beyond these calls.
type Source interface {
	// GetCommit returns the commit record with the given id.
	GetCommit(ctx context.Context, id hashing.Digest) (*Commit, error)
	// Ops returns the recorded ops of a commit.
	Ops(ctx context.Context, c *Commit) ([]graph.Op, error)
	// Object returns the bytes stored for a content hash (unchecked).
	Object(ctx context.Context, d hashing.Digest) ([]byte, error)
}

// Errors of a fold. ErrMismatch is used by callers comparing a result with
// an expected hash; ErrBroken marks a chain that does not verify.
var (
	// ErrBroken marks a chain whose records do not hash to what they claim,
	// reference missing data, or cannot be replayed.
	ErrBroken = fault.Corruption("broken chain")
	// ErrMismatch marks a verified state whose hash is not the one expected.
	ErrMismatch = errors.New("hash mismatch")
)

// ChainError names the first commit at which a fold failed.
type ChainError struct {
	Commit hashing.Digest
	Seq    uint64
	Reason string
	Err    error
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("commit %s (seq %d): %s", e.Commit, e.Seq, e.Reason)
}

// Unwrap returns ErrBroken and the underlying cause.
func (e *ChainError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrBroken}
	}
	return []error{ErrBroken, e.Err}
}

// ObjectCheck chooses which payloads a fold re-hashes.
type ObjectCheck int

const (
	// ObjectsFinal re-hashes the payload of every artifact in the final
	// state.
	ObjectsFinal ObjectCheck = iota
	// ObjectsAll re-hashes the payload of every put in the chain.
	ObjectsAll
	// ObjectsNone checks no payloads (the context hash covers content
	// hashes, not the bytes behind them).
	ObjectsNone
)

// Options tune a fold.
type Options struct {
	Objects ObjectCheck
	// Relations, when set, replaces the relations of the root commit's
	// ruleset (tests of other relation sets); definitions recorded in the
	// chain are added to them as usual.
	Relations graph.Relations
}

// Result is the outcome of a verified fold.
type Result struct {
	// Commit is the target commit.
	Commit *Commit
	// State is the rebuilt state at Commit (payloads not loaded).
	State *graph.State
	// Commits and Ops count what was replayed.
	Commits int
	Ops     int
	// Objects counts the payloads re-hashed.
	Objects int
}

// Fold rebuilds the state at target from the commit chain alone and
// verifies it: every ancestor's id is recomputed from its header, every
// ops list is re-hashed and replayed on its first parent's state, every
// resulting context hash is compared with the one recorded, and payloads
// are re-hashed as opts.Objects says. Commits on merged side branches are
// replayed too. It returns a *ChainError (wrapping ErrBroken) naming the
// first commit, in chain order, that fails.
func Fold(ctx context.Context, src Source, target hashing.Digest, opts Options) (*Result, error) {
	commits, err := ancestors(ctx, src, target)
	if err != nil {
		return nil, err
	}
	return FoldCommits(ctx, src, commits, opts, nil)
}

// FoldCommits replays commits, which must be closed under first parents
// and sorted parents-first (Seq order), verifying each as Fold does. visit,
// when set, is called after each commit with its state (valid only during
// the call). The Result describes the last commit.
func FoldCommits(ctx context.Context, src Source, commits []*Commit, opts Options, visit func(c *Commit, st *graph.State) error) (*Result, error) {
	var each func(c *Commit, st *graph.State, changes []graph.Change) error
	if visit != nil {
		each = func(c *Commit, st *graph.State, _ []graph.Change) error { return visit(c, st) }
	}
	return FoldCommitsChanges(ctx, src, commits, opts, each)
}

// FoldCommitsChanges is FoldCommits whose visit also gets the changes the
// commit's ops made to its first parent's state, in op order (as
// ApplyCommit returns them; valid only during the call): what a caller
// needs to tell, in time proportional to the commit, what the commit
// changed.
func FoldCommitsChanges(ctx context.Context, src Source, commits []*Commit, opts Options, visit func(c *Commit, st *graph.State, changes []graph.Change) error) (*Result, error) {
	if len(commits) == 0 {
		return nil, fmt.Errorf("%w: no commits to replay", ErrBroken)
	}
	// Children left to fold per commit, so that a state is cloned only at
	// a fork and dropped once its last child used it.
	remaining := make(map[hashing.Digest]int, len(commits))
	for _, c := range commits {
		if len(c.Parents) > 0 {
			remaining[c.Parents[0]]++
		}
	}
	states := make(map[hashing.Digest]*graph.State)
	res := &Result{}
	for _, c := range commits {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fail := func(reason string, cause error) (*Result, error) {
			return nil, &ChainError{Commit: c.ID, Seq: c.Seq, Reason: reason, Err: cause}
		}
		if got := c.ComputeID(); got != c.ID {
			return fail(fmt.Sprintf("its header hashes to %s, not to its id", got), nil)
		}
		var st *graph.State
		if len(c.Parents) == 0 {
			rs, err := graph.LookupRuleset(graph.RulesetOf(c.Message))
			if err != nil {
				return fail("its ruleset cannot be replayed: "+err.Error(), err)
			}
			st = graph.NewStateFor(rs)
			if opts.Relations != nil {
				st = graph.NewState(opts.Relations)
			}
		} else {
			p := c.Parents[0]
			parent := states[p]
			if parent == nil {
				return fail("first parent "+p.Short()+" was not replayed", nil)
			}
			remaining[p]--
			if remaining[p] > 0 {
				st = parent.Clone()
			} else {
				st = parent
				delete(states, p)
			}
		}
		changes, err := ApplyCommit(ctx, src, st, c)
		if err != nil {
			return nil, err
		}
		if opts.Objects == ObjectsAll {
			for _, ch := range changes {
				if ch.Op.Op != graph.OpPut {
					continue
				}
				if err := checkObject(ctx, src, ch.Op.ID, ch.Op.ContentHash); err != nil {
					return fail(err.Error(), err)
				}
				res.Objects++
			}
		}
		if visit != nil {
			if err := visit(c, st, changes); err != nil {
				return nil, err
			}
		}
		states[c.ID] = st
		res.Commits++
		res.Ops += c.NumOps
	}
	last := commits[len(commits)-1]
	res.Commit = last
	res.State = states[last.ID]
	if opts.Objects == ObjectsFinal {
		for _, a := range res.State.Artifacts() {
			if err := checkObject(ctx, src, a.ID, a.ContentHash); err != nil {
				return nil, &ChainError{Commit: last.ID, Seq: last.Seq, Reason: err.Error(), Err: err}
			}
			res.Objects++
		}
	}
	return res, nil
}

// ApplyCommit replays commit c onto st, the state at c's first parent,
// and verifies it as a fold does: its ops, read from src, hash to its ops
// hash, number what it records and replay with no no-op, each in the form
// a store records (graph.RecordedAs), and the state
// after them hashes to its context hash. It returns the changes. A
// *ChainError says why c does not replay; st may then be changed and
// must not be used. (Fold also checks the commit's header against its id
// and, as its options say, the payloads.)
func ApplyCommit(ctx context.Context, src Source, st *graph.State, c *Commit) ([]graph.Change, error) {
	fail := func(reason string, cause error) ([]graph.Change, error) {
		return nil, &ChainError{Commit: c.ID, Seq: c.Seq, Reason: reason, Err: cause}
	}
	ops, err := src.Ops(ctx, c)
	if err != nil {
		return fail("cannot read its ops: "+err.Error(), err)
	}
	opsHash, _, err := graph.OpsHash(ops)
	if err != nil {
		return fail("its ops cannot be canonicalized: "+err.Error(), err)
	}
	if opsHash != c.OpsHash {
		return fail(fmt.Sprintf("its ops hash to %s, the commit records %s", opsHash, c.OpsHash), nil)
	}
	if ops, err = WithDefinitionData(ctx, src, ops); err != nil {
		return fail(err.Error(), err)
	}
	changes, err := st.ApplyOps(ops)
	if err != nil {
		return fail("its ops do not replay: "+err.Error(), err)
	}
	for i, ch := range changes {
		if ch.Noop {
			return fail(fmt.Sprintf("op %d is a no-op, which is never recorded", i), graph.ErrCorrupt)
		}
		if !graph.RecordedAs(ops[i], ch) {
			return fail(fmt.Sprintf("op %d is not in the form a store records (a put's version written out, a link's empty attrs left out), so no store writes this commit", i), graph.ErrCorrupt)
		}
	}
	if got := st.Hash(); got != c.ContextHash {
		return fail(fmt.Sprintf("replayed state hashes to %s, the commit records %s", got, c.ContextHash), nil)
	}
	if c.NumOps != len(ops) {
		return fail(fmt.Sprintf("records %d ops, has %d", c.NumOps, len(ops)), nil)
	}
	return changes, nil
}

func checkObject(ctx context.Context, src Source, id string, d hashing.Digest) error {
	b, err := src.Object(ctx, d)
	if err != nil {
		return fmt.Errorf("payload of %q (%s) cannot be read: %w", id, d.Short(), err)
	}
	if got := hashing.ContentHash(b); got != d {
		return fmt.Errorf("payload of %q does not match its content hash %s (it hashes to %s)", id, d, got)
	}
	// HASHING.md §2: the content hash is of the data's canonical JSON, so
	// a payload in any other form (keys out of order, a key twice, a
	// number written another way) is a hash nobody can reproduce from the
	// data.
	if err := hashing.CheckCanonicalObject(b); err != nil {
		return fmt.Errorf("payload of %q (%s) is not canonical JSON: %w", id, d.Short(), err)
	}
	return nil
}

// ancestors returns target and every commit it reaches through any parent,
// in replay order (Seq ascending; the chain's insertion order).
func ancestors(ctx context.Context, src Source, target hashing.Digest) ([]*Commit, error) {
	seen := map[hashing.Digest]*Commit{}
	stack := []hashing.Digest{target}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] != nil {
			continue
		}
		c, err := src.GetCommit(ctx, id)
		if err != nil {
			return nil, &ChainError{Commit: id, Reason: "cannot read the commit: " + err.Error(), Err: err}
		}
		seen[id] = c
		for _, p := range c.Parents {
			if seen[p] == nil {
				stack = append(stack, p)
			}
		}
	}
	out := make([]*Commit, 0, len(seen))
	for _, c := range seen {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return string(out[i].ID[:]) < string(out[j].ID[:])
	})
	for _, c := range out {
		for _, p := range c.Parents {
			if seen[p].Seq >= c.Seq && c.Seq != 0 {
				return nil, &ChainError{Commit: c.ID, Seq: c.Seq, Reason: fmt.Sprintf("parent %s has seq %d, not below %d", p.Short(), seen[p].Seq, c.Seq)}
			}
		}
	}
	return out, nil
}

// MatchHash reports whether got matches the user-typed expectation: a full
// "sha256:<hex>", bare hex, or a prefix of at least 8 hex digits.
func MatchHash(got hashing.Digest, want string) (bool, error) {
	prefix, err := hashing.HexPrefix(want)
	if err != nil {
		return false, err
	}
	return len(got.Hex()) >= len(prefix) && got.Hex()[:len(prefix)] == prefix, nil
}

// WithDefinitionData returns ops with the data of each definition put that
// lacks it read from src: the state needs it to know what a definition
// defines, and ApplyOps checks it against the recorded content hash. A
// fold reads recorded ops (which never carry data); the store's commit
// path reads a merge's or an import's. ops is not modified; it is returned
// as is when no definition needs data.
func WithDefinitionData(ctx context.Context, src Source, ops []graph.Op) ([]graph.Op, error) {
	var out []graph.Op
	for i := range ops {
		op := &ops[i]
		if op.Op != graph.OpPut || op.Data != nil || !graph.IsDefinitionType(op.Type) || op.ContentHash.IsZero() {
			continue
		}
		if out == nil {
			out = append([]graph.Op(nil), ops...)
		}
		data, err := src.Object(ctx, op.ContentHash)
		if err != nil {
			return nil, fmt.Errorf("definition %q: its data %s cannot be read: %w", op.ID, op.ContentHash, err)
		}
		out[i].Data = data
	}
	if out == nil {
		return ops, nil
	}
	return out, nil
}
