package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/storetest"
)

// relationPut is one PUT /v1/relations/{name}.
type relationPut struct {
	depends bool
	desc    string
}

func (p relationPut) body() string {
	m := map[string]any{"depends": p.depends}
	if p.desc != "" {
		m["description"] = p.desc
	}
	raw, _ := json.Marshal(m)
	return string(raw)
}

// relationAnswer is what a PUT answered, or what a serial order of the
// same PUTs would have: the status and, on a 2xx, the record's depends,
// description and version.
type relationAnswer struct {
	status  int
	depends bool
	desc    string
	version int
}

func (a relationAnswer) String() string {
	if a.status/100 != 2 {
		return fmt.Sprint(a.status)
	}
	return fmt.Sprintf("%d depends=%t v%d %q", a.status, a.depends, a.version, a.desc)
}

// serialRelationPuts is what PUT /v1/relations/{name} answers, by
// docs/API.md, to puts made one after the other on a relation not yet
// registered, and the record it is left with: a create is 201 version 1;
// an update with another depends is 409 and changes nothing; the same
// description again is 200 and changes nothing; another is 200 and the
// next version.
func serialRelationPuts(puts []relationPut, order []int) ([]relationAnswer, *relationAnswer) {
	out := make([]relationAnswer, len(puts))
	var cur *relationAnswer
	for _, i := range order {
		p := puts[i]
		switch {
		case cur == nil:
			cur = &relationAnswer{status: 200, depends: p.depends, desc: p.desc, version: 1}
			out[i] = *cur
			out[i].status = 201
		case p.depends != cur.depends:
			out[i] = relationAnswer{status: 409}
		case p.desc == cur.desc:
			out[i] = *cur
		default:
			cur = &relationAnswer{status: 200, depends: cur.depends, desc: p.desc, version: cur.version + 1}
			out[i] = *cur
		}
	}
	return out, cur
}

// relationAnswerOf reads a PUT's or a GET's answer.
func relationAnswerOf(status int, body []byte) (relationAnswer, error) {
	a := relationAnswer{status: status}
	if status/100 != 2 {
		return a, nil
	}
	var rec service.RelationRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return a, fmt.Errorf("%d: %v: %s", status, err, body)
	}
	a.depends, a.desc, a.version = rec.Depends, rec.Description, rec.Version
	return a, nil
}

// TestConcurrentRelationPutsAreSerial: PUTs of one new relation at the
// same time answer what one serial order of them answers, and leave the
// relation (in the store, in every server's registry and in the
// definition a context records) as that order leaves it. Identical puts
// therefore all succeed, one of them 201; puts with different depends
// are refused 409 as a serial order refuses them (all but the first);
// puts of different descriptions all succeed, each a version. So on one
// server over its own store, on one over a shared database, and on two
// servers over one database taking the puts in turn.
func TestConcurrentRelationPutsAreSerial(t *testing.T) {
	t.Run("server", func(t *testing.T) { relationRace(t, 20, newEnv(t)) })
	// A put over a shared store read the whole registry again and could
	// put back a snapshot read before another put's write; and two
	// servers each decided on their own registry and wrote over each
	// other: two 201s, or a depends flipped under a 201 of the other.
	t.Run("shared", func(t *testing.T) {
		relationRace(t, 12, newEnv(t, withSharedDriver(storetest.Shared{LockingDriver: memkv.New()})))
	})
	t.Run("two-servers", func(t *testing.T) {
		d := storetest.Shared{LockingDriver: memkv.New()}
		relationRace(t, 12, newEnv(t, withSharedDriver(d)), newEnv(t, withSharedDriver(d)))
	})
}

