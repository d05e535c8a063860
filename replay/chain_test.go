package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// memChain is an in-memory commit chain with branches, built the way the
// store builds one (a root commit "create context", first parent = the
// branch head, explicit times), for tests that need a Source but no store.
type memChain struct {
	t       testing.TB
	commits map[hashing.Digest]*Commit
	ops     map[hashing.Digest][]graph.Op
	objects map[hashing.Digest][]byte
	states  map[hashing.Digest]*graph.State
	heads   map[string]hashing.Digest
	blobs   map[hashing.Digest][]byte
	seq     uint64
	clock   time.Time
	order   []*Commit
}

func newMemChain(t testing.TB) *memChain {
	m := &memChain{t: t, commits: map[hashing.Digest]*Commit{}, ops: map[hashing.Digest][]graph.Op{},
		objects: map[hashing.Digest][]byte{}, states: map[hashing.Digest]*graph.State{}, heads: map[string]hashing.Digest{},
		blobs: map[hashing.Digest][]byte{}, clock: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	st := graph.NewState(nil)
	root, err := NewCommit(nil, nil, st.Hash(), "artifactd", "create context", m.tick())
	if err != nil {
		t.Fatal(err)
	}
	m.record(root, nil, st)
	m.heads["main"] = root.ID
	return m
}

func (m *memChain) tick() string {
	m.clock = m.clock.Add(1500 * time.Microsecond)
	return hashing.FormatTime(m.clock)
}

func (m *memChain) record(c *Commit, ops []graph.Op, st *graph.State) {
	m.seq++
	c.Seq = m.seq
	c.Artifacts, c.Edges = st.NumArtifacts(), st.NumEdges()
	m.commits[c.ID] = c
	m.ops[c.ID] = ops
	m.states[c.ID] = st
	m.order = append(m.order, c)
}

// commit applies ops on branch (created from main's head when new) and
// returns the new commit; it fails the test when the ops do not apply or
// are all no-ops.
func (m *memChain) commit(branch string, ops ...graph.Op) *Commit {
	m.t.Helper()
	c, err := m.tryCommit(branch, nil, ops...)
	if err != nil {
		m.t.Fatalf("commit on %s: %v", branch, err)
	}
	return c
}

func (m *memChain) tryCommit(branch string, extra []hashing.Digest, ops ...graph.Op) (*Commit, error) {
	head, ok := m.heads[branch]
	if !ok {
		return nil, fmt.Errorf("no branch %q", branch)
	}
	st := m.states[head].Clone()
	changes, err := st.ApplyOps(ops)
	if err != nil {
		return nil, err
	}
	rec := graph.RecordedOps(changes)
	if len(rec) == 0 && len(extra) == 0 {
		return nil, fmt.Errorf("no-op commit")
	}
	for _, ch := range changes {
		if !ch.Noop && ch.Op.Op == graph.OpPut && ch.Op.Data != nil {
			m.objects[ch.Next.ContentHash] = ch.Op.Data
		}
	}
	c, err := NewCommit(append([]hashing.Digest{head}, extra...), rec, st.Hash(), "tester", "step", m.tick())
	if err != nil {
		return nil, err
	}
	m.record(c, rec, st)
	m.heads[branch] = c.ID
	return c, nil
}

func (m *memChain) branch(name, from string) {
	m.heads[name] = m.heads[from]
}

func (m *memChain) head(branch string) *Commit { return m.commits[m.heads[branch]] }

func (m *memChain) state(branch string) *graph.State { return m.states[m.heads[branch]] }

// merge merges theirs into ours the way Store.Merge does and returns the
// outcome; a three-way merge is committed with theirs as extra parent.
func (m *memChain) merge(ours, theirs string, res map[string]Resolution) (*MergeOutcome, error) {
	out, err := MergeCommits(context.Background(), m, m.heads[ours], m.heads[theirs], res, Options{})
	if err != nil {
		return nil, err
	}
	switch out.Kind {
	case MergeFastForward:
		m.heads[ours] = m.heads[theirs]
	case MergeThreeWay:
		c, err := m.tryCommit(ours, []hashing.Digest{out.Theirs.ID}, out.Plan.Ops...)
		if err != nil {
			return nil, fmt.Errorf("commit merge: %w", err)
		}
		if c.ContextHash != out.Plan.ContextHash {
			return nil, fmt.Errorf("merge commit hashes to %s, plan says %s", c.ContextHash, out.Plan.ContextHash)
		}
	}
	return out, nil
}

func (m *memChain) GetCommit(ctx context.Context, id hashing.Digest) (*Commit, error) {
	if c := m.commits[id]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("commit %s: not found", id.Short())
}

func (m *memChain) Ops(ctx context.Context, c *Commit) ([]graph.Op, error) { return m.ops[c.ID], nil }

func (m *memChain) Object(ctx context.Context, d hashing.Digest) ([]byte, error) {
	if b, ok := m.objects[d]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("object %s: not found", d.Short())
}

func (m *memChain) HasBlob(ctx context.Context, d hashing.Digest) (bool, error) {
	_, ok := m.blobs[d]
	return ok, nil
}

func (m *memChain) GetBlob(ctx context.Context, d hashing.Digest) ([]byte, error) {
	return m.blobs[d], nil
}

// ---- op helpers ----

func tPut(id, typ string, data any) graph.Op {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	canon, err := hashing.CanonicalizeObject(raw)
	if err != nil {
		panic(err)
	}
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, ProducedBy: "test", Data: canon}
}

func tDel(id string) graph.Op { return graph.Op{Op: graph.OpDelete, ID: id} }

func tLink(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to}
}

func tLinkAttrs(from, rel, to string, attrs any) graph.Op {
	raw, _ := json.Marshal(attrs)
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to, Attrs: raw}
}

func tUnlink(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpUnlink, From: from, Rel: rel, To: to}
}

func verdict(v string) map[string]any {
	return map[string]any{"verdict": v, "url": "https://example.org/" + v}
}

// statusOf returns a StatusFunc over a full trust pass of st (payloads in
// the state).
func statusOf(st *graph.State) StatusFunc {
	return graph.NewTrustIndex(st, graph.RoleBase(nil, nil)).Status
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
