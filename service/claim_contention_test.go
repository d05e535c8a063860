package service

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
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

// TestFinishThatCannotWinNamesTheRule: a complete whose effect another
// writer changes after every read and puts back before the next, so that
// the lease token stays the claim's and only the compare-and-set loses,
// casAttempts times in a row, is refused with a 409 conflict ("kept
// changing") whose errors entry names the path parameter id, rule
// contended; it commits nothing, and once the other writer puts the
// claimed version back the effect is as the claim left it.
func TestFinishThatCannotWinNamesTheRule(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "job"}); err != nil {
		t.Fatal(err)
	}
	cw, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "w", LeaseSeconds: 60})
	if err != nil || len(cw.Effects) != 1 {
		t.Fatalf("claim: %v %+v", err, cw)
	}
	claimed := cw.Effects[0]
	id := claimed.ID
	var head hashing.Digest // main's head after the other writer's last commit
	put := func(d EffectData) {
		raw, err := canonicalData(d)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.st.Commit(ctx, store.CommitRequest{Context: "o", Author: "other", Message: "touch",
			Ops: []graph.Op{{Op: graph.OpPut, ID: id, Type: TypeEffect, ProducedBy: "outbox", Data: raw}}})
		if err != nil {
			t.Fatal(err)
		}
		head = res.Commit.ID
	}
	touched := claimed.EffectData
	touched.UpdatedAt = "touched"
	rounds := 0
	s.finishing = func(read bool) {
		switch {
		case read: // the complete has read the claimed version: change it
			rounds++
			put(touched)
		case rounds > 0: // put the claimed version back before the next read
			put(claimed.EffectData)
		}
	}
	_, err = s.CompleteEffect(ctx, "o", id, CompleteInput{Worker: "w", LeaseToken: claimed.LeaseToken, Result: json.RawMessage(`{"ok":true}`)})
	s.finishing = nil
	fe := Classify(err)
	if fe.Code != fault.Conflict || fe.Detail != fmt.Sprintf("effect %q kept changing; try again", id) {
		t.Fatalf("a complete that never wins: %v, want the conflict \"effect %q kept changing; try again\"", err, id)
	}
	if len(fe.Errors) != 1 || fe.Errors[0].Parameter != "id" || fe.Errors[0].Pointer != "" || fe.Errors[0].Rule != "contended" {
		t.Fatalf("errors %+v, want one entry naming the parameter id, rule contended", fe.Errors)
	}
	if rounds != casAttempts {
		t.Fatalf("the complete tried %d rounds, want %d", rounds, casAttempts)
	}
	// Nothing of the complete was committed: main is where the other
	// writer left it, and every commit since the claim (casAttempts
	// changes, casAttempts-1 put-backs) is the other's.
	main, err := s.st.Resolve(ctx, "o", "")
	if err != nil {
		t.Fatal(err)
	}
	if main.ID != head {
		t.Fatalf("main at %s, want the other writer's last commit %s", main.ID.Short(), head.Short())
	}
	log, err := s.st.Log(ctx, "o", main, 2*casAttempts)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2*casAttempts || log[len(log)-1].Author != "w" {
		t.Fatalf("%d commits, want the claim by w and %d by the other writer after it", len(log), 2*casAttempts-1)
	}
	for _, c := range log[:len(log)-1] {
		if c.Author != "other" {
			t.Fatalf("commit %s by %q after the claim: the refused complete wrote", c.ID.Short(), c.Author)
		}
	}
	put(claimed.EffectData)
	e, err := s.readEffect(ctx, "o", id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != EffectClaimed || e.ContentHash != claimed.ContentHash || e.Result != nil {
		t.Fatalf("effect %+v, want the claimed version %s", e, claimed.ContentHash.Short())
	}
}
