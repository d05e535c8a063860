package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/schema"
)

// ImportResult describes an imported context.
type ImportResult struct {
	Context string `json:"context"`
	// Quarantine is the imported context's quarantine setting (ModeEnforce
	// or ModeObserve).
	Quarantine string   `json:"quarantine"`
	Commits    int      `json:"commits"`
	Blobs      int      `json:"blobs"`
	Branches   []Branch `json:"branches"`
}

// ImportOptions are the choices of an import beyond its bundle.
type ImportOptions struct {
	// As is the id of the context to create; empty: the bundle's.
	As string
	// RenameBranches creates the bundle's branch named by a key under its
	// value instead (the header's names are covered by no hash). A key
	// must be a branch of the bundle other than main; a value must be a
	// name ValidateNewBranch takes that no other branch of the import
	// has.
	RenameBranches map[string]string
	// KeepHexBranches creates a bundle's branch whose name reads as a
	// commit id (ValidateNewBranch refuses it, rule not_commit_id) with
	// that name, as a store made such branches before the rule: for the
	// export of such a store. Without it such a branch refuses the
	// import (*HexBranchError) before anything is written.
	KeepHexBranches bool
}

// HexBranchError refuses an import whose bundle names branches that would
// read as a commit id: the import creates every branch of its bundle in
// a new context, so each would be a new branch of a name ValidateNewBranch
// refuses (rule not_commit_id). Nothing was written. It is ErrInvalid.
type HexBranchError struct {
	Context  string      // the context the import would have created
	Branches []HexBranch // in the header's order
}

// HexBranch is a branch of a bundle's header that a HexBranchError
// refuses: its position in the header's branches, its name and head.
type HexBranch struct {
	Index int
	Name  string
	Head  hashing.Digest
}

// Error names every refused branch, the rule and the two ways on.
func (e *HexBranchError) Error() string {
	names := make([]string, len(e.Branches))
	for i, br := range e.Branches {
		names[i] = fmt.Sprintf("%q (at %s)", br.Name, br.Head.Short())
	}
	what, it, the := "branch "+names[0]+" is", "it", "the branch"
	if len(names) > 1 {
		what, it, the = "branches "+strings.Join(names, ", ")+" are", "each", "the branches"
	}
	return fmt.Sprintf("%v: the bundle's %s named with hex digits, and an import creates each branch of its bundle as a new branch of context %q, whose name must be %s (rule %s): nothing was imported; "+
		"rename %s for the import, or keep the name if the bundle is the export of a store that made %s before that rule (a ref of such a name is then the branch, or refused as ambiguous where another commit's id starts with its digits)",
		ErrInvalid, what, e.Context, CommitIDRule, NotCommitIDRule, it, the)
}

// Unwrap returns ErrInvalid.
func (e *HexBranchError) Unwrap() error { return ErrInvalid }

// Import is ImportWith under asID (the bundle's context id when empty)
// with no other option.
func (s *Store) Import(ctx context.Context, b *replay.Bundle, asID string) (*ImportResult, error) {
	return s.ImportWith(ctx, b, ImportOptions{As: asID})
}

