package graph_test

import (
	"encoding/json"
	"fmt"

	"github.com/artifactd/artifactd/graph"
)

func exPut(id, typ, data string) graph.Op {
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, Data: json.RawMessage(data)}
}

func exLink(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to}
}

// A failed fetch quarantines what rests on it; in enforce mode a new edge
// to it is refused; a RETRIEVED re-fetch lifts the quarantine.
func ExampleTaintedLinks() {
	s := graph.NewState(nil)
	trust := graph.NewTrustIndex(s, graph.RoleBase(nil, nil))
	commit := func(enforce bool, ops ...graph.Op) {
		changes, err := s.ApplyOps(ops)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		if err := graph.CheckEnforce(s, trust, changes); err != nil && enforce {
			s.Undo(changes)
			fmt.Println("refused:", err)
			return
		}
		trust.Apply(s, changes)
	}

	commit(false,
		exPut("s1", "fetch_verdict", `{"reason":"transport.empty_body","verdict":"FAILED"}`),
		exPut("s3", "claim", `{"text":"Item 42 costs 19.99 USD"}`),
		exLink("s3", "derived_from", "s1"))
	fmt.Println(trust.Explain(s, "s3").Path, trust.Summary())

	commit(true, exPut("s6", "claim", `{"text":"18.39 EUR"}`), exLink("s6", "derived_from", "s3"))

	commit(false, exPut("s1", "fetch_verdict", `{"reason":"ok","verdict":"RETRIEVED"}`))
	fmt.Println(trust.Status("s3"), trust.Summary())
	// Output:
	// [s3 s1] {0 1 1}
	// refused: op 1: edge s6 -derived_from-> s3 rests on unconfirmed s3; poison root s1 (fetch_verdict FAILED (transport.empty_body)); path s6 -> s3 -> s1
	// confirmed {2 0 0}
}

// ComputeTrust reports every poison root with its blast radius and every
// quarantined artifact with its roots and one shortest path.
func ExampleComputeTrust() {
	s := graph.NewState(nil)
	if _, err := s.ApplyOps([]graph.Op{
		exPut("f", "fetch_verdict", `{"reason":"http.503","verdict":"FAILED"}`),
		exPut("q", "question", `{"text":"price?"}`),
		exPut("c", "claim", `{"text":"19.99"}`),
		exPut("a", "answer", `{"text":"It costs 19.99"}`),
		exLink("c", "derived_from", "f"),
		exLink("a", "supported_by", "c"),
		exLink("a", "responds_to", "q"),
	}); err != nil {
		panic(err)
	}
	out, _ := json.MarshalIndent(graph.ComputeTrust(s, graph.RoleBase(nil, nil)), "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "poison_roots": [
	//     {
	//       "id": "f",
	//       "reason": "fetch_verdict FAILED (http.503)",
	//       "blast_radius": 2
	//     }
	//   ],
	//   "quarantined": [
	//     {
	//       "id": "a",
	//       "status": "quarantined",
	//       "roots": [
	//         "f"
	//       ],
	//       "path": [
	//         "a",
	//         "c",
	//         "f"
	//       ]
	//     },
	//     {
	//       "id": "c",
	//       "status": "quarantined",
	//       "roots": [
	//         "f"
	//       ],
	//       "path": [
	//         "c",
	//         "f"
	//       ]
	//     }
	//   ],
	//   "blast_radius": 2,
	//   "confirmed": 1
	// }
}
