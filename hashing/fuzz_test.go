package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"
)

// canonSeeds are handwritten corner cases added to every Canonicalize fuzz
// run, besides the vectors and testdata/fuzz/FuzzCanonicalize.
var canonSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1e21`, `1e20`, `9007199254740992`, `9007199254740993`,
	`{"\ud83d\ude00":1,"\ue000":2}`, `"\u0000\u001f\u007f"`, `[1,[2,[3,{"a":[]}]]]`,
	`{"a":1,"a":2}`, `"\ud800"`, `1e999`, `[1,]`, " \t\n{\"b\" : 1 , \"a\" : 2}\r\n",
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	for _, name := range jcsFiles(f) {
		b, err := os.ReadFile(filepath.Join(jcsDir, name+".input.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	v := loadVectors(f)
	for _, s := range v.States {
		for i, a := range s.Artifacts {
			if i < 5 { // the big state would only repeat itself
				f.Add([]byte(a.Data))
			}
		}
	}
	for _, r := range v.MustReject {
		f.Add(mustRejectInput(f, r.Why, r.JSON, r.JSONBase64))
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			checkCanonError(t, in, err)
			return
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("output %q of %q is not valid UTF-8 JSON", out, in)
		}
		if !json.Valid(in) {
			t.Fatalf("accepted %q, which encoding/json rejects", in)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent on %q:\n once  %q\n twice %q, %v", in, out, again, err)
		}
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("meaning changed:\n in  %q\n out %q", in, out)
		}
	})
}

// checkCanonError fails t unless err is a well-formed refusal of in.
func checkCanonError(t *testing.T, in []byte, err error) {
	t.Helper()
	var ce *CanonError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T (%v) is not a *CanonError", err, err)
	}
	n := 0
	for _, s := range allSentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 || ce.Detail == "" {
		t.Fatalf("error %v matches %d sentinels, detail %q", err, n, ce.Detail)
	}
	if ce.Offset < 0 || ce.Offset > len(in) {
		t.Fatalf("offset %d outside the input (%d bytes)", ce.Offset, len(in))
	}
	if errors.Is(err, ErrSyntax) && json.Valid(in) {
		t.Fatalf("syntax error %v for %q, which encoding/json accepts", err, in)
	}
	if errors.Is(err, ErrNotObject) {
		t.Fatalf("Canonicalize returned ErrNotObject")
	}
}

// FuzzAccumulator runs a script of operations against an Accumulator and a
// plain set; every byte triple is (op, leaf index high, leaf index low).
// The accumulator takes a mark every 1 to 4 leaves (by the script's
// length), so that re-hashes resume from marks, and every mark is checked
// against its bucket.
func FuzzAccumulator(f *testing.F) {
	pool := fuzzLeafPool(f)
	// Seeds: build each vector state, then remove half of it.
	for si := range 4 {
		var script []byte
		start, end := vectorStateRange(f, si)
		for i := start; i < end; i++ {
			script = append(script, 0, byte(i>>8), byte(i))
		}
		for i := start; i < end; i += 2 {
			script = append(script, 1, byte(i>>8), byte(i))
		}
		f.Add(append(script, 2, 0, 0))
	}
	f.Add([]byte{0, 0, 1, 3, 0, 0, 0, 0, 2, 1, 0, 1, 2, 0, 0})

	f.Fuzz(func(t *testing.T, script []byte) {
		a := withSpan(1 + len(script)%4)
		m := model{}
		type snapshot struct {
			acc  *Accumulator
			want Digest
		}
		var snaps []snapshot
		for i := 0; i+2 < len(script); i += 3 {
			l := pool[(int(script[i+1])<<8|int(script[i+2]))%len(pool)]
			switch script[i] % 7 {
			case 0:
				if a.Add(l) == m[l] {
					t.Fatalf("op %d: Add result wrong", i/3)
				}
				m[l] = true
			case 1:
				if a.Remove(l) != m[l] {
					t.Fatalf("op %d: Remove result wrong", i/3)
				}
				delete(m, l)
			case 2:
				if a.Root() != ContextHash(m.leaves()) {
					t.Fatalf("op %d: Root differs from ContextHash", i/3)
				}
			case 3:
				if len(snaps) < 8 {
					c := a.Clone()
					snaps = append(snaps, snapshot{c, ContextHash(m.leaves())})
				}
			case 4:
				if a.Has(l) != m[l] {
					t.Fatalf("op %d: Has wrong", i/3)
				}
			case 5: // a commit: a fork adds l, drops its neighbour, is absorbed
				fk := a.Fork()
				n := pool[(int(script[i+1])<<8|int(script[i+2])+1)%len(pool)]
				fk.Add(l)
				m[l] = true
				fk.Remove(n)
				delete(m, n)
				if script[i+2]%2 == 0 {
					fk.Root()
				}
				a.Absorb(fk)
			case 6:
				checkMarks(t, fmt.Sprintf("op %d", i/3), a)
			}
		}
		if a.Len() != len(m) || a.Root() != ContextHash(m.leaves()) {
			t.Fatal("final state differs from the model")
		}
		for i, s := range snaps {
			if s.acc.Root() != s.want {
				t.Fatalf("clone %d changed after later operations", i)
			}
		}
	})
}

// fuzzLeafPool returns the leaves of the vector states followed by leaves
// crowded into a few buckets.
func fuzzLeafPool(tb testing.TB) []Digest {
	var pool []Digest
	for _, s := range loadVectors(tb).States {
		for _, h := range s.Expect.Leaves {
			d, err := ParseDigest("sha256:" + h)
			if err != nil {
				tb.Fatal(err)
			}
			pool = append(pool, d)
		}
	}
	for i := range 512 {
		pool = append(pool, leafN(i, 3))
	}
	return pool
}

// vectorStateRange returns where state si's leaves are in fuzzLeafPool.
func vectorStateRange(tb testing.TB, si int) (start, end int) {
	states := loadVectors(tb).States
	for i := range si {
		start += len(states[i].Expect.Leaves)
	}
	return start, start + len(states[si].Expect.Leaves)
}