// relationRace runs the puts of each case at the same time, put i on
// servers[i%len(servers)], for a new relation each of rounds, and checks
// every round against the serial orders of its puts.
func relationRace(t *testing.T, rounds int, servers ...*env) {
	cases := []struct {
		name string
		puts []relationPut
	}{
		{"same", []relationPut{{true, ""}, {true, ""}}},
		{"same4", []relationPut{{false, "d"}, {false, "d"}, {false, "d"}, {false, "d"}}},
		{"depends", []relationPut{{true, ""}, {false, ""}}},
		{"depends-same", []relationPut{{true, ""}, {false, ""}, {true, ""}}},
		{"depends-descs", []relationPut{{true, "a"}, {false, "b"}, {true, "c"}}},
		{"descs", []relationPut{{false, "one"}, {false, "two"}, {false, "three"}}},
	}
	e := servers[0]
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.createContext(c.name, "observe")
			path := "/v1/contexts/" + c.name + "/artifacts"
			e.must(e.post(path, map[string]any{"id": "target", "type": "note", "data": map[string]any{"text": "t"}}), 201)
			orders := permutations(len(c.puts))
			outcomes := map[string]int{}
			bad := 0
			for round := range rounds {
				name := fmt.Sprintf("r-%s-%d", c.name, round)
				got := make([]relationAnswer, len(c.puts))
				bodies := make([][]byte, len(c.puts))
				errs := make([]error, len(c.puts))
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i, p := range c.puts {
					wg.Go(func() {
						<-start
						status, body, err := putRaw(servers[i%len(servers)], "/v1/relations/"+name, p.body())
						if err == nil {
							got[i], err = relationAnswerOf(status, body)
						}
						bodies[i], errs[i] = body, err
					})
				}
				close(start)
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d put %d: %v", round, i, err)
					}
					if got[i].status == 409 && !strings.Contains(string(bodies[i]), `"immutable"`) {
						t.Errorf("round %d put %d: a 409 that is not a change of depends: %s", round, i, bodies[i])
					}
				}
				// The record the store holds.
				stored, err := e.st.ListRelations(context.Background())
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				final, err := relationAnswerOf(200, stored[name])
				if err != nil {
					t.Fatal(err)
				}
				// Every server records it as the relation's definition
				// when it next links with it (it reads the registry
				// again when another server changed it), and answers it
				// when asked after.
				var def map[string]any
				for i, srv := range servers {
					srv.must(srv.post(path, map[string]any{"id": fmt.Sprintf("a%d-%s", i, name), "type": "note",
						"data": map[string]any{"text": "x"}, "edges": []any{map[string]any{"rel": name, "to": "target"}}}), 201)
					d := srv.must(srv.get(path+"/"+url.PathEscape(graph.RelationDefID(name))), 200)
					if def != nil && d["content_hash"] != def["content_hash"] {
						t.Errorf("round %d: server %d records the definition %v, server 0 %v", round, i, d["content_hash"], def["content_hash"])
					}
					def = d
					r := srv.get("/v1/relations/" + name)
					if a, err := relationAnswerOf(r.status, r.body); err != nil || a != final {
						t.Errorf("round %d: server %d answers %v (%v), the store holds %v", round, i, a, err, final)
					}
				}

				var key []string
				for _, a := range got {
					key = append(key, fmt.Sprint(a.status))
				}
				sort.Strings(key)
				outcomes[strings.Join(key, ",")]++

				serial := false
				for _, o := range orders {
					want, wantFinal := serialRelationPuts(c.puts, o)
					if fmt.Sprint(want) != fmt.Sprint(got) || *wantFinal != final {
						continue
					}
					data, err := graph.RelationDef{Name: name, Depends: wantFinal.depends, Description: wantFinal.desc}.Data()
					if err != nil {
						t.Fatal(err)
					}
					if h := hashing.ContentHash(data).String(); def["content_hash"] != h {
						t.Errorf("round %d: recorded definition %v, want the content hash of %s (%s)", round, def["content_hash"], data, h)
					}
					serial = true
					break
				}
				if !serial {
					bad++
					if bad <= 3 {
						t.Errorf("round %d: the puts %v answered %v and left %v: no serial order of them does that", round, c.puts, got, final)
					}
				}
			}
			t.Logf("%d rounds of %d puts on %d server(s): outcomes %v; %d not serial", rounds, len(c.puts), len(servers), outcomes, bad)
			if bad > 0 {
				t.Errorf("%d of %d rounds answered what no serial order of the same puts answers", bad, rounds)
			}
		})
	}
}
