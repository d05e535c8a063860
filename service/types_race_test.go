package service

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
)

// TestPutTypeWithoutRoleTakesTheRoleItFinds: a put of a type without a
// role, at the same time as a put of it with one, takes the role of the
// type as it finds it: derived when it creates the type, and then the put
// with the role is refused (a role change), or the other put's role when
// that put created it. It is never refused itself, as it was when it
// resolved derived before the other put created the type and was then
// refused as a role change (15 to 29 rounds of 300, in five runs under
// -race, before Registry.Put decided on the record it writes over). Nor
// is an identical put. The store and the registry hold the same record
// after each round.
func TestPutTypeWithoutRoleTakesTheRoleItFinds(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	schema := []byte(`{"type":"object"}`)
	const rounds = 300
	refusedWith := 0
	for round := range rounds {
		name := fmt.Sprintf("t%d", round)
		// The put with the role, two without and one identical to it.
		roles := []graph.Role{graph.RoleSource, "", "", graph.RoleSource}
		recs := make([]TypeRecord, len(roles))
		errs := make([]error, len(roles))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, role := range roles {
			wg.Go(func() {
				<-start
				recs[i], _, errs[i] = s.types.Put(ctx, s.st, name, role, "", schema)
			})
		}
		close(start)
		wg.Wait()
		final, ok := s.types.Get(name)
		if !ok {
			t.Fatalf("round %d: no type %s", round, name)
		}
		for i, err := range errs {
			if err == nil {
				if recs[i].Role != final.Role || recs[i].Version != 1 {
					t.Errorf("round %d: put %d (role %q) answered %s v%d; the type is %s v%d", round, i, roles[i], recs[i].Role, recs[i].Version, final.Role, final.Version)
				}
				continue
			}
			fe, _ := fault.As(err)
			switch {
			case roles[i] == "":
				t.Errorf("round %d: put %d without a role refused: %v (the type is %s)", round, i, err, final.Role)
			case fe == nil || fe.Code != fault.Conflict || final.Role == roles[i]:
				t.Errorf("round %d: put %d with role %s refused: %v (the type is %s)", round, i, roles[i], err, final.Role)
			default:
				refusedWith++
			}
		}
		raw, err := s.st.GetType(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		var stored TypeRecord
		if err := json.Unmarshal(raw, &stored); err != nil {
			t.Fatal(err)
		}
		if stored.Role != final.Role || stored.Version != final.Version || stored.SchemaHash != final.SchemaHash {
			t.Errorf("round %d: the store holds %s v%d, the registry %s v%d", round, stored.Role, stored.Version, final.Role, final.Version)
		}
	}
	t.Logf("%d rounds: %d puts with the role refused (the type created derived first)", rounds, refusedWith)
}
