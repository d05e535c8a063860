package graph

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// Helpers shared by the trust, query, audit, render and eval tests. Names
// carry a tq prefix to stay clear of other test files in the package.

// tqBase is the base function of the tests: built-in roles, verdicts read
// from Data.
var tqBase = RoleBase(nil, nil)

// tqPut returns a put op with data {"n": id} (so distinct ids differ).
func tqPut(id, typ string) Op {
	return Op{Op: OpPut, ID: id, Type: typ, ProducedBy: "test", Data: json.RawMessage(`{"n":` + strconv.Quote(id) + `}`)}
}

// tqFetch returns a put of a fetch_verdict with the given verdict.
func tqFetch(id, verdict, reason string) Op {
	return tqPutData(id, "fetch_verdict", map[string]any{"verdict": verdict, "reason": reason, "url": "https://example.test/" + id})
}

// tqPutData returns a put with data marshalled from v (keys sorted by
// encoding/json, which is canonical for these simple values).
func tqPutData(id, typ string, v any) Op {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Op{Op: OpPut, ID: id, Type: typ, ProducedBy: "test", Data: data}
}

func tqLink(from, rel, to string) Op   { return Op{Op: OpLink, From: from, Rel: rel, To: to} }
func tqUnlink(from, rel, to string) Op { return Op{Op: OpUnlink, From: from, Rel: rel, To: to} }
func tqDel(id string) Op               { return Op{Op: OpDelete, ID: id} }

// tqApply applies ops as one commit and fails the test on error.
func tqApply(t testing.TB, s *State, ops ...Op) []Change {
	t.Helper()
	ch, err := s.ApplyOps(ops)
	if err != nil {
		t.Fatalf("ApplyOps: %v", err)
	}
	return ch
}

// tqBigState builds a random dependency DAG of n artifacts with about
// perNode dependency edges each, for benchmarks. It fills the state's maps
// directly: going through ApplyOps or Load would also maintain the context-hash
// accumulator, whose sorted-insert cost makes a million-artifact build take
// minutes, and benchmarks here measure trust, not hashing. The hash of the
// returned state is therefore wrong; nothing here reads it.
//
// Artifacts a0…a(n-1) are in topological order: 2% are fetch_verdicts
// (none of them FAILED), 1% questions, the rest claims resting on perNode
// uniformly random earlier artifacts, topped up to exactly perNode*n
// edges.
func tqBigState(n, perNode int, seed uint64) *State {
	r := rand.New(rand.NewPCG(seed, 0))
	s := NewState(nil)
	s.artifacts = make(map[string]*Artifact, n)
	s.edges = make(map[EdgeKey]*Edge, perNode*n)
	s.out = make(map[string]*edgeSet, n)
	s.in = make(map[string]*edgeSet, n)
	retrieved := json.RawMessage(`{"reason":"ok","verdict":"RETRIEVED"}`)
	rels := []string{"derived_from", "supported_by", "extracted_from"}
	// Few large allocations: the build dominates benchmark set-up time.
	ids := make([]string, n)
	arts := make([]Artifact, n)
	pool := make([]Edge, perNode*n)
	add := func(from, to string) {
		k := EdgeKey{From: from, Rel: rels[r.IntN(len(rels))], To: to}
		if s.edges[k] == nil {
			e := &pool[len(s.edges)]
			*e = Edge{From: k.From, Rel: k.Rel, To: k.To}
			tqRawEdge(s, e)
		}
	}
	for i := range n {
		ids[i] = "a" + strconv.Itoa(i)
		a := &arts[i]
		*a = Artifact{ID: ids[i], Version: 1, ProducedBy: "bench"}
		switch x := r.IntN(100); {
		case i < 10 || x < 2:
			a.Type, a.Data = "fetch_verdict", retrieved
		case x < 3:
			a.Type = "question"
		default:
			a.Type = "claim"
		}
		s.artifacts[a.ID] = a
		if a.Type != "claim" {
			continue
		}
		for range perNode {
			if len(s.edges) < len(pool) {
				add(a.ID, ids[r.IntN(i)])
			}
		}
	}
	// Top up to exactly perNode*n edges from random claims.
	for len(s.edges) < len(pool) {
		i := 10 + r.IntN(n-10)
		if arts[i].Type == "claim" {
			add(ids[i], ids[r.IntN(i)])
		}
	}
	tqRecount(s)
	return s
}

// tqRawEdge inserts e into the state's indexes without hashing or checks.
func tqRawEdge(s *State, e *Edge) {
	k := e.Key()
	if s.edges[k] != nil {
		return
	}
	s.edges[k] = e
	edgesAt(s.out, k.From).put(e)
	edgesAt(s.in, k.To).put(e)
	tqRecount(s)
}

// tqRecount sets the state's counts after its maps were written directly.
func tqRecount(s *State) {
	s.nArt, s.nTomb, s.nEdge = len(s.artifacts), len(s.tombstones), len(s.edges)
}

// tqPoison turns k random fetch_verdicts of a tqBigState FAILED (in
// place; no index follows the state yet).
func tqPoison(s *State, k int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	failed := json.RawMessage(`{"reason":"transport.empty_body","verdict":"FAILED"}`)
	var ids []string
	for len(ids) < k {
		id := "a" + strconv.Itoa(r.IntN(len(s.artifacts)))
		if a := s.artifacts[id]; a.Type == "fetch_verdict" && string(a.Data) != string(failed) {
			s.artifacts[id] = &Artifact{ID: id, Type: a.Type, Version: a.Version + 1, ProducedBy: a.ProducedBy, Data: failed}
			ids = append(ids, id)
		}
	}
	return ids
}

// tqDescribe renders a Trust on one line for test output.
func tqDescribe(tr Trust) string {
	switch tr.Status {
	case StatusPoisonRoot:
		return fmt.Sprintf("%s poison_root (%s)", tr.ID, tr.Reason)
	case StatusQuarantined:
		s := fmt.Sprintf("%s quarantined roots=%v path=%v", tr.ID, tr.Roots, tr.Path)
		if tr.PathTruncated {
			s += " truncated"
		}
		return s
	case "":
		return tr.ID + " (no such artifact)"
	}
	return fmt.Sprintf("%s %s", tr.ID, tr.Status)
}
