package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestReadAheadInParts: a request whose keys are read ahead in parts
// while it is decided finds, through the map, exactly what a walk of the
// trie finds; it reads no node twice (the driver is asked for as many
// keys as when every node is read before the decision begins); done
// stops the reads and waits for them; and when a part's read fails, the
// lookups read that part's nodes themselves, one call a node, and find
// what they must.
func TestReadAheadInParts(t *testing.T) {
	ctx := context.Background()
	d := &nodeCalls{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	var ops []graph.Op
	for i := range 3000 {
		ops = append(ops, notePut(fmt.Sprintf("a%04d", i), i, "x"))
	}
	c := mustCommit(t, s, "c", ops...)
	// Links to artifacts spread over the map, a sixth of them absent.
	var next []graph.Op
	for i := range 600 {
		next = append(next, link(fmt.Sprintf("n%03d", i), "derived_from", fmt.Sprintf("a%04d", (i*7919)%3600)))
	}
	plain := newMapSource(ctx, s, "c", c)
	keys := plain.aheadKeys(next)
	want := make([][]byte, len(keys))
	present := 0
	for i, k := range keys {
		v, err := trieGet(plain, plain.root, k.key)
		if err != nil {
			t.Fatal(err)
		}
		if want[i] = v; v != nil {
			present++
		}
	}
	if present == 0 || present == len(keys) {
		t.Fatalf("%d of %d keys present: the test wants both kinds", present, len(keys))
	}

	// lookups reads ahead for next with parts of part keys, looks every
	// key up, and returns how many keys it asked the driver for, and how
	// many later parts the reads had.
	lookups := func(part int) (reads int64, parts int) {
		t.Helper()
		s.aheadPart = part
		s.nodes.clear()
		before := d.keys.Load()
		m := newMapSource(ctx, s, "c", c)
		done, err := m.readAhead(next)
		if err != nil {
			t.Fatal(err)
		}
		win := m.ahead.Load()
		if win == nil {
			t.Fatal("nothing read ahead")
		}
		if win.later != nil {
			parts = len(win.later.parts)
		}
		for i, k := range keys {
			if got := m.get(k.key); !bytes.Equal(got, want[i]) || (got == nil) != (want[i] == nil) {
				t.Fatalf("parts of %d keys: %q is %q through the map, %q by a walk of the trie", part, k.key, got, want[i])
			}
		}
		if err := m.Err(); err != nil {
			t.Fatalf("parts of %d keys: %v", part, err)
		}
		done()
		if m.ahead.Load() != nil {
			t.Fatal("done left the nodes read ahead in place")
		}
		if win.later != nil {
			select {
			case <-win.later.ended:
			default:
				t.Fatal("done returned before the later reads ended")
			}
		}
		return d.keys.Load() - before, parts
	}
	whole, parts := lookups(aheadPart)
	if parts != 0 {
		t.Fatalf("%d keys read in %d later parts of %d keys each", len(keys), parts, aheadPart)
	}
	callsBefore := d.calls.Load()
	split, parts := lookups(100)
	if parts < 4 {
		t.Fatalf("%d keys read in %d later parts of 100: the test wants several", len(keys), parts)
	}
	if split != whole {
		t.Fatalf("read in parts, the lookups asked the driver for %d keys; read at once, %d", split, whole)
	}
	calls := d.calls.Load() - callsBefore

	// The same reads again, the last of them failing once: the nodes of
	// that part are read by the lookups that need them.
	// The failed call asked for no key; the lookups ask for its keys one
	// at a time.
	callsBefore = d.calls.Load()
	d.failCall.Store(callsBefore + calls)
	again, _ := lookups(100)
	if d.calls.Load() < d.failCall.Load() {
		t.Fatal("the read meant to fail was never made")
	}
	if again != whole || d.calls.Load()-callsBefore <= calls {
		t.Fatalf("after a failed part: %d keys in %d calls, want the %d keys of reads that all succeed in more than their %d calls", again, d.calls.Load()-callsBefore, whole, calls)
	}
}
