package replay

import (
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// Commit is one commit of a context's chain: the fields its id covers
// (HASHING.md §5) plus bookkeeping that the id does not cover (Seq, counts,
// the state-map root). A Commit value is immutable once recorded.
type Commit struct {
	ID          hashing.Digest   `json:"id"`
	Parents     []hashing.Digest `json:"parents"`
	ContextHash hashing.Digest   `json:"context_hash"`
	OpsHash     hashing.Digest   `json:"ops_hash"`
	Author      string           `json:"author"`
	Message     string           `json:"message"`
	Time        string           `json:"time"`

	// Seq is the commit's position in its context's insertion order
	// (1-based); parents always have a lower Seq.
	Seq uint64 `json:"seq"`
	// NumOps is the number of recorded ops.
	NumOps int `json:"ops"`
	// Artifacts and Edges count the state after the commit.
	Artifacts int `json:"artifacts"`
	Edges     int `json:"edges"`
	// Root and RootCount locate the commit's state map in the store; they
	// are derived data, checked by fsck, and not part of the id.
	Root      hashing.Digest `json:"root,omitempty"`
	RootCount int            `json:"root_count,omitempty"`
	// Index, when set, says the state map also holds the index a store
	// keeps to decide commits without loading the state whole (reverse
	// edges, trust entries), with the sizes it needs to open
	// it; like Root it is derived data, checked by fsck, not part of the
	// id. It is nil in a commit written before the store kept one.
	Index *MapIndex `json:"index,omitempty"`
}

// MapIndex are the sizes of the state after a commit that its state map's
// index does not count by itself: tombstones, poison roots, quarantined
// artifacts, and the live artifacts of each type in use.
type MapIndex struct {
	Tombstones  int            `json:"tombstones"`
	PoisonRoots int            `json:"poison_roots"`
	Quarantined int            `json:"quarantined"`
	Types       map[string]int `json:"types,omitempty"`
	// ReverseApart says the map holds no reverse edges: the store keeps
	// them in an index of the context's own, outside the versioned map,
	// where an edge is written once and never rewritten (store format 4).
	// A map without it holds an 'r' entry per edge.
	ReverseApart bool `json:"reverse_apart,omitempty"`
}

// Header returns the fields the commit id covers.
func (c *Commit) Header() hashing.CommitHeader {
	return hashing.CommitHeader{
		Parents:     c.Parents,
		ContextHash: c.ContextHash,
		OpsHash:     c.OpsHash,
		Author:      c.Author,
		Message:     c.Message,
		Time:        c.Time,
	}
}

// ComputeID recomputes the commit id from the header fields.
func (c *Commit) ComputeID() hashing.Digest { return hashing.CommitID(c.Header()) }

// FirstParent returns the first parent, or the zero digest for a root
// commit.
func (c *Commit) FirstParent() hashing.Digest {
	if len(c.Parents) == 0 {
		return hashing.Digest{}
	}
	return c.Parents[0]
}

// NewCommit builds the commit that records ops on top of parents, given the
// context hash of the resulting state. It computes ops_hash and the id.
func NewCommit(parents []hashing.Digest, ops []graph.Op, contextHash hashing.Digest, author, message, time string) (*Commit, error) {
	opsHash, _, err := graph.OpsHash(ops)
	if err != nil {
		return nil, err
	}
	if parents == nil {
		parents = []hashing.Digest{}
	}
	c := &Commit{Parents: parents, ContextHash: contextHash, OpsHash: opsHash, Author: author, Message: message, Time: time, NumOps: len(ops)}
	c.ID = c.ComputeID()
	return c, nil
}
