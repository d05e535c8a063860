package service

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/artifactd/artifactd/fault"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// CompareSide names one side of a comparison: a context and the commit
// its ref resolved to.
type CompareSide struct {
	Context     string         `json:"context"`
	Ref         string         `json:"ref,omitempty"`
	Commit      hashing.Digest `json:"commit"`
	ContextHash hashing.Digest `json:"context_hash"`
}

// Comparison is the body of GET /v1/compare and of `artifactd compare
// --json`: whether two runs reached the same state (their context hashes
// are equal) and, when not, where they diverge, grouped by producer.
type Comparison struct {
	Equal       bool                 `json:"equal"`
	A           CompareSide          `json:"a"`
	B           CompareSide          `json:"b"`
	Divergences []ProducerDivergence `json:"divergences"`
}

// ProducerDivergence is what differs among the artifacts of one producer
// (produced_by; "" when unset) and the edges leaving them. Every list is
// sorted and never nil.
type ProducerDivergence struct {
	Producer string `json:"producer"`
	// OnlyInA and OnlyInB are artifacts present on one side only.
	OnlyInA []ComparedArtifact `json:"only_in_a"`
	OnlyInB []ComparedArtifact `json:"only_in_b"`
	// Changed are artifacts with the same id whose content, type, version
	// or producer differ.
	Changed      []ChangedArtifact `json:"changed"`
	EdgesOnlyInA []graph.EdgeKey   `json:"edges_only_in_a"`
	EdgesOnlyInB []graph.EdgeKey   `json:"edges_only_in_b"`
	// EdgesChanged are edges on both sides whose attrs differ.
	EdgesChanged []ChangedEdge `json:"edges_changed"`
}

// ComparedArtifact is an artifact on one side of a comparison.
type ComparedArtifact struct {
	ID string `json:"id"`
	replay.ArtifactVersion
}

// ChangedArtifact is an artifact present on both sides that differs;
// Fields names what differs (content_hash, type, version, produced_by).
type ChangedArtifact struct {
	ID     string                 `json:"id"`
	Fields []string               `json:"fields"`
	A      replay.ArtifactVersion `json:"a"`
	B      replay.ArtifactVersion `json:"b"`
}

// ChangedEdge is an edge on both sides with different attrs (absent attrs
// are null).
type ChangedEdge struct {
	graph.EdgeKey
	AAttrs json.RawMessage `json:"a_attrs"`
	BAttrs json.RawMessage `json:"b_attrs"`
}

// Compare compares the states sa and sb of two runs. It is pure: a and b
// only label the sides. Artifacts are grouped by the producer on side a
// (on side b for artifacts only there); an edge by the producer of its
// from artifact. It visits both states whole; CompareRuns compares
// through the store's diff (CompareDiff).
func Compare(a, b CompareSide, sa, sb *graph.State) Comparison {
	if a.ContextHash == b.ContextHash {
		return CompareDiff(a, b, nil, nil)
	}
	producerOf := func(id string) string {
		if x := sa.Artifact(id); x != nil {
			return x.ProducedBy
		}
		if x := sb.Artifact(id); x != nil {
			return x.ProducedBy
		}
		return ""
	}
	return CompareDiff(a, b, replay.Diff(sa, sb, nil, nil), producerOf)
}

