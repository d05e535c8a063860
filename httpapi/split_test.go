package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomValue returns a JSON value of a random kind: what a mutation puts
// where a member was.
func randomValue(rng *rand.Rand) any {
	switch rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return rng.IntN(3) == 0
	case 2:
		return json.Number(fmt.Sprint(rng.IntN(100)))
	case 3:
		return ""
	case 4:
		return []any{"x"}
	case 5:
		return map[string]any{}
	case 6:
		return []string{"put", "delete", "link", "unlink", "frob", "PUT"}[rng.IntN(6)]
	}
	return "x"
}

// randomOp returns a commit op: valid of one of the four kinds, or one
// with a member removed, added, or of another kind of value, or not an
// object at all.
func randomOp(rng *rand.Rand) any {
	var op map[string]any
	switch rng.IntN(4) {
	case 0:
		art := map[string]any{"type": "note", "data": map[string]any{"text": "t"}}
		if rng.IntN(2) == 0 {
			art["id"] = fmt.Sprintf("a%d", rng.IntN(9))
		}
		if rng.IntN(3) == 0 {
			art["produced_by"] = "p"
		}
		op = map[string]any{"op": "put", "artifact": art}
	case 1:
		op = map[string]any{"op": "delete", "id": "a"}
	case 2:
		op = map[string]any{"op": "link", "from": "a", "rel": "cites", "to": "b"}
		if rng.IntN(3) == 0 {
			op["attrs"] = map[string]any{"w": json.Number("1")}
		}
	default:
		op = map[string]any{"op": "unlink", "from": "a", "rel": "cites", "to": "b"}
	}
	if rng.IntN(3) > 0 {
		return op
	}
	switch rng.IntN(6) {
	case 0: // not an object
		return randomValue(rng)
	case 1: // a member removed
		for k := range op {
			delete(op, k)
			break
		}
	case 2: // a member added, known to another kind or to none
		op[[]string{"id", "artifact", "from", "rel", "to", "attrs", "extra"}[rng.IntN(7)]] = randomValue(rng)
	case 3: // a member of another kind of value
		for k := range op {
			op[k] = randomValue(rng)
			break
		}
	case 4: // the artifact's members
		if art, ok := op["artifact"].(map[string]any); ok {
			art[[]string{"id", "type", "data", "produced_by", "version"}[rng.IntN(5)]] = randomValue(rng)
		} else {
			op["op"] = "put"
		}
	default: // another kind named
		op["op"] = randomValue(rng)
	}
	return op
}

// randomCommitRequest returns a commit request body of up to n ops,
// sometimes with a member of the request itself wrong.
func randomCommitRequest(rng *rand.Rand, n int) map[string]any {
	ops := make([]any, rng.IntN(n+1))
	for i := range ops {
		ops[i] = randomOp(rng)
	}
	req := map[string]any{"ops": ops}
	if rng.IntN(2) == 0 {
		req["branch"] = "main"
	}
	if rng.IntN(3) == 0 {
		req["parent"] = "sha256:" + strings.Repeat("ab", 32)
	}
	if rng.IntN(8) == 0 {
		req[[]string{"ops", "branch", "parent", "author", "message", "quarantine", "other"}[rng.IntN(7)]] = randomValue(rng)
	}
	return req
}

