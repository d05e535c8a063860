package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// notesAndLinks commits notes a0000… to context "c" of s, and returns
// the commit and 600 links from new artifacts to a%04d of i*7919 mod
// targets for the i-th link (targets above notes name absent ones).
func notesAndLinks(t *testing.T, s *Store, notes, targets int) (*replay.Commit, []graph.Op) {
	t.Helper()
	var ops []graph.Op
	for i := range notes {
		ops = append(ops, notePut(fmt.Sprintf("a%04d", i), i, "x"))
	}
	c := mustCommit(t, s, "c", ops...)
	var links []graph.Op
	for i := range 600 {
		links = append(links, link(fmt.Sprintf("n%03d", i), "derived_from", fmt.Sprintf("a%04d", (i*7919)%targets)))
	}
	return c, links
}

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
	// Links to artifacts spread over the map, a sixth of them absent.
	c, next := notesAndLinks(t, s, 3000, 3600)
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
	// many later parts the reads had. With settle the lookups begin once
	// the later reads have ended, so the count is exact: a lookup that
	// outruns the reads by a part reads its key's nodes itself, and when
	// the reads reach that part at the same moment they read them too.
	lookups := func(part int, settle bool) (reads int64, parts int) {
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
			if settle {
				<-win.later.ended
			}
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
	whole, parts := lookups(aheadPart, true)
	if parts != 0 {
		t.Fatalf("%d keys read in %d later parts of %d keys each", len(keys), parts, aheadPart)
	}
	callsBefore := d.calls.Load()
	split, parts := lookups(100, true)
	if parts < 4 {
		t.Fatalf("%d keys read in %d later parts of 100: the test wants several", len(keys), parts)
	}
	if split != whole {
		t.Fatalf("read in parts, the lookups asked the driver for %d keys; read at once, %d", split, whole)
	}
	calls := d.calls.Load() - callsBefore
	// The lookups racing the reads find the same, and read again at most
	// the path of one key a part (a leaf and the branch above it).
	if racing, parts := lookups(100, false); racing < whole || racing > whole+2*int64(parts) {
		t.Fatalf("lookups racing the reads in parts asked the driver for %d keys; read at once, %d", racing, whole)
	}

	// The same reads again, the last of them failing once: the nodes of
	// that part are read by the lookups that need them.
	// The failed call asked for no key; the lookups ask for its keys one
	// at a time.
	callsBefore = d.calls.Load()
	d.failCall.Store(callsBefore + calls)
	again, _ := lookups(100, true)
	if d.calls.Load() < d.failCall.Load() {
		t.Fatal("the read meant to fail was never made")
	}
	if again != whole || d.calls.Load()-callsBefore <= calls {
		t.Fatalf("after a failed part: %d keys in %d calls, want the %d keys of reads that all succeed in more than their %d calls", again, d.calls.Load()-callsBefore, whole, calls)
	}
}

// heldReads is a driver whose batched reads each take delay (they stop
// early when their context ends), and whose reads of failKey, when set,
// fail if they are batched (their context can end: the store's reads of
// many nodes, not a lookup's of one); inFlight counts the reads under way.
type heldReads struct {
	*memkv.Driver
	delay    time.Duration
	failKey  atomic.Pointer[[]byte]
	failed   atomic.Int64
	inFlight atomic.Int64
}

func (d *heldReads) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if fk := d.failKey.Load(); fk != nil && ctx.Done() != nil && slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, *fk) }) {
		d.failed.Add(1)
		return nil, errors.New("a read that fails")
	}
	d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	select {
	case <-time.After(d.delay):
	case <-ctx.Done():
		time.Sleep(20 * time.Millisecond) // a read slow to notice
		return nil, ctx.Err()
	}
	return d.Driver.GetMany(ctx, keys)
}

