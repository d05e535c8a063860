package service

import (
	"fmt"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// TestClaimManyWorkersNoRefusal: 48 workers claim at once, two effects
// at a time, from an outbox of 400 pending effects until it is empty.
// None is refused while effects remain (claimers must not all fight over
// the same oldest effects and give up after a bounded number of lost
// rounds), no effect goes to two workers, and every effect is claimed.
func TestClaimManyWorkersNoRefusal(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	const effects, workers = 400, 48
	for i := range effects {
		if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: fmt.Sprint("k", i), Kind: "job"}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		holder  = map[string]string{}
		refused []error
		wg      sync.WaitGroup
	)
	for w := range workers {
		worker := fmt.Sprint("w", w)
		wg.Go(func() {
			for {
				cw, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: worker, Limit: 2})
				mu.Lock()
				if err != nil {
					refused = append(refused, err)
					mu.Unlock()
					return
				}
				for _, e := range cw.Effects {
					if other, dup := holder[e.ID]; dup {
						t.Errorf("effect %s claimed by %s and by %s", e.ID, other, worker)
					}
					holder[e.ID] = worker
				}
				mu.Unlock()
				if len(cw.Effects) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(refused) > 0 {
		t.Fatalf("%d claim(s) refused while effects were pending; the first: %v", len(refused), refused[0])
	}
	if len(holder) != effects {
		t.Fatalf("%d effects claimed, want %d", len(holder), effects)
	}
}

// TestClaimThatCannotWinNamesTheRule: a claim whose picked effects are
// changed by other writes every round, casAttempts times in a row, is
// refused with a 409 conflict whose errors entry names the body and the
// rule contended, and claims nothing.
func TestClaimThatCannotWinNamesTheRule(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	for i := range 3 {
		if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: fmt.Sprint("k", i), Kind: "job"}); err != nil {
			t.Fatal(err)
		}
	}
	round := 0
	// Another writer changes every pending effect (its updated_at) after
	// the claim read them and before it commits.
	s.claiming = func() {
		round++
		err := s.st.Read(ctx, "o", "", func(v *store.View) error {
			all, err := EffectsAt(v)
			if err != nil {
				return err
			}
			var ops []graph.Op
			for _, e := range all {
				d := e.EffectData
				d.UpdatedAt = fmt.Sprint("touched ", round)
				raw, err := canonicalData(d)
				if err != nil {
					return err
				}
				ops = append(ops, graph.Op{Op: graph.OpPut, ID: e.ID, Type: TypeEffect, ProducedBy: "outbox", Data: raw})
			}
			_, err = s.st.Commit(ctx, store.CommitRequest{Context: "o", Author: "other", Message: "touch", Ops: ops})
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}
	_, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "w", Limit: 2})
	fe := Classify(err)
	if fe.Code != fault.Conflict || len(fe.Errors) != 1 || fe.Errors[0].Pointer != "" || fe.Errors[0].Parameter != "" || fe.Errors[0].Rule != "contended" {
		t.Fatalf("a claim that never wins: %v %+v, want a conflict naming the body, rule contended", err, fe.Errors)
	}
	if round != casAttempts {
		t.Fatalf("the claim tried %d rounds, want %d", round, casAttempts)
	}
}
