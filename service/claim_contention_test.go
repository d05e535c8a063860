package service

import (
	"fmt"
	"sync"
	"testing"
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