// ImportWith restores a bundle as a new context, named opts.As or, when
// that is empty, as the bundle names it. Every commit keeps its id: it is written
// with its recorded parents, author, message, time and ops (explicit
// versions), so the imported chain and context hashes are the bundle's
// byte for byte. The bundle is verified in full first, and nothing is
// written unless it verifies and every commit can be reproduced.
//
// Commits are replayed in Seq order on the main branch (moved to each
// commit's first parent when needed) in observe mode, as history is not
// re-judged; the context keeps the bundle's quarantine setting (its
// header's, which no hash covers: a caller that does not trust the bundle
// sets b.Header.Settings.Quarantine before the call). Then the
// bundle's branches are set, renamed as opts.RenameBranches says. Each
// is a new branch, so one whose name reads as a commit id is refused
// (*HexBranchError, before anything is written) unless
// opts.KeepHexBranches keeps it, as an older store made it.
//
// The context holds every blob the bundle
// carries, and those it lists as pruned (only blobs its tool outputs
// name) unless this store holds their bytes for another context (those
// stay the other's) or another context holds them with their bytes lost
// (a loss fsck reports, not a prune). A pruned line's time is covered by no hash: it is
// recorded only for a blob this store has no prune time for, and only for
// the imported context (its reads answer it, its export carries it again,
// fsck accepts its own gate outputs naming the blob), never store-wide as
// a prune here is. Errors: ErrExists (the context exists),
// ErrInvalid (a bundle this store cannot reproduce, a rename it cannot
// make, *HexBranchError), the bundle's
// verification error (*replay.ChainError, replay.ErrBundle), and I/O
// errors; after a failure part-way the context is left partially imported
// and the error says so.
func (s *Store) ImportWith(ctx context.Context, b *replay.Bundle, opts ImportOptions) (*ImportResult, error) {
	ctxID := opts.As
	if ctxID == "" {
		ctxID = b.Header.Context
	}
	if err := ValidateContextID(ctxID); err != nil {
		return nil, err
	}
	if _, err := s.GetContext(ctx, ctxID); err == nil {
		return nil, fmt.Errorf("context %q: %w (import under another id)", ctxID, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if _, err := b.Verify(ctx, "", replay.Options{}); err != nil {
		return nil, fmt.Errorf("the bundle does not verify: %w", err)
	}
	if err := checkGateOutputs(ctx, b, s.rulesets); err != nil {
		return nil, err
	}
	if err := checkSchemas(ctx, b); err != nil {
		return nil, err
	}
	plan, err := planImport(b)
	if err != nil {
		return nil, err
	}
	branches, err := importBranches(b, ctxID, opts)
	if err != nil {
		return nil, err
	}
	// The context first: an id taken since the check above refuses the
	// import here, before any blob is given to a context it did not create.
	if err := s.importRoot(ctx, ctxID, plan.mode, plan.rootTime, plan.root); err != nil {
		return nil, err
	}
	partial := func(err error) error {
		return fmt.Errorf("import into context %q stopped part-way (import again under another id): %w", ctxID, err)
	}
	for _, d := range b.Blobs() {
		data, _ := b.Blob(d)
		if _, err := s.PutContextBlob(ctx, ctxID, data); err != nil {
			return nil, partial(err)
		}
	}
	pruned := b.PrunedBlobs()
	others, err := s.blobsHeldByOthers(ctx, ctxID, pruned)
	if err != nil {
		return nil, partial(err)
	}
	for d, at := range pruned {
		// Bytes this store holds for another context stay theirs: the
		// bundle does not carry them, so the imported context gets no
		// access to them, and they are not pruned. Nor is a blob another
		// context holds whose bytes are gone: that is a loss fsck
		// reports, not a prune.
		if held, err := s.HasBlob(ctx, d); err != nil || held || others[d] {
			if err != nil {
				return nil, partial(err)
			}
			continue
		}
		// A blob this store pruned keeps the time it was pruned at: the
		// bundle's, which no hash covers, would rewrite what the store
		// answers about another context's spill. Otherwise the pruned
		// line speaks for the bundle's source store, so it is recorded
		// as the imported context's own: a store-wide marker would
		// answer 410 to every context holding the digest and make fsck
		// accept every gate output naming it.
		if _, was := s.BlobPruned(ctx, d); !was {
			err = s.markImportedPruned(ctx, ctxID, d, at)
		} else {
			_, err = s.AddBlobMember(ctx, ctxID, d)
		}
		if err != nil {
			return nil, partial(err)
		}
	}
	head := plan.root.ID
	for i, c := range plan.commits {
		if err := ctx.Err(); err != nil {
			return nil, partial(err)
		}
		if c.Parents[0] != head {
			if err := s.ResetBranch(ctx, ctxID, DefaultBranch, c.Parents[0]); err != nil {
				return nil, partial(err)
			}
		}
		ops, err := b.Ops(ctx, c)
		if err != nil {
			return nil, partial(err)
		}
		withData := make([]graph.Op, len(ops))
		for j, op := range ops {
			if op.Op == graph.OpPut {
				if op.Data, err = b.Object(ctx, op.ContentHash); err != nil {
					return nil, partial(err)
				}
			}
			withData[j] = op
		}
		parent := c.Parents[0]
		res, err := s.Commit(ctx, CommitRequest{Context: ctxID, Branch: DefaultBranch, Parent: &parent,
			ExtraParents: c.Parents[1:], Author: c.Author, Message: c.Message, Ops: withData,
			Time: plan.times[i], Mode: ModeObserve})
		if err != nil {
			return nil, partial(fmt.Errorf("commit %s: %w", c.ID.Short(), err))
		}
		if res.Noop || res.Commit.ID != c.ID {
			return nil, partial(fmt.Errorf("%w: commit %s was written as %s", ErrCorrupt, c.ID.Short(), res.Commit.ID.Short()))
		}
		head = c.ID
	}
	out := &ImportResult{Context: ctxID, Quarantine: plan.mode, Commits: len(plan.commits) + 1, Blobs: len(b.Blobs())}
	for _, br := range branches {
		var err error
		switch {
		case br.Name == DefaultBranch && br.Head != head:
			err = s.ResetBranch(ctx, ctxID, DefaultBranch, br.Head)
		case br.Name != DefaultBranch:
			err = s.createBranch(ctx, ctxID, br.Name, br.Head) // importBranches checked the names
		}
		if err != nil {
			return nil, partial(fmt.Errorf("branch %q: %w", br.Name, err))
		}
	}
	if out.Branches, err = s.Branches(ctx, ctxID); err != nil {
		return nil, err
	}
	return out, nil
}

// importBranches returns the branches an import of b into context ctxID
// creates, in the header's order: renamed as opts.RenameBranches says,
// checked before anything is written. A rename must name a branch of the
// bundle (as its header names it) other than main, and give it a name
// ValidateNewBranch takes that no other branch of the import has
// (ErrInvalid); the renames apply at once, so one may take a name
// another moves away from, and two may swap. A name that reads
// as a commit id is refused, all of them in one *HexBranchError, unless
// opts.KeepHexBranches keeps them.
func importBranches(b *replay.Bundle, ctxID string, opts ImportOptions) ([]replay.BundleBranch, error) {
	out := make([]replay.BundleBranch, len(b.Header.Branches))
	copy(out, b.Header.Branches)
	olds := make([]string, 0, len(opts.RenameBranches))
	for old := range opts.RenameBranches {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		name := opts.RenameBranches[old]
		// The header's names, not out's: every rename names a branch as
		// the bundle has it, and all of them apply at once, so a chain
		// (a to b, b to c) or a swap does what it says whatever the
		// order of the map or of the header.
		i := slices.IndexFunc(b.Header.Branches, func(br replay.BundleBranch) bool { return br.Name == old })
		switch {
		case i < 0:
			return nil, fmt.Errorf("%w: cannot rename branch %q: the bundle has no branch of that name", ErrInvalid, old)
		case old == DefaultBranch:
			return nil, fmt.Errorf("%w: cannot rename branch %q: every context has it", ErrInvalid, old)
		}
		if err := ValidateNewBranch(name); err != nil {
			return nil, fmt.Errorf("cannot rename branch %q: %w", old, err)
		}
		out[i].Name = name
	}
	seen := make(map[string]bool, len(out))
	refused := &HexBranchError{Context: ctxID}
	for i, br := range out {
		if seen[br.Name] {
			return nil, fmt.Errorf("%w: the import would make two branches named %q; rename to a name the bundle does not have", ErrInvalid, br.Name)
		}
		seen[br.Name] = true
		if ReadsAsCommitID(br.Name) && !opts.KeepHexBranches {
			refused.Branches = append(refused.Branches, HexBranch{Index: i, Name: br.Name, Head: br.Head})
		}
	}
	if len(refused.Branches) > 0 {
		return nil, refused
	}
	return out, nil
}

// CheckBundle runs, on a bundle that already verified, the checks Import
// makes before writing anything: the plan (settings, branches, a root
// commit it can recreate, no commit the store would not write), every
// fetch_verdict re-derived from its
// receipt and body with the ruleset its receipt names (rulesets; the
// built-in ones when nil), every blob a gate output names present (or
// pruned, for a spilled tool output), every put valid against its type's
// schema as the chain defines it. `artifactd replay BUNDLE` uses it, so a
// bundle with a forged verdict does not replay as sound. The names of
// the bundle's branches are not judged here: one that reads as a commit
// id is sound (an older store made it), and only an import, which would
// make it a new branch, refuses it unless told to keep it.
func CheckBundle(ctx context.Context, b *replay.Bundle, rulesets *gate.Rulesets) error {
	if rulesets == nil {
		rulesets = gate.BuiltinRulesets()
	}
	if _, err := planImport(b); err != nil {
		// What import would refuse before writing, replay refuses too.
		return err
	}
	if err := checkGateOutputs(ctx, b, rulesets); err != nil {
		return err
	}
	return checkSchemas(ctx, b)
}

// checkGateOutputs re-derives, before anything is written, every gate
// output a bundle holds: each fetch_verdict put in its chain is checked by
// gate.CheckVerdict against its receipt and the body blob in the bundle
// (so a FAILED verdict edited into RETRIEVED is refused however its hashes
// were recomputed), and every blob a gate output names must be in the
// bundle. The error (ErrInvalid) names the artifact and the commit.
func checkGateOutputs(ctx context.Context, b *replay.Bundle, rulesets *gate.Rulesets) error {
	blob := func(name string) ([]byte, bool, error) {
		d, err := hashing.ParseDigest(name)
		if err != nil {
			return nil, false, nil
		}
		data, ok := b.Blob(d)
		return data, ok, nil
	}
	// Checked by type and content: the same data under another type (a
	// tool output put first) is no verdict, and a verdict's check must
	// still run.
	type put struct {
		typ string
		ch  hashing.Digest
	}
	checked := map[put]bool{}
	// spilled are the blobs tool outputs name: the only ones a bundle may
	// list as pruned.
	spilled := map[hashing.Digest]bool{}
	for _, c := range b.Commits() {
		ops, err := b.Ops(ctx, c)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if op.Op != graph.OpPut || checked[put{op.Type, op.ContentHash}] || !gateOutput(op.Type) {
				continue
			}
			checked[put{op.Type, op.ContentHash}] = true
			data, err := b.Object(ctx, op.ContentHash)
			if err != nil {
				return err
			}
			for _, ref := range gate.BlobRefs(op.Type, data) {
				if d, err := hashing.ParseDigest(ref); err == nil && op.Type != "fetch_verdict" {
					spilled[d] = true
					if _, pruned := b.Pruned(d); pruned {
						continue // a spilled output pruned after its window
					}
				}
				if _, ok, _ := blob(ref); !ok {
					return fmt.Errorf("%w: %s %q (commit %s) names blob %s, which is not in the bundle: a bundle must carry the bytes its gate outputs were judged from",
						ErrInvalid, op.Type, op.ID, c.ID.Short(), ref)
				}
			}
			if op.Type == "fetch_verdict" {
				if err := gate.CheckVerdictWith(data, blob, rulesets); err != nil {
					return fmt.Errorf("%w: fetch_verdict %q (commit %s) is not borne out by its evidence: %w", ErrInvalid, op.ID, c.ID.Short(), err)
				}
			}
		}
	}
	for d := range b.PrunedBlobs() {
		if !spilled[d] {
			// A pruned line makes the importing context hold a blob it
			// does not carry: only a tool output's own may be listed.
			return fmt.Errorf("%w: the bundle lists blob %s as pruned, but no tool output in it names that blob", ErrInvalid, d.Short())
		}
	}
	return nil
}

// checkSchemas validates, before anything is written, the data of every
// put in the bundle's chain against the schema of its type as the chain
// defines it at that commit (the definition recorded before or with the
// put), so an imported copy holds only data its own history allows. The
// error (ErrInvalid) names the artifact, the commit and the failure.
func checkSchemas(ctx context.Context, b *replay.Bundle) error {
	compiled := map[string]*schema.Schema{}
	_, err := replay.FoldCommits(ctx, b, b.Commits(), replay.Options{Objects: replay.ObjectsNone}, func(c *replay.Commit, st *graph.State) error {
		ops, err := b.Ops(ctx, c)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if op.Op != graph.OpPut {
				continue
			}
			def := st.TypeDef(op.Type)
			if def == nil || len(def.Schema) == 0 {
				continue
			}
			key := op.Type + "\x00" + string(def.Schema)
			sch := compiled[key]
			if sch == nil {
				if sch, err = schema.Compile(op.Type, def.Schema); err != nil {
					return fmt.Errorf("%w: type %q as commit %s defines it: %w", ErrInvalid, op.Type, c.ID.Short(), err)
				}
				compiled[key] = sch
			}
			data, err := b.Object(ctx, op.ContentHash)
			if err != nil {
				return err
			}
			if err := sch.Validate(data); err != nil {
				return fmt.Errorf("%w: %s %q (commit %s) does not match the schema its type had there: %w", ErrInvalid, op.Type, op.ID, c.ID.Short(), err)
			}
		}
		return nil
	})
	return err
}