// parseDoc parses v's JSON as decodeCanonical does (decodeForTest).
func parseDoc(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := decodeForTest(string(b), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestSplitSchemaAgreesWithWhole checks, for thousands of commit request
// bodies from a grammar of valid and broken ops, that the split schema
// passes a body exactly when the whole schema does; and that the grammar
// makes enough of both for the check to mean something.
func TestSplitSchemaAgreesWithWhole(t *testing.T) {
	sp, whole := requestSplits["commit"], requestSchemas["commit"]
	rng := rand.New(rand.NewPCG(10, 20))
	valid, invalid := 0, 0
	for i := range 6000 {
		v := randomCommitRequest(rng, 1+i%6)
		doc := parseDoc(t, v)
		want := whole.lib.Validate(doc) == nil
		if got := sp.valid(doc); got != want {
			b, _ := json.Marshal(v)
			t.Fatalf("split says valid=%v, whole schema %v, for %s", got, want, b)
		}
		if want {
			valid++
		} else {
			invalid++
		}
	}
	if valid < 1000 || invalid < 1000 {
		t.Fatalf("%d valid and %d invalid bodies: the grammar does not exercise both", valid, invalid)
	}
	// Bodies big enough to be checked on several goroutines, valid or
	// with one op broken somewhere.
	for k := range 6 {
		ops := make([]any, 3*splitPartItems)
		for i := range ops {
			ops[i] = map[string]any{"op": "link", "from": "a", "rel": "cites", "to": fmt.Sprint(i)}
		}
		if k%2 == 1 {
			ops[rng.IntN(len(ops))] = map[string]any{"op": "link", "from": "a", "rel": "", "to": "b"}
		}
		doc := parseDoc(t, map[string]any{"ops": ops})
		if got, want := sp.valid(doc), whole.lib.Validate(doc) == nil; got != want || want != (k%2 == 0) {
			t.Fatalf("big body %d: split says valid=%v, whole schema %v", k, got, want)
		}
	}
}

// TestSplitSchemaRefusalsNameTheSamePointers checks that a refused body
// gets the problem of the whole schema: the split only ever passes.
func TestSplitSchemaRefusalsNameTheSamePointers(t *testing.T) {
	for _, body := range []string{
		`{"ops":[{"op":"put","artifact":{"id":"a","type":"note","data":{}}},{"op":"link","from":"a","rel":"cites"}]}`,
		`{"ops":[{"op":"frob"}]}`,
		`{"ops":[{"op":"delete","id":""},{"op":"unlink","from":"a","rel":"r","to":"b","attrs":{}}]}`,
		`{"ops":[7]}`,
		`{"ops":[],"other":1}`,
	} {
		var in CommitInput
		_, err := decodeCanonical([]byte(body), "commit", &in)
		if err == nil {
			t.Fatalf("%s: accepted", body)
		}
		doc := parseDoc(t, json.RawMessage(body))
		want := validateWhole("commit", doc)
		if fmt.Sprint(err) != fmt.Sprint(want) || fmt.Sprint(classify(err).Errors) != fmt.Sprint(classify(want).Errors) {
			t.Fatalf("%s: refusal %v %v; the whole schema's %v %v", body, err, classify(err).Errors, want, classify(want).Errors)
		}
		if len(classify(err).Errors) == 0 {
			t.Fatalf("%s: the refusal names no pointer", body)
		}
	}
}

// BenchmarkValidateCommitRequest validates the body of a bulk commit — n
// artifacts, each put and linked to an earlier one, as `artifactd bench
// --scenario big` sends them — against the whole commit schema and in
// parts (splitSchema).
func BenchmarkValidateCommitRequest(b *testing.B) {
	doc := parseDoc(b, bulkCommitRequest(5000))
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := validateWhole("commit", doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("split", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := validateRequest("commit", doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeCommitBody decodes, checks and validates a commit body as
// handleCommit does (decodeCanonical: canonical form, schema document,
// request schema, struct): one of 5,000 artifacts, each put and linked to
// an earlier one as `artifactd bench --scenario big` sends them, and one
// of a single artifact and its link.
func BenchmarkDecodeCommitBody(b *testing.B) {
	for _, n := range []int{5000, 1} {
		raw, err := json.Marshal(bulkCommitRequest(n))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("ops=%d", 2*n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				var in CommitInput
				if _, err := decodeCanonical(raw, "commit", &in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRequestSchemasFast lists the request schemas checked without the
// library's cost per value (schema.Fast): a schema change that loses its
// fast check should be a decision, not an accident. The whole commit
// schema ($ref, if/then) is checked through its split, whose parts all
// have one.
func TestRequestSchemasFast(t *testing.T) {
	slow := map[string]bool{"commit": true, "tool-result": true, "fetch": true, "claim": true}
	for name, rs := range requestSchemas {
		if got := rs.fast != nil; got == slow[name] {
			t.Errorf("request schema %q: fast check %v, want %v", name, got, !slow[name])
		}
	}
	sp := requestSplits["commit"]
	if sp.shape.fast == nil {
		t.Error("the commit schema's shape has no fast check")
	}
	for kind, rs := range sp.kinds {
		if rs.fast == nil {
			t.Errorf("commit op %q has no fast check", kind)
		}
	}
}

// bulkCommitRequest returns the body of a commit of n artifacts, each put
// and linked to an earlier one (derived_from), as `artifactd bench
// --scenario big` sends them.
func bulkCommitRequest(n int) map[string]any {
	ops := make([]any, 0, 2*n)
	for i := range n {
		ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": fmt.Sprintf("a%d", i), "type": "claim", "produced_by": "bench", "data": map[string]any{"text": fmt.Sprintf("claim a%d", i)}}},
			map[string]any{"op": "link", "from": fmt.Sprintf("a%d", i), "rel": "derived_from", "to": fmt.Sprintf("a%d", i/2)})
	}
	return map[string]any{"author": "bench", "message": "bulk", "ops": ops}
}
