package replay_test

import (
	"errors"
	"fmt"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// exState applies ops to a copy of from (a new state when from is nil).
func exState(from *graph.State, ops ...graph.Op) *graph.State {
	st := graph.NewState(nil)
	if from != nil {
		st = from.Clone()
	}
	if _, err := st.ApplyOps(ops); err != nil {
		panic(err)
	}
	return st
}

func exPut(id, typ, data string) graph.Op {
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, Data: []byte(data)}
}

func ExampleMerge() {
	base := exState(nil, exPut("c", "claim", `{"text":"base"}`))
	ours := exState(base, exPut("c", "claim", `{"text":"ours"}`))
	theirs := exState(base, exPut("c", "claim", `{"text":"theirs"}`), exPut("n", "note", `{}`))

	// Both sides changed c: a conflict, reported with every other one, and
	// nothing merged.
	_, err := replay.Merge(base, ours, theirs, nil)
	var ce *replay.ConflictError
	if errors.As(err, &ce) {
		for _, c := range ce.Conflicts {
			fmt.Println(c.Key, c.Kind, "ours v", c.Ours.Version, "theirs v", c.Theirs.Version)
		}
	}

	// Resolved with theirs: c gets a version above both sides'.
	plan, err := replay.Merge(base, ours, theirs, map[string]replay.Resolution{"c": {Take: replay.TakeTheirs}})
	if err != nil {
		panic(err)
	}
	for _, op := range plan.Ops {
		fmt.Println(op.Op, op.ID, "v", op.Version)
	}
	// Output:
	// c edit_edit ours v 2 theirs v 2
	// put c v 3
	// put n v 1
}

func ExampleDiff() {
	from := exState(nil,
		exPut("f", "fetch_verdict", `{"verdict":"RETRIEVED"}`),
		exPut("a", "answer", `{"text":"42"}`),
		graph.Op{Op: graph.OpLink, From: "a", Rel: "supported_by", To: "f"})
	to := exState(from, exPut("f", "fetch_verdict", `{"verdict":"FAILED"}`))
	base := graph.RoleBase(nil, nil)
	d := replay.Diff(from, to, graph.NewTrustIndex(from, base).Status, graph.NewTrustIndex(to, base).Status)
	for _, c := range d.Changed {
		fmt.Println("changed", c.ID, c.Old.Version, "->", c.New.Version)
	}
	for _, t := range d.Trust {
		fmt.Println("trust", t.ID, t.Old, "->", t.New)
	}
	// Output:
	// changed f 1 -> 2
	// trust a confirmed -> quarantined
	// trust f confirmed -> poison_root
}
