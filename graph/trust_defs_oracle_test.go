package graph

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestTrustWithDefinitionsMatchesReplay is the oracle of trust from the
// chain. Random small commits — puts of built-in and user types (some
// before their type is defined), links with built-in and user relations,
// unlinks, deletes, fetch verdicts, type and relation definitions (new
// ones, changed schemas, attempts to change a role or a depends flag) —
// are decided as the store decides them: on a fork of the head, judged
// by ApplyTainted on a fork of its index with the base of the state being
// judged, and kept (both forks absorbed) or dropped as an enforce refusal
// would. After each, the incremental index must equal a full pass over
// the head and the trust of a fresh state that replays every kept
// commit's ops from the context's root: trust is a function of the chain.
func TestTrustWithDefinitionsMatchesReplay(t *testing.T) {
	seeds, commits := 60, 60
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		tdRandomRun(t, uint64(seed), commits)
	}
}

func tdRandomRun(t *testing.T, seed uint64, commits int) {
	r := rand.New(rand.NewPCG(seed, 7))
	baseOf := func(st *State) BaseFunc { return st.Base(nil) }
	head := NewStateFor(nil)
	idx := NewTrustIndexFor(head, baseOf)
	var chain [][]Op // the ops of each kept commit, with their data
	nids := 6 + r.IntN(12)
	id := func() string { return "n" + strconv.Itoa(r.IntN(nids)) }
	existing := func() string {
		if ids := head.ArtifactIDs(); len(ids) > 0 && r.IntN(8) > 0 {
			for range 4 {
				if x := ids[r.IntN(len(ids))]; !IsDefinitionType(head.Artifact(x).Type) {
					return x
				}
			}
		}
		return id()
	}
	userTypes := []string{"table", "ledger", "probe"}
	types := append([]string{"claim", "answer", "question", "tool_error"}, userTypes...)
	userRels := []string{"feeds", "notes"}
	rels := append([]string{"derived_from", "uses", "mentions"}, userRels...)
	roles := []Role{RoleSource, RoleDerived, RoleNever}
	putOp := func(x string) Op {
		if r.IntN(4) == 0 {
			v := [...]string{"RETRIEVED", "RETRIEVED", "FAILED", "UNKNOWN"}[r.IntN(4)]
			return tqFetch(x, v, "r"+strconv.Itoa(r.IntN(2)))
		}
		return tqPutData(x, types[r.IntN(len(types))], map[string]any{"v": r.IntN(3)})
	}
	defOp := func() Op {
		if r.IntN(2) == 0 {
			d := TypeDef{Name: userTypes[r.IntN(len(userTypes))], Role: roles[r.IntN(len(roles))]}
			if r.IntN(2) == 0 {
				d.Schema = []byte(`{"type":"object","x-v":` + strconv.Itoa(r.IntN(3)) + `}`)
			}
			data, err := d.Data()
			if err != nil {
				t.Fatal(err)
			}
			return Op{Op: OpPut, ID: TypeDefID(d.Name), Type: TypeTypeDef, ProducedBy: "artifactd", Data: data}
		}
		d := RelationDef{Name: userRels[r.IntN(len(userRels))], Depends: r.IntN(2) == 0, Description: "d" + strconv.Itoa(r.IntN(2))}
		data, err := d.Data()
		if err != nil {
			t.Fatal(err)
		}
		return Op{Op: OpPut, ID: RelationDefID(d.Name), Type: TypeRelationDef, ProducedBy: "artifactd", Data: data}
	}
	kept := 0
	for c := range commits {
		var ops []Op
		unlinked := map[EdgeKey]bool{}
		for range 1 + r.IntN(4) {
			switch k := r.IntN(12); {
			case k < 2:
				ops = append(ops, defOp())
			case k < 5:
				ops = append(ops, putOp(id()))
			case k < 9:
				ops = append(ops, tqLink(existing(), rels[r.IntN(len(rels))], existing()))
			case k < 11:
				if es := head.Edges(); len(es) > 0 {
					if e := es[r.IntN(len(es))]; !unlinked[e.Key()] {
						unlinked[e.Key()] = true
						ops = append(ops, tqUnlink(e.From, e.Rel, e.To))
					}
				}
			default:
				x := existing()
				for _, e := range append(head.Out(x), head.In(x)...) {
					if !unlinked[e.Key()] {
						unlinked[e.Key()] = true
						ops = append(ops, tqUnlink(e.From, e.Rel, e.To))
					}
				}
				ops = append(ops, tqDel(x))
			}
		}
		next := head.Fork()
		ch, err := next.ApplyOps(ops)
		if err != nil {
			continue // refused: the fork is dropped, the head is as it was
		}
		fork := idx.Fork()
		tainted := fork.ApplyTainted(next, ch)
		if len(tainted) > 0 && r.IntN(2) == 0 {
			continue // an enforce refusal: both forks are dropped
		}
		if err := head.Absorb(next); err != nil {
			t.Fatal(err)
		}
		if err := idx.Absorb(fork); err != nil {
			t.Fatal(err)
		}
		var recorded []Op
		for _, c := range ch {
			if !c.Noop {
				recorded = append(recorded, c.Op)
			}
		}
		chain = append(chain, recorded)
		kept++
		if err := idx.Verify(head); err != nil {
			t.Fatalf("seed %d commit %d (%v): %v", seed, c, ops, err)
		}
		replayed := NewStateFor(nil)
		for i, ops := range chain {
			if _, err := replayed.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d commit %d: replaying kept commit %d: %v", seed, c, i, err)
			}
		}
		full := ComputeTrust(replayed, replayed.Base(nil))
		for _, x := range head.ArtifactIDs() {
			if got, want := idx.Explain(head, x), full.Trust(x); got.Status != want.Status || got.Reason != want.Reason {
				t.Fatalf("seed %d commit %d: %s incremental %s, replayed chain %s", seed, c, x, tqDescribe(got), tqDescribe(want))
			}
		}
		if got, want := idx.Summary(), (TrustSummary{Confirmed: full.Confirmed, Quarantined: full.BlastRadius, PoisonRoots: len(full.PoisonRoots)}); got != want {
			t.Fatalf("seed %d commit %d: summary %+v, replayed chain %+v", seed, c, got, want)
		}
	}
	if kept < commits/5 {
		t.Fatalf("seed %d: only %d of %d commits kept; the generator is too weak", seed, kept, commits)
	}
}