// CompareDiff is Compare given what differs between the two states
// (d, from a to b, without trust) and the producer of an artifact as side
// a has it, else as side b has it (producerOf, asked only about the from
// artifacts of edges that differ). It does no I/O. It takes d: each list
// it groups (all but Trust) is let go once grouped (set to nil), so that
// the comparison of two big runs does not hold the diff and the
// comparison at once.
// When the sides' context hashes are equal, d and producerOf are not
// used.
func CompareDiff(a, b CompareSide, d *replay.DiffResult, producerOf func(id string) string) Comparison {
	out := Comparison{Equal: a.ContextHash == b.ContextHash, A: a, B: b, Divergences: []ProducerDivergence{}}
	if out.Equal {
		return out
	}
	// Each group's lists are sized first: grown by append, the lists of
	// two big runs' comparison were garbage several times their size.
	sizes := groupSizes(d, producerOf)
	groups := map[string]*ProducerDivergence{}
	group := func(p string) *ProducerDivergence {
		g := groups[p]
		if g == nil {
			n := sizes[p]
			if n == nil {
				n = new([6]int)
			}
			g = &ProducerDivergence{Producer: p, OnlyInA: make([]ComparedArtifact, 0, n[0]), OnlyInB: make([]ComparedArtifact, 0, n[1]),
				Changed: make([]ChangedArtifact, 0, n[2]), EdgesOnlyInA: make([]graph.EdgeKey, 0, n[3]),
				EdgesOnlyInB: make([]graph.EdgeKey, 0, n[4]), EdgesChanged: make([]ChangedEdge, 0, n[5])}
			groups[p] = g
		}
		return g
	}
	for _, c := range d.Removed { // in a, not in b
		g := group(c.Old.ProducedBy)
		g.OnlyInA = append(g.OnlyInA, ComparedArtifact{ID: c.ID, ArtifactVersion: *c.Old})
	}
	d.Removed = nil
	for _, c := range d.Added { // in b, not in a
		g := group(c.New.ProducedBy)
		g.OnlyInB = append(g.OnlyInB, ComparedArtifact{ID: c.ID, ArtifactVersion: *c.New})
	}
	d.Added = nil
	for _, c := range d.Changed {
		var fields []string
		if c.Old.ContentHash != c.New.ContentHash {
			fields = append(fields, "content_hash")
		}
		if c.Old.ProducedBy != c.New.ProducedBy {
			fields = append(fields, "produced_by")
		}
		if c.Old.Type != c.New.Type {
			fields = append(fields, "type")
		}
		if c.Old.Version != c.New.Version {
			fields = append(fields, "version")
		}
		g := group(c.Old.ProducedBy)
		g.Changed = append(g.Changed, ChangedArtifact{ID: c.ID, Fields: fields, A: *c.Old, B: *c.New})
	}
	d.Changed = nil
	for _, e := range d.EdgesRemoved {
		g := group(producerOf(e.From))
		g.EdgesOnlyInA = append(g.EdgesOnlyInA, e.Key())
	}
	d.EdgesRemoved = nil
	for _, e := range d.EdgesAdded {
		g := group(producerOf(e.From))
		g.EdgesOnlyInB = append(g.EdgesOnlyInB, e.Key())
	}
	d.EdgesAdded = nil
	for _, e := range d.EdgesChanged {
		g := group(producerOf(e.From))
		g.EdgesChanged = append(g.EdgesChanged, ChangedEdge{EdgeKey: e.Key(), AAttrs: nullIfEmpty(e.OldAttrs), BAttrs: nullIfEmpty(e.NewAttrs)})
	}
	d.EdgesChanged = nil
	names := make([]string, 0, len(groups))
	for p := range groups {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		out.Divergences = append(out.Divergences, *groups[p])
	}
	return out
}

// groupSizes counts, by producer, the entries of each of a divergence's
// lists (in ProducerDivergence's order) that CompareDiff will make of d.
func groupSizes(d *replay.DiffResult, producerOf func(id string) string) map[string]*[6]int {
	sizes := map[string]*[6]int{}
	add := func(p string, list int) {
		n := sizes[p]
		if n == nil {
			n = new([6]int)
			sizes[p] = n
		}
		n[list]++
	}
	for _, c := range d.Removed {
		add(c.Old.ProducedBy, 0)
	}
	for _, c := range d.Added {
		add(c.New.ProducedBy, 1)
	}
	for _, c := range d.Changed {
		add(c.Old.ProducedBy, 2)
	}
	for i, l := range [][]replay.EdgeChange{d.EdgesRemoved, d.EdgesAdded, d.EdgesChanged} {
		for _, e := range l {
			add(producerOf(e.From), 3+i)
		}
	}
	return sizes
}