// gateOutput reports whether typ is written by the gate.
func gateOutput(typ string) bool {
	return typ == "fetch_verdict" || typ == "tool_error" || typ == "tool_output"
}

// importPlan is a bundle checked for what Import can reproduce.
type importPlan struct {
	mode, created string
	root          *replay.Commit
	rootTime      time.Time
	commits       []*replay.Commit // after the root, Seq order
	times         []time.Time
}

// planImport checks, before anything is written, that the store can
// reproduce every commit of b: one root commit with no ops (what
// CreateContext writes), every other commit with a parent, every time one
// that formats back to the recorded string and is not the zero time, a
// known quarantine setting and a main branch.
func planImport(b *replay.Bundle) (*importPlan, error) {
	p := &importPlan{mode: b.Header.Settings.Quarantine, created: b.Header.Settings.Created}
	switch p.mode {
	case "":
		p.mode = ModeEnforce
	case ModeEnforce, ModeObserve:
	default:
		return nil, fmt.Errorf("%w: the bundle's quarantine setting %q is neither %q nor %q", ErrInvalid, p.mode, ModeEnforce, ModeObserve)
	}
	if _, ok := b.Header.Branch(DefaultBranch); !ok {
		return nil, fmt.Errorf("%w: the bundle has no %q branch", ErrInvalid, DefaultBranch)
	}
	for _, br := range b.Header.Branches { // Verify refused a name given twice
		if err := ValidateBranch(br.Name); err != nil {
			return nil, err
		}
	}
	commits := b.Commits()
	if len(commits) == 0 {
		return nil, fmt.Errorf("%w: the bundle has no commits", ErrInvalid)
	}
	p.root = commits[0]
	if len(p.root.Parents) != 0 || p.root.NumOps != 0 || p.root.ContextHash != hashing.EmptyContextHash() {
		return nil, fmt.Errorf("%w: the bundle's first commit %s is not an empty root commit, so it cannot be recreated", ErrInvalid, p.root.ID.Short())
	}
	if p.created == "" {
		p.created = p.root.Time
	}
	var err error
	if p.rootTime, err = checkRoot(p.root, p.created); err != nil {
		return nil, err
	}
	for _, c := range commits[1:] {
		if len(c.Parents) == 0 {
			return nil, fmt.Errorf("%w: commit %s is a second root commit; a context has one", ErrInvalid, c.ID.Short())
		}
		if len(c.Parents) == 1 && c.NumOps == 0 {
			// The committer writes no commit that changes nothing: the
			// import would stop part-way at it.
			return nil, fmt.Errorf("%w: commit %s has no ops and one parent; no store writes such a commit, so it cannot be recreated", ErrInvalid, c.ID.Short())
		}
		t, err := time.Parse(time.RFC3339Nano, c.Time)
		if err != nil || hashing.FormatTime(t) != c.Time {
			return nil, fmt.Errorf("%w: commit %s has time %q, which is not in the form this store writes (RFC 3339, UTC, nanoseconds without trailing zeros), so its id cannot be reproduced", ErrInvalid, c.ID.Short(), c.Time)
		}
		if t.IsZero() {
			return nil, zeroTimeError(c)
		}
		p.commits = append(p.commits, c)
		p.times = append(p.times, t)
	}
	return p, nil
}

