package httpapi

import (
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// leaseTokenOf returns the lease token of a claim answer's only effect.
func leaseTokenOf(claim map[string]any) string {
	effs, _ := claim["effects"].([]any)
	if len(effs) != 1 {
		return ""
	}
	tok, _ := effs[0].(map[string]any)["lease_token"].(string)
	return tok
}

// TestLeaseTokens: complete and fail need the token of the current claim
// — a writer that only names the worker, or presents a token of an
// earlier claim, another effect or another server key, is refused and
// changes nothing — and the token is in no stored data, so the hash of
// the outbox does not depend on it.
func TestLeaseTokens(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withTestClock(clock))
	e.createContext("o", "")
	var ids []string
	for _, k := range []string{"k1", "k2"} {
		ids = append(ids, effect(e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": k, "kind": "webhook"}), 201))["id"].(string))
	}
	c1 := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200)
	tok1 := leaseTokenOf(c1)
	c2 := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200)
	tok2 := leaseTokenOf(c2)
	if !strings.HasPrefix(tok1, "lease_") || len(tok1) < 40 || tok1 == tok2 {
		t.Fatalf("tokens %q %q", tok1, tok2)
	}
	id := effect(map[string]any{"effect": c1["effects"].([]any)[0]})["id"].(string)
	other := ids[0]
	if other == id {
		other = ids[1]
	}
	if got := c2["effects"].([]any)[0].(map[string]any)["id"]; got != other {
		t.Fatalf("the second claim took %v, want the other effect %s", got, other)
	}
	before := e.hash("o")
	for name, body := range map[string]map[string]any{
		"no token":            {"worker": "W"},
		"empty token":         {"worker": "W", "lease_token": ""},
		"other effect's":      {"worker": "W", "lease_token": tok2},
		"made-up":             {"worker": "W", "lease_token": "lease_" + strings.Repeat("A", 43)},
		"token with a suffix": {"worker": "W", "lease_token": tok1 + "x"},
	} {
		for _, op := range []string{"complete", "fail"} {
			r := e.post("/v1/contexts/o/effects/"+id+"/"+op, body)
			if r.status != 403 || !strings.Contains(r.String(), "lease-token") || !strings.Contains(r.String(), `"pointer":"/lease_token"`) {
				t.Errorf("%s %s: %d %s", op, name, r.status, r.body)
			}
		}
	}
	if e.hash("o") != before {
		t.Fatal("a refused complete changed the state")
	}
	// The data of the claimed effect holds no token nor any hash of it.
	got := e.must(e.get("/v1/contexts/o/artifacts/"+id), 200)
	if s := string(marshalT(t, got)); strings.Contains(s, tok1) || strings.Contains(s, "lease_token") {
		t.Fatalf("the token reached the stored data: %s", s)
	}
	// A token of an earlier claim of the same effect is refused after a
	// retry and a new claim.
	e.must(e.post("/v1/contexts/o/effects/"+id+"/fail", map[string]any{"worker": "W", "lease_token": tok1, "retry": true}), 200)
	tok3 := leaseTokenOf(e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200))
	if tok3 == "" || tok3 == tok1 {
		t.Fatalf("re-claim token %q", tok3)
	}
	if r := e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "W", "lease_token": tok1}); r.status != 403 {
		t.Fatalf("an earlier claim's token: %d %s", r.status, r.body)
	}
	done := e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "W", "lease_token": tok3, "result": map[string]any{"ok": true}}), 200)
	// The idempotent repeat needs the same token too.
	if r := e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "W", "result": map[string]any{"ok": true}}); r.status != 403 {
		t.Fatalf("repeat without the token: %d %s", r.status, r.body)
	}
	if again := e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "W", "lease_token": tok3, "result": map[string]any{"ok": true}}), 200); again["commit"] != done["commit"] {
		t.Fatalf("repeat: %v", again)
	}
	// A server with another lease key (another process without the key
	// file) does not accept the token.
	e2 := newEnv(t, withTestClock(clock), withOptions(func(o *Options) { o.LeaseKey = []byte(strings.Repeat("k", 32)) }))
	e2.createContext("o", "")
	e2.must(e2.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k1", "kind": "webhook"}), 201)
	t2 := leaseTokenOf(e2.must(e2.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200))
	if t2 == tok1 {
		t.Fatal("two keys gave one token")
	}
}

// TestLeaseTokensKeepReplayDeterministic: two servers with different
// lease keys and the same clock run the same outbox session and reach the
// same context hash (tokens differ, state does not), and the chain
// replays to it.
func TestLeaseTokensKeepReplayDeterministic(t *testing.T) {
	var hashes, tokens []string
	for i, key := range []string{strings.Repeat("a", 32), strings.Repeat("b", 32)} {
		clock := newClock()
		e := newEnv(t, withTestClock(clock), withOptions(func(o *Options) { o.LeaseKey = []byte(key) }))
		e.createContext("o", "")
		e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k", "kind": "email"}), 201)
		c := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200)
		tok := leaseTokenOf(c)
		id := c["effects"].([]any)[0].(map[string]any)["id"].(string)
		e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "W", "lease_token": tok}), 200)
		h := e.must(e.get("/v1/contexts/o/hash"), 200)
		hashes, tokens = append(hashes, h["context_hash"].(string)), append(tokens, tok)
		head := mustDigest(t, h["commit"].(string))
		res, err := replay.Fold(t.Context(), e.st.Source("o"), head, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.State.Hash().String(); got != hashes[i] {
			t.Fatalf("replay %s, served %s", got, hashes[i])
		}
	}
	if hashes[0] != hashes[1] || tokens[0] == tokens[1] {
		t.Fatalf("hashes %v, tokens %v", hashes, tokens)
	}
}

func marshalT(t *testing.T, v any) []byte {
	t.Helper()
	b, err := marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDigest(t *testing.T, s string) hashing.Digest {
	t.Helper()
	d, err := hashing.ParseDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