func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// ParseCompareSide splits "CTX[@REF]" into a context id and a ref ("" for
// main). param names the query parameter in errors.
func ParseCompareSide(param, v string) (ctxID, ref string, err error) {
	ctxID, ref, _ = strings.Cut(v, "@")
	if store.ValidateContextID(ctxID) != nil {
		return "", "", &fault.Error{Code: fault.InvalidQuery, Detail: param + " must be CTX or CTX@REF",
			Errors: []fault.FieldError{{Parameter: param, Rule: "context_ref", Detail: "want a context id, optionally followed by @ and a commit or branch"}}}
	}
	if err := CheckRef(param, ref); err != nil {
		return "", "", err
	}
	return ctxID, ref, nil
}

// CompareRuns resolves both sides in st and compares their states
// through the store's diff of their state maps (store.DiffStates), and
// holds no lock a committer needs while it works. Two refs of one
// context cost what differs between them; two contexts share little of
// their maps, and the diff reads most of both, a window at a time,
// holding its result (not the states, nor the nodes it read). The
// producer of an edge whose from artifact did not change is read at side
// a through its map (store.ReadSparse: a point lookup each, not the state
// loaded whole, unless its map predates format 3).
func CompareRuns(ctx context.Context, st *store.Store, ctxA, refA, ctxB, refB string) (Comparison, error) {
	ca, err := st.Resolve(ctx, ctxA, refA)
	if err != nil {
		return Comparison{}, nameSide(err, "a")
	}
	cb, err := st.Resolve(ctx, ctxB, refB)
	if err != nil {
		return Comparison{}, nameSide(err, "b")
	}
	a := CompareSide{Context: ctxA, Ref: refA, Commit: ca.ID, ContextHash: ca.ContextHash}
	b := CompareSide{Context: ctxB, Ref: refB, Commit: cb.ID, ContextHash: cb.ContextHash}
	if a.ContextHash == b.ContextHash {
		return CompareDiff(a, b, nil, nil), nil
	}
	d, err := st.DiffStates(ctx, ca, cb)
	if err != nil {
		return Comparison{}, err
	}
	producers, err := edgeProducers(ctx, st, d, ctxA, ca)
	if err != nil {
		return Comparison{}, err
	}
	return CompareDiff(a, b, d, func(id string) string { return producers[id] }), nil
}

// nameSide names param, the query parameter of a compare side, in the
// refusal of its resolution: its ref (NameRef), or its context — the
// parameter names the context too, unlike a read's ref — when that does
// not exist (rule exists).
func nameSide(err error, param string) error {
	var unknown *store.UnknownRefError
	if !errors.Is(err, store.ErrNotFound) || errors.As(err, &unknown) {
		return NameRef(err, param)
	}
	e := Classify(err)
	e.Errors = append(e.Errors, fault.FieldError{Parameter: param, Rule: RuleExists, Detail: "no context has this id"})
	return e
}

// edgeProducers returns the producer of the from artifact of every edge d
// names, as side a has it, else as side b has it: from d where the
// artifact differs (Removed and Changed as a has them, Added as b has
// it), else read at a — an artifact d does not name is the same on both
// sides, and the from artifact of an edge either side has exists there.
func edgeProducers(ctx context.Context, st *store.Store, d *replay.DiffResult, ctxA string, ca *replay.Commit) (map[string]string, error) {
	producers := map[string]string{}
	for _, l := range [][]replay.ArtifactChange{d.Removed, d.Changed} {
		for _, c := range l {
			producers[c.ID] = c.Old.ProducedBy
		}
	}
	for _, c := range d.Added {
		producers[c.ID] = c.New.ProducedBy
	}
	var same []string
	for _, l := range [][]replay.EdgeChange{d.EdgesRemoved, d.EdgesAdded, d.EdgesChanged} {
		for _, e := range l {
			if _, ok := producers[e.From]; !ok {
				producers[e.From] = ""
				same = append(same, e.From)
			}
		}
	}
	if len(same) == 0 {
		return producers, nil
	}
	err := st.ReadSparse(ctx, ctxA, ca, func(v *store.View) error {
		for _, id := range same {
			if x := v.State.Artifact(id); x != nil {
				producers[id] = x.ProducedBy
			}
		}
		return nil
	})
	return producers, err
}