// checkRoot checks that root, a bundle's root commit, is the empty
// "create context" commit CreateContext writes, at the time the
// context's settings give (created), so that recreating it reproduces its
// id; it returns that time.
func checkRoot(root *replay.Commit, created string) (time.Time, error) {
	at, err := time.Parse(time.RFC3339Nano, root.Time)
	if err != nil || hashing.FormatTime(at) != root.Time || created != root.Time {
		return time.Time{}, fmt.Errorf("%w: root commit %s has time %q (context created %q); want one RFC 3339 UTC time", ErrInvalid, root.ID.Short(), root.Time, created)
	}
	if at.IsZero() {
		return time.Time{}, zeroTimeError(root)
	}
	rs := graph.RulesetOf(root.Message)
	if len(root.Parents) != 0 || root.NumOps != 0 || root.Author != "artifactd" ||
		(root.Message != "create context" && root.Message != graph.RootMessage(rs)) {
		return time.Time{}, fmt.Errorf("%w: root commit %s is not a context's creation commit", ErrInvalid, root.ID.Short())
	}
	return at, nil
}

// zeroTimeError refuses commit c, stamped with the zero time: the store
// writes a commit or a context given the zero time at its clock's time, so
// it cannot write c again with its id.
func zeroTimeError(c *replay.Commit) error {
	return fmt.Errorf("%w: commit %s has time %q, the zero time, which this store takes for \"now\", so its id cannot be reproduced", ErrInvalid, c.ID.Short(), c.Time)
}

// importRoot creates the context with the bundle's root commit, checked
// by planImport (checkRoot) and created at.
func (s *Store) importRoot(ctx context.Context, ctxID, mode string, at time.Time, root *replay.Commit) error {
	if _, err := s.createContext(ctx, ctxID, mode, at, root.Message); err != nil {
		return err
	}
	got, err := s.Resolve(ctx, ctxID, DefaultBranch)
	if err != nil {
		return err
	}
	if got.ID != root.ID {
		return fmt.Errorf("%w: recreated root commit %s, the bundle has %s", ErrCorrupt, got.ID.Short(), root.ID.Short())
	}
	return nil
}
