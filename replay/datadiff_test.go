package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

func TestDataDiffTable(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     []string // "kind pointer old new"
	}{
		{"equal", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, nil},
		{"number spelling is not a change", `{"n":1.0}`, `{"n":1}`, nil},
		{"scalar changed", `{"price":"16.55 EUR"}`, `{"price":"18.20 EUR"}`, []string{`changed /price "16.55 EUR" "18.20 EUR"`}},
		{"member added and removed", `{"a":1,"c":3}`, `{"a":1,"b":2}`, []string{`added /b - 2`, `removed /c 3 -`}},
		{"nested", `{"r":{"status":200,"url":"u"}}`, `{"r":{"status":404,"url":"u"}}`, []string{`changed /r/status 200 404`}},
		{"kind change", `{"x":{"a":1}}`, `{"x":[1]}`, []string{`changed /x {"a":1} [1]`}},
		{"array grows", `{"l":[1,2]}`, `{"l":[1,2,3,4]}`, []string{`added /l/2 - 3`, `added /l/3 - 4`}},
		{"array shrinks", `{"l":[1,2,3]}`, `{"l":[9]}`, []string{`changed /l/0 1 9`, `removed /l/1 2 -`, `removed /l/2 3 -`}},
		{"pointer escaping", `{"a/b":1,"m~n":1}`, `{"a/b":2,"m~n":2}`, []string{`changed /a~1b 1 2`, `changed /m~0n 1 2`}},
		{"empty key", `{"":1}`, `{"":2}`, []string{`changed / 1 2`}},
		{"null is a value", `{"a":null}`, `{}`, []string{`removed /a null -`}},
		{"root scalar", `1`, `2`, []string{`changed  1 2`}},
		{"old absent", ``, `{"b":1,"a":2}`, []string{`added /a - 2`, `added /b - 1`}},
		{"new absent", `{"a":1}`, ``, []string{`removed /a 1 -`}},
		{"both absent", ``, ``, nil},
		{"hostile strings stay data", `{"t":"<script>x</script>"}`, `{"t":"</svg>"}`, []string{`changed /t "\u003cscript\u003ex\u003c/script\u003e" "\u003c/svg\u003e"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DataDiff([]byte(c.old), []byte(c.new))
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, ch := range got {
				lines = append(lines, ch.Kind+" "+ch.Pointer+" "+show(ch.Old)+" "+show(ch.New))
			}
			// The hostile case compares through JSON escaping, so the
			// table stays plain ASCII.
			for i := range lines {
				lines[i] = strings.NewReplacer("<", `\u003c`, ">", `\u003e`).Replace(lines[i])
			}
			if fmt.Sprint(lines) != fmt.Sprint(c.want) {
				t.Errorf("DataDiff(%s, %s):\n got %q\nwant %q", c.old, c.new, lines, c.want)
			}
		})
	}
}

func show(v json.RawMessage) string {
	if v == nil {
		return "-"
	}
	return string(v)
}

func TestDataDiffRejectsNonJSON(t *testing.T) {
	for _, c := range [][2]string{{`{`, `{}`}, {`{}`, `{"a":}`}, {`nope`, `{}`}} {
		if _, err := DataDiff([]byte(c[0]), []byte(c[1])); err == nil {
			t.Errorf("DataDiff(%q, %q): no error", c[0], c[1])
		}
	}
}

// TestDataDiffProperties checks, over random pairs of related documents:
// applying the changes to old gives new (an oracle: a plain pointer
// patcher); diffing a document with itself gives nothing; and the diff
// from new to old mirrors the diff from old to new.
func TestDataDiffProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 2026))
	for i := range 2000 {
		old := randValue(r, 0)
		oldRaw, _ := json.Marshal(map[string]any{"doc": old, "k": i})
		newV := mutate(r, decode(t, oldRaw))
		newRaw, _ := json.Marshal(newV)

		d, err := DataDiff(oldRaw, newRaw)
		if err != nil {
			t.Fatal(err)
		}
		patched := apply(t, decode(t, oldRaw), d)
		if !sameJSON(t, patched, newV) {
			t.Fatalf("case %d: patching %s with %+v gives %v, want %s", i, oldRaw, d, patched, newRaw)
		}
		if self, _ := DataDiff(oldRaw, oldRaw); len(self) != 0 {
			t.Fatalf("case %d: self diff %+v", i, self)
		}
		back, err := DataDiff(newRaw, oldRaw)
		if err != nil {
			t.Fatal(err)
		}
		if len(back) != len(d) {
			t.Fatalf("case %d: %d changes forward, %d back", i, len(d), len(back))
		}
		for j := range d {
			f, b := d[j], back[j]
			mirror := map[string]string{DataAdded: DataRemoved, DataRemoved: DataAdded, DataChanged: DataChanged}
			if f.Pointer != b.Pointer || mirror[f.Kind] != b.Kind || !bytes.Equal(f.Old, b.New) || !bytes.Equal(f.New, b.Old) {
				t.Fatalf("case %d: forward %+v does not mirror back %+v", i, f, b)
			}
		}
	}
}

func decode(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	ca, err1 := hashing.Canonicalize(ra)
	cb, err2 := hashing.Canonicalize(rb)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

var keys = []string{"a", "b", "text", "a/b", "m~n", "", "é"}

func randValue(r *rand.Rand, depth int) any {
	n := r.IntN(7)
	if depth > 3 {
		n = r.IntN(4)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return r.IntN(3) == 0
	case 2:
		return r.IntN(100)
	case 3:
		return "s" + strconv.Itoa(r.IntN(5))
	case 4, 5:
		m := map[string]any{}
		for range r.IntN(4) {
			m[keys[r.IntN(len(keys))]] = randValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randValue(r, depth+1)
		}
		return l
	}
}

// mutate changes a decoded document in a few random places.
func mutate(r *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			switch r.IntN(6) {
			case 0:
				delete(x, k)
			case 1:
				x[k] = randValue(r, 2)
			default:
				x[k] = mutate(r, c)
			}
		}
		if r.IntN(3) == 0 {
			x[keys[r.IntN(len(keys))]] = randValue(r, 2)
		}
		return x
	case []any:
		for i := range x {
			x[i] = mutate(r, x[i])
		}
		switch r.IntN(4) {
		case 0:
			if len(x) > 0 {
				x = x[:r.IntN(len(x))]
			}
		case 1:
			x = append(x, randValue(r, 3))
		}
		return x
	}
	if r.IntN(4) == 0 {
		return randValue(r, 3)
	}
	return v
}

// removedMark stands for an array element a change removed.
type removedMark struct{}

// apply is the oracle: a deliberately plain JSON-pointer patcher.
func apply(t *testing.T, doc any, changes []DataChange) any {
	t.Helper()
	for _, c := range changes {
		var val any
		if c.Kind != DataRemoved {
			val = decode(t, c.New)
		}
		if c.Pointer == "" {
			doc = val
			continue
		}
		toks := strings.Split(c.Pointer[1:], "/")
		for i := range toks {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
		}
		doc = setAt(t, doc, toks, c.Kind, val)
	}
	return compact(doc)
}

func setAt(t *testing.T, cur any, toks []string, kind string, val any) any {
	t.Helper()
	tok := toks[0]
	switch x := cur.(type) {
	case map[string]any:
		if len(toks) == 1 {
			if kind == DataRemoved {
				delete(x, tok)
			} else {
				x[tok] = val
			}
			return x
		}
		x[tok] = setAt(t, x[tok], toks[1:], kind, val)
		return x
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil {
			t.Fatalf("bad index %q", tok)
		}
		if len(toks) == 1 {
			switch {
			case kind == DataRemoved:
				x[i] = removedMark{}
			case i == len(x):
				x = append(x, val)
			default:
				x[i] = val
			}
			return x
		}
		x[i] = setAt(t, x[i], toks[1:], kind, val)
		return x
	}
	t.Fatalf("pointer through a scalar at %q", tok)
	return nil
}

func compact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			x[k] = compact(c)
		}
	case []any:
		out := x[:0]
		for _, c := range x {
			if _, gone := c.(removedMark); !gone {
				out = append(out, compact(c))
			}
		}
		return out
	}
	return v
}