// TestReadAheadLaterPartsWaits: while the later parts of a request are
// read (each read held up), a lookup of a key whose leaf no part reads
// waits for the part being read at most, not for all of them; done
// stops the reads under way and returns once none is; a later read that
// fails ends the reads and settleReads returns it; and a commit whose
// reads fail is refused, the branch left as it was — and made once they
// read again.
func TestReadAheadLaterPartsWaits(t *testing.T) {
	ctx := context.Background()
	d := &heldReads{Driver: memkv.New(), delay: 100 * time.Millisecond}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	s.aheadPart = 100
	// Links to artifacts spread over all but the last of them.
	c, next := notesAndLinks(t, s, 6000, 5000)

	m := newMapSource(ctx, s, "c", c)
	s.nodes.clear()
	done, err := m.readAhead(next)
	if err != nil {
		t.Fatal(err)
	}
	later := m.ahead.Load().later
	if later == nil || len(later.parts) < 6 {
		t.Fatal("the request's later keys are not read in several parts")
	}
	// a5999 is not among the request's keys, nor its leaf on their paths.
	got := make(chan []byte, 1)
	go func() { got <- m.get(tkArtifact("a5999")) }()
	select {
	case v := <-got:
		if v == nil {
			t.Fatal("a5999 not found during the later reads")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a lookup outside the request never returned")
	}
	select {
	case <-later.ended:
		t.Fatalf("a lookup outside the request waited for all %d later parts", len(later.parts))
	default:
	}
	t.Logf("a lookup outside the request returned with %d of %d later parts read", later.done.Load(), len(later.parts))
	// What is left to read takes seconds (reads of 100 ms each); done
	// cancels it.
	stopped := make(chan struct{})
	go func() {
		done()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		t.Fatal("done did not stop the later reads")
	}
	if n := d.inFlight.Load(); n != 0 {
		t.Fatalf("done returned with %d later reads under way", n)
	}
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}

	// Through Commit, the head opened over its map, reads quick: a read
	// of a leaf only the request's last part needs fails.
	d.delay = 0
	var commit []graph.Op
	for i, op := range next {
		commit = append(commit, notePut(op.From, i, "n"), op)
	}
	keys := m.aheadKeys(commit)
	paths := func(keys []trieMut) map[hashing.Digest]bool {
		ids := map[hashing.Digest]bool{}
		for _, k := range keys {
			from := 0
			for ref := (trieChild{id: c.Root, count: c.RootCount}); ref.count > 0; {
				ids[ref.id] = true
				n := mustNode(t, s, ref)
				if n.leaf {
					break
				}
				ci, _ := childOnPath(n, k.key, from, 0, nil)
				if ci < 0 {
					break
				}
				ref, from = n.children[ci], n.fromBelow(from)
			}
		}
		return ids
	}
	early := paths(keys[:len(keys)-s.aheadPart])
	var leaf hashing.Digest
	for id := range paths(keys[len(keys)-s.aheadPart:]) {
		if !early[id] && mustNode(t, s, trieChild{id: id, count: 1}).leaf {
			leaf = id
			break
		}
	}
	if leaf == (hashing.Digest{}) {
		t.Fatal("no leaf only the last part's keys lead to: the test wants one")
	}
	fail := keyNode(leaf)
	d.failKey.Store(&fail)
	// The later reads end at the failed one, and settleReads says so.
	s.nodes.clear()
	m = newMapSource(ctx, s, "c", c)
	done, err = m.readAhead(commit)
	if err != nil {
		t.Fatalf("the first part, which does not read the failing leaf: %v", err)
	}
	select {
	case <-m.ahead.Load().later.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the later reads did not end at a failed read")
	}
	if err := m.settleReads(); err == nil || !strings.Contains(err.Error(), "a read that fails") {
		t.Fatalf("settleReads after a later read failed: %v", err)
	}
	done()
	// The commit is refused, and the branch stays where it was.
	forgetHeads(s)
	s.nodes.clear()
	_, err = s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: commit})
	if err == nil || !strings.Contains(err.Error(), "a read that fails") {
		t.Fatalf("a commit whose later reads failed: %v, want the read's failure", err)
	}
	if head, err := s.Resolve(ctx, "c", ""); err != nil || head.ID != c.ID {
		t.Fatalf("after the refused commit the branch is at %v (%v), want %s", head, err, c.ID.Short())
	}
	d.failKey.Store(nil)
	forgetHeads(s)
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: commit}); err != nil {
		t.Fatalf("the same commit once the reads succeed: %v", err)
	}
	mustCheck(t, s)
}
