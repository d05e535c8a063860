package kvtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
)

// Run runs the conformance suite; a driver with holds (kv.Locker) also
// runs the holds' cases. newDriver must return a new, empty driver each
// time it is called; Run closes each one at the end of its subtest
// (closing twice is part of the contract).
func Run(t *testing.T, newDriver func(t *testing.T) kv.Driver) {
	open := func(t *testing.T) kv.Driver {
		t.Helper()
		d := newDriver(t)
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return d
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, d kv.Driver)
	}{
		{"PointReads", testPointReads},
		{"ImmutableKeepsValue", testImmutableKeepsValue},
		{"PutSame", testPutSame},
		{"GetSame", testGetSame},
		{"Has", testHas},
		{"OwnedSlices", testOwnedSlices},
		{"InvalidRequests", testInvalid},
		{"ScanModel", testScanModel},
		{"ScanSnapshot", testScanSnapshot},
		{"ScanCallbackError", testScanCallbackError},
		{"SetsAndDeletes", testSetsDeletes},
		{"Swap", testSwap},
		{"SwapAllOrNothing", testSwapAllOrNothing},
		{"ConcurrentSwap", testConcurrentSwap},
		{"LargeImmutable", testLargeImmutable},
		{"LargeCommit", testLargeCommit},
		{"ContextCanceled", testCanceled},
		{"CommitCanceledTellsTheTruth", testCommitCanceled},
		{"Closed", testClosed},
	}
	// The holds' cases, for drivers that other processes share.
	if _, ok := open(t).(kv.Locker); ok {
		tests = append(tests, []struct {
			name string
			fn   func(t *testing.T, d kv.Driver)
		}{
			{"HoldExcludes", testHoldExcludes},
			{"HoldOrder", testHoldOrder},
			{"HoldSwapsChecked", testHoldSwapsChecked},
			{"HoldRelease", testHoldRelease},
			{"HoldMany", testHoldMany},
		}...)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// must fails the test on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func put(t *testing.T, d kv.Driver, recs ...kv.Record) {
	t.Helper()
	must(t, "PutImmutable", d.PutImmutable(context.Background(), recs))
}

func commit(t *testing.T, d kv.Driver, b kv.Batch) {
	t.Helper()
	must(t, "Commit", d.Commit(context.Background(), b))
}

func rec(k, v string) kv.Record { return kv.Record{Key: []byte(k), Value: []byte(v)} }

// wantValue checks that key has value want (nil: absent).
func wantValue(t *testing.T, d kv.Driver, key string, want []byte) {
	t.Helper()
	got, err := d.Get(context.Background(), []byte(key))
	switch {
	case want == nil && errors.Is(err, kv.ErrNotFound):
	case want == nil && err == nil:
		t.Errorf("Get(%q) = %q, want not found", key, got)
	case want == nil:
		t.Errorf("Get(%q): %v, want kv.ErrNotFound", key, err)
	case err != nil:
		t.Errorf("Get(%q): %v, want %q", key, err, want)
	case !bytes.Equal(got, want):
		t.Errorf("Get(%q) = %q, want %q", key, got, want)
	}
}

// scanAll returns every record with prefix, in the driver's order.
func scanAll(t *testing.T, d kv.Driver, prefix, start []byte, limit int) []kv.Record {
	t.Helper()
	var out []kv.Record
	err := d.Scan(context.Background(), prefix, start, limit, func(k, v []byte) error {
		out = append(out, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	must(t, "Scan", err)
	return out
}

func testPointReads(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	put(t, d, rec("a\x00b", "1"), rec("\xff\xff", "2"), rec("\x00", ""), rec("long", string(bytes.Repeat([]byte{7}, 1<<20))))
	wantValue(t, d, "a\x00b", []byte("1"))
	wantValue(t, d, "\xff\xff", []byte("2"))
	wantValue(t, d, "\x00", []byte{})
	wantValue(t, d, "long", bytes.Repeat([]byte{7}, 1<<20))
	wantValue(t, d, "a", nil)
	wantValue(t, d, "a\x00", nil)
	got, err := d.GetMany(ctx, [][]byte{[]byte("missing"), []byte("\xff\xff"), []byte("\x00"), []byte("a\x00b"), []byte("\xff\xff")})
	must(t, "GetMany", err)
	want := [][]byte{nil, []byte("2"), {}, []byte("1"), []byte("2")}
	if len(got) != len(want) {
		t.Fatalf("GetMany returned %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if (got[i] == nil) != (want[i] == nil) || !bytes.Equal(got[i], want[i]) {
			t.Errorf("GetMany[%d] = %q (nil %v), want %q (nil %v)", i, got[i], got[i] == nil, want[i], want[i] == nil)
		}
	}
	if got, err := d.GetMany(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("GetMany(nil) = %v, %v; want empty, nil", got, err)
	}
}

func testImmutableKeepsValue(t *testing.T, d kv.Driver) {
	put(t, d, rec("obj", "first"))
	put(t, d, rec("obj", "first"), rec("obj2", "x"))
	put(t, d, rec("obj", "second"))
	wantValue(t, d, "obj", []byte("first"))
	wantValue(t, d, "obj2", []byte("x"))
	put(t, d) // an empty call is fine
}

// testPutSame puts records whose keys name their values through kv.PutSame
// (the driver's SamePutter, or PutImmutable), twice and racing, and reads
// them back after a Commit; an invalid key writes nothing.
func testPutSame(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	var recs []kv.Record
	for i := range 3000 {
		recs = append(recs, kv.Record{Key: immKey(i), Value: immValue(i)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- kv.PutSame(ctx, d, recs)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "PutSame", err)
	}
	commit(t, d, kv.Batch{})
	for _, i := range []int{0, 1, 1499, 2999} {
		wantValue(t, d, string(immKey(i)), immValue(i))
	}
	bad := []kv.Record{{Key: []byte("ok-key"), Value: []byte("v")}, {Key: nil, Value: []byte("v")}}
	if err := kv.PutSame(ctx, d, bad); !errors.Is(err, kv.ErrInvalid) {
		t.Fatalf("PutSame with an empty key: %v, want ErrInvalid", err)
	}
	if _, err := d.Get(ctx, []byte("ok-key")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("a refused PutSame wrote a record: %v", err)
	}
}

// testGetSame: GetSame (the driver's, or GetMany through kv.GetSame)
// gives what GetMany gives — values in order, nil for missing keys, the
// caller's own slices — finds a record as soon as the write that made it
// returned, whether it was put with PutSame or committed, and stays right
// while readers and a writer run at once.
func testGetSame(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	var recs []kv.Record
	for i := range 500 {
		recs = append(recs, kv.Record{Key: immKey(i), Value: immValue(i)})
	}
	must(t, "PutSame", kv.PutSame(ctx, d, recs))
	keys := [][]byte{immKey(7), []byte("obj\x00absent"), immKey(499), immKey(0), nil}
	got, err := kv.GetSame(ctx, d, keys)
	must(t, "GetSame", err)
	want, err := d.GetMany(ctx, keys)
	must(t, "GetMany", err)
	if len(got) != len(keys) || !bytes.Equal(got[0], immValue(7)) || got[1] != nil || !bytes.Equal(got[2], immValue(499)) || !bytes.Equal(got[3], immValue(0)) || got[4] != nil {
		t.Fatalf("GetSame %q", got)
	}
	for i := range keys {
		if !bytes.Equal(got[i], want[i]) || (got[i] == nil) != (want[i] == nil) {
			t.Fatalf("key %q: GetSame %q, GetMany %q", keys[i], got[i], want[i])
		}
	}
	got[0][0] ^= 0xff
	again, err := kv.GetSame(ctx, d, keys[:1])
	must(t, "GetSame", err)
	if !bytes.Equal(again[0], immValue(7)) {
		t.Fatalf("a change to a returned value reached the store: %q", again[0])
	}

	// Each record is found by the read right after its write returns,
	// however old a view the driver reads first.
	for i := range 200 {
		k, v := fmt.Appendf(nil, "same\x00%03d", i), fmt.Appendf(nil, "value %d", i)
		if i%2 == 0 {
			must(t, "PutSame", kv.PutSame(ctx, d, []kv.Record{{Key: k, Value: v}}))
		} else {
			commit(t, d, kv.Batch{Sets: []kv.Record{{Key: k, Value: v}}})
		}
		vals, err := kv.GetSame(ctx, d, [][]byte{k, immKey(i)})
		must(t, "GetSame", err)
		if !bytes.Equal(vals[0], v) || !bytes.Equal(vals[1], immValue(i)) {
			t.Fatalf("after write %d: GetSame %q", i, vals)
		}
	}

	// A delete that returned hides the key from GetSame, however recent
	// a view the driver read it in.
	for i := range 20 {
		vals, err := kv.GetSame(ctx, d, [][]byte{immKey(i)})
		must(t, "GetSame", err)
		if !bytes.Equal(vals[0], immValue(i)) {
			t.Fatalf("key %d before its delete: %q", i, vals[0])
		}
		if i%2 == 0 {
			commit(t, d, kv.Batch{Deletes: [][]byte{immKey(i)}})
		} else {
			commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: immKey(i), Old: immValue(i), Delete: true}}})
		}
		if vals, err = kv.GetSame(ctx, d, [][]byte{immKey(i)}); err != nil || vals[0] != nil {
			t.Fatalf("key %d after its delete: %q, %v", i, vals, err)
		}
	}
	recs = recs[20:]

	// Readers while a writer commits.
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, 5)
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: fmt.Appendf(nil, "w\x00%d", i), Value: []byte("w")}}}); err != nil {
				errs <- err
				return
			}
		}
	})
	for r := range 4 {
		wg.Go(func() {
			for i := range 300 {
				j := 20 + (i*7+r)%len(recs)
				vals, err := kv.GetSame(ctx, d, [][]byte{immKey(j)})
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(vals[0], immValue(j)) {
					errs <- fmt.Errorf("reader %d: key %d read %q", r, j, vals[0])
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// bare hides a driver's optional methods (kv.Haser, kv.KeyScanner, …):
// the kv functions that use them fall back on the Driver methods.
type bare struct{ kv.Driver }

// testHas checks kv.Has — the driver's Has, and the GetMany it falls
// back on without one — against GetMany: values put and put the same way
// (a bulk, which the Badger driver packs), an empty value, a deleted key,
// a key asked twice, an empty key, absent ones.
func testHas(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	put(t, d, rec("has\x00a", "1"), rec("has\x00empty", ""), rec("has\x00gone", "x"), rec("has\x00long", string(bytes.Repeat([]byte{9}, 1<<20))))
	var recs []kv.Record
	for i := range 500 {
		recs = append(recs, kv.Record{Key: immKey(i), Value: immValue(i)})
	}
	must(t, "PutSame", kv.PutSame(ctx, d, recs))
	commit(t, d, kv.Batch{Deletes: [][]byte{[]byte("has\x00gone")}, Sets: []kv.Record{rec("has\x00set", "s")}})
	keys := [][]byte{[]byte("has\x00a"), []byte("has\x00absent"), []byte("has\x00empty"), []byte("has\x00gone"),
		immKey(7), []byte("has\x00long"), nil, []byte("has\x00a"), []byte("has\x00set"), immKey(499), []byte("has")}
	want := []bool{true, false, true, false, true, true, false, true, true, true, false}
	vals, err := d.GetMany(ctx, keys)
	must(t, "GetMany", err)
	for i := range keys {
		if (vals[i] != nil) != want[i] {
			t.Fatalf("the test's own expectation: GetMany finds %q: %v, want %v", keys[i], vals[i] != nil, want[i])
		}
	}
	// Without the driver's Has, kv.Has asks GetMany.
	for _, c := range []struct {
		name string
		d    kv.Driver
	}{{"driver", d}, {"fallback", bare{d}}} {
		got, err := kv.Has(ctx, c.d, keys)
		must(t, c.name+" Has", err)
		if !slices.Equal(got, want) {
			t.Errorf("%s: Has = %v, want %v", c.name, got, want)
		}
		if got, err := kv.Has(ctx, c.d, nil); err != nil || len(got) != 0 {
			t.Errorf("%s: Has(nil) = %v, %v; want empty, nil", c.name, got, err)
		}
	}
	// Many keys: more than one query or transaction part.
	many := make([][]byte, 0, 5001)
	for i := range 5000 {
		many = append(many, immKey(i%1000))
	}
	many = append(many, []byte("has\x00a"))
	got, err := kv.Has(ctx, d, many)
	must(t, "Has", err)
	for i, k := range many {
		if w := i%1000 < 500 || i == 5000; got[i] != w {
			t.Fatalf("Has(%q) = %v, want %v", k, got[i], w)
		}
	}
}

func testOwnedSlices(t *testing.T, d kv.Driver) {
	k, v := []byte("key"), []byte("value")
	put(t, d, kv.Record{Key: k, Value: v})
	k[0], v[0] = 'X', 'X'
	wantValue(t, d, "key", []byte("value"))
	got, err := d.Get(context.Background(), []byte("key"))
	must(t, "Get", err)
	got[0] = 'Y'
	wantValue(t, d, "key", []byte("value"))
	s := []byte("new")
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: []byte("ref"), Absent: true, New: s}}})
	s[0] = 'Z'
	wantValue(t, d, "ref", []byte("new"))
	// A key asked twice gets two values of its own: a change to one
	// reaches neither the other nor the store.
	for _, get := range []struct {
		name string
		fn   func(context.Context, [][]byte) ([][]byte, error)
	}{{"GetMany", d.GetMany}, {"GetSame", func(ctx context.Context, keys [][]byte) ([][]byte, error) { return kv.GetSame(ctx, d, keys) }}} {
		vals, err := get.fn(context.Background(), [][]byte{[]byte("key"), []byte("key")})
		must(t, get.name, err)
		vals[0][0] = 'Y'
		if string(vals[1]) != "value" {
			t.Errorf("%s of a key asked twice: a change to the first value changed the second to %q", get.name, vals[1])
		}
		wantValue(t, d, "key", []byte("value"))
	}
}

func testInvalid(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{'k'}, kv.MaxKeySize+1)
	put(t, d, kv.Record{Key: big[:kv.MaxKeySize], Value: []byte("max")})
	wantValue(t, d, string(big[:kv.MaxKeySize]), []byte("max"))
	for name, recs := range map[string][]kv.Record{
		"empty key": {rec("ok", "1"), {Key: nil, Value: []byte("v")}},
		"long key":  {{Key: big, Value: []byte("v")}},
	} {
		if err := d.PutImmutable(ctx, recs); !errors.Is(err, kv.ErrInvalid) {
			t.Errorf("PutImmutable with %s: %v, want kv.ErrInvalid", name, err)
		}
	}
	for name, b := range map[string]kv.Batch{
		"empty key":     {Sets: []kv.Record{rec("s", "1"), {Key: []byte{}, Value: []byte("v")}}},
		"long key":      {Deletes: [][]byte{big}},
		"set twice":     {Sets: []kv.Record{rec("s", "1"), rec("s", "2")}},
		"set and swap":  {Sets: []kv.Record{rec("s", "1")}, Swaps: []kv.Swap{{Key: []byte("s"), Absent: true, New: []byte("2")}}},
		"delete + set":  {Sets: []kv.Record{rec("s", "1")}, Deletes: [][]byte{[]byte("s")}},
		"swap twice":    {Swaps: []kv.Swap{{Key: []byte("r"), Absent: true, New: []byte("1")}, {Key: []byte("r"), Absent: true, New: []byte("2")}}},
		"empty swapkey": {Swaps: []kv.Swap{{Absent: true, New: []byte("1")}}},
	} {
		if err := d.Commit(ctx, b); !errors.Is(err, kv.ErrInvalid) {
			t.Errorf("Commit with %s: %v, want kv.ErrInvalid", name, err)
		}
	}
	wantValue(t, d, "ok", nil)
	wantValue(t, d, "s", nil)
	wantValue(t, d, "r", nil)
	if n := len(scanAll(t, d, nil, nil, 0)); n != 1 {
		t.Errorf("after refused writes the driver holds %d records, want 1", n)
	}
}

// binaryKey draws a key over an alphabet rich in order edge cases.
func binaryKey(rng *rand.Rand, maxLen int) []byte {
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0x7f, 0x80, 0xfe, 0xff}
	k := make([]byte, rng.IntN(maxLen+1))
	for i := range k {
		k[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return k
}

// scanAllReverse returns every record with prefix below end, in the
// driver's order.
func scanAllReverse(t *testing.T, d kv.Driver, prefix, end []byte, limit int) []kv.Record {
	t.Helper()
	var out []kv.Record
	err := d.ScanReverse(context.Background(), prefix, end, limit, func(k, v []byte) error {
		out = append(out, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	must(t, "ScanReverse", err)
	return out
}

// modelScanReverse is the reverse oracle.
func modelScanReverse(model map[string][]byte, prefix, end []byte, limit int) []kv.Record {
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	var out []kv.Record
	for _, k := range keys {
		if !bytes.HasPrefix([]byte(k), prefix) || end != nil && bytes.Compare([]byte(k), end) >= 0 {
			continue
		}
		out = append(out, kv.Record{Key: []byte(k), Value: model[k]})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// modelScan is the oracle: a linear pass over a sorted model.
func modelScan(model map[string][]byte, prefix, start []byte, limit int) []kv.Record {
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []kv.Record
	for _, k := range keys {
		if !bytes.HasPrefix([]byte(k), prefix) || bytes.Compare([]byte(k), start) < 0 {
			continue
		}
		out = append(out, kv.Record{Key: []byte(k), Value: model[k]})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

func testScanModel(t *testing.T, d kv.Driver) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	model := map[string][]byte{}
	var recs []kv.Record
	for i := 0; i < 400; i++ {
		k := binaryKey(rng, 6)
		if len(k) == 0 {
			continue
		}
		v := fmt.Appendf(nil, "v%x", k) // a key always carries the same value
		model[string(k)] = v
		recs = append(recs, kv.Record{Key: k, Value: v})
	}
	put(t, d, recs[:len(recs)/2]...)
	put(t, d, recs[len(recs)/2:]...)
	// Move, overwrite and delete some through Commit so that scans also see
	// records written by the other verb.
	var b kv.Batch
	for k := range model {
		switch rng.IntN(6) {
		case 0:
			b.Deletes = append(b.Deletes, []byte(k))
			delete(model, k)
		case 1:
			model[k] = []byte("set")
			b.Sets = append(b.Sets, kv.Record{Key: []byte(k), Value: []byte("set")})
		}
	}
	commit(t, d, b)
	compare := func(what string, prefix, bound []byte, limit int, got, want []kv.Record) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s(prefix %x, %x, limit %d): %d records, want %d", what, prefix, bound, limit, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
				t.Fatalf("%s(prefix %x, %x, limit %d)[%d] = %x=%q, want %x=%q", what, prefix, bound, limit, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
			}
		}
	}
	check := func(prefix, start []byte, limit int) {
		t.Helper()
		want := modelScan(model, prefix, start, limit)
		compare("Scan", prefix, start, limit, scanAll(t, d, prefix, start, limit), want)
		// The keys alone, from the driver's ScanKeys and from the Scan
		// kv.ScanKeys falls back on.
		for _, sd := range []kv.Driver{d, bare{d}} {
			var keys []kv.Record
			must(t, "ScanKeys", kv.ScanKeys(context.Background(), sd, prefix, start, limit, func(k []byte) error {
				keys = append(keys, kv.Record{Key: bytes.Clone(k), Value: model[string(k)]})
				return nil
			}))
			compare(fmt.Sprintf("ScanKeys (%T)", sd), prefix, start, limit, keys, want)
		}
		// start doubles as the reverse scan's exclusive end.
		compare("ScanReverse", prefix, start, limit, scanAllReverse(t, d, prefix, start, limit), modelScanReverse(model, prefix, start, limit))
	}
	check(nil, nil, 0)
	for _, limit := range []int{64, 65, 66, 129, 200, len(model) - 1, len(model), len(model) + 1} {
		check(nil, nil, limit) // around the sizes a paging driver may use
	}
	check([]byte{}, nil, 0)
	check([]byte{0xff}, nil, 0)
	check([]byte{0xff, 0xff}, nil, 3)
	check([]byte{0x00}, []byte{0x00, 0xff}, 0)
	check([]byte("a"), []byte("b"), 0) // start past the prefix: nothing (reverse: all of it)
	check([]byte("a"), []byte("a"), 0) // reverse: end at the prefix itself, nothing
	check([]byte{'a', 0xff}, []byte{'b'}, 2)
	for k := range model { // an end that is a stored key is excluded
		check(nil, []byte(k), 3)
		check([]byte(k[:1]), []byte(k), 0)
		break
	}
	for i := 0; i < 300; i++ {
		prefix := binaryKey(rng, 2)
		var start []byte
		switch rng.IntN(3) {
		case 1:
			start = binaryKey(rng, 5)
		case 2:
			start = append(bytes.Clone(prefix), binaryKey(rng, 3)...)
		}
		check(prefix, start, rng.IntN(6))
	}
}

func testScanSnapshot(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	// Enough records that a driver reading a scan in pages reads several,
	// the writes landing in a later one than fn's first calls.
	const n = 1000
	var recs []kv.Record
	for i := 0; i < n; i++ {
		recs = append(recs, rec(fmt.Sprintf("p/%03d", i), "old"))
	}
	put(t, d, recs...)
	var seen []string
	err := d.Scan(ctx, []byte("p/"), nil, 0, func(k, v []byte) error {
		seen = append(seen, string(k))
		if string(v) != "old" {
			return fmt.Errorf("scan saw %q=%q, a value set after it began", k, v)
		}
		if len(seen) == 10 {
			// Writes and reads from inside fn: the scan must not see the
			// writes, and must not block them.
			if err := d.Commit(ctx, kv.Batch{
				Sets:    []kv.Record{rec("p/500", "new"), rec("p/500x", "new")},
				Deletes: [][]byte{[]byte("p/600")},
			}); err != nil {
				return err
			}
			if v, err := d.Get(ctx, []byte("p/500")); err != nil || string(v) != "new" {
				return fmt.Errorf("get inside Scan = %q, %v", v, err)
			}
		}
		return nil
	})
	must(t, "Scan", err)
	if len(seen) != n || !slices.IsSorted(seen) {
		t.Errorf("scan saw %d keys (sorted %v), want the %d of its snapshot", len(seen), slices.IsSorted(seen), n)
	}
	if got := scanAll(t, d, []byte("p/"), nil, 0); len(got) != n {
		t.Errorf("a later scan saw %d keys, want %d (one added, one deleted)", len(got), n)
	}
}

func testScanCallbackError(t *testing.T, d kv.Driver) {
	put(t, d, rec("a1", ""), rec("a2", ""), rec("a3", ""))
	stop := errors.New("stop here")
	calls := 0
	err := d.Scan(context.Background(), []byte("a"), nil, 0, func(k, v []byte) error {
		calls++
		if calls == 2 {
			return fmt.Errorf("wrapped: %w", stop)
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("Scan with failing fn: err %v after %d calls, want the fn's error after 2", err, calls)
	}
	calls = 0
	err = d.ScanReverse(context.Background(), []byte("a"), nil, 0, func(k, v []byte) error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("ScanReverse with failing fn: err %v after %d calls, want the fn's error after 2", err, calls)
	}
	calls = 0
	err = kv.ScanKeys(context.Background(), d, []byte("a"), nil, 0, func(k []byte) error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("ScanKeys with failing fn: err %v after %d calls, want the fn's error after 2", err, calls)
	}
}

func testSetsDeletes(t *testing.T, d kv.Driver) {
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("a", "1"), rec("b", "2"), rec("c", "")}})
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("a", "3")}, Deletes: [][]byte{[]byte("b"), []byte("never-there")}})
	wantValue(t, d, "a", []byte("3"))
	wantValue(t, d, "b", nil)
	wantValue(t, d, "c", []byte{})
	commit(t, d, kv.Batch{}) // an empty batch is fine
	put(t, d, rec("a", "immutable"))
	wantValue(t, d, "a", []byte("3"))
	if got := scanAll(t, d, nil, nil, 0); len(got) != 2 {
		t.Errorf("store holds %d records, want 2", len(got))
	}
}

// wantConflict checks that err is a *kv.ConflictError naming exactly want
// (key -> current value, nil = absent).
func wantConflict(t *testing.T, err error, want map[string][]byte) {
	t.Helper()
	var ce *kv.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("err = %v, want a *kv.ConflictError", err)
	}
	if len(ce.Conflicts) != len(want) {
		t.Fatalf("conflict names %d keys (%v), want %d", len(ce.Conflicts), ce, len(want))
	}
	for _, c := range ce.Conflicts {
		w, ok := want[string(c.Key)]
		if !ok {
			t.Errorf("conflict names key %q, not expected", c.Key)
			continue
		}
		if c.Exists != (w != nil) || !bytes.Equal(c.Current, w) {
			t.Errorf("conflict on %q: exists %v current %q, want %q", c.Key, c.Exists, c.Current, w)
		}
	}
	if ce.Error() == "" {
		t.Error("empty conflict message")
	}
}

func testSwap(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	r := []byte("ref\x00ctx\x00main")
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: r, Absent: true, New: []byte("c1")}}})
	wantValue(t, d, string(r), []byte("c1"))
	err := d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Absent: true, New: []byte("c2")}}})
	wantConflict(t, err, map[string][]byte{string(r): []byte("c1")})
	err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte("c0"), New: []byte("c2")}}})
	wantConflict(t, err, map[string][]byte{string(r): []byte("c1")})
	err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: []byte("nope"), Old: []byte("c1"), New: []byte("c2")}}})
	wantConflict(t, err, map[string][]byte{"nope": nil})
	err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte{}, New: []byte("c2")}}})
	wantConflict(t, err, map[string][]byte{string(r): []byte("c1")})
	wantValue(t, d, string(r), []byte("c1"))
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte("c1"), New: []byte("c2")}}})
	wantValue(t, d, string(r), []byte("c2"))
	// A swap to the value it already has, an empty value, and a delete.
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte("c2"), New: []byte("c2")}}})
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte("c2"), New: []byte{}}}})
	wantValue(t, d, string(r), []byte{})
	err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Absent: true, New: []byte("x")}}})
	wantConflict(t, err, map[string][]byte{string(r): {}})
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte{}, Delete: true}}})
	wantValue(t, d, string(r), nil)
	err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Old: []byte{}, Delete: true}}})
	wantConflict(t, err, map[string][]byte{string(r): nil})
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: r, Absent: true, New: []byte("again")}}})
	wantValue(t, d, string(r), []byte("again"))
	// "Absent, and stays absent": held for a missing key, and a conflict
	// naming the value of one that exists, which stays.
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: []byte("never"), Absent: true, Delete: true}}, Sets: []kv.Record{rec("beside", "b")}})
	wantValue(t, d, "never", nil)
	wantValue(t, d, "beside", []byte("b"))
	err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Absent: true, Delete: true}}})
	wantConflict(t, err, map[string][]byte{string(r): []byte("again")})
	wantValue(t, d, string(r), []byte("again"))
	if l, ok := d.(kv.Locker); ok {
		h, err := l.Lock(ctx, [][]byte{r})
		must(t, "lock", err)
		defer h.Release()
		err = h.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: r, Absent: true, Delete: true}}})
		wantConflict(t, err, map[string][]byte{string(r): []byte("again")})
		wantValue(t, d, string(r), []byte("again"))
	}
}

func testSwapAllOrNothing(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	commit(t, d, kv.Batch{
		Sets:  []kv.Record{rec("keep", "k0"), rec("gone", "g0")},
		Swaps: []kv.Swap{{Key: []byte("r1"), Absent: true, New: []byte("a")}, {Key: []byte("r2"), Absent: true, New: []byte("b")}},
	})
	// Two of four swaps fail: nothing of the batch may be written, and the
	// error names both.
	err := d.Commit(ctx, kv.Batch{
		Sets:    []kv.Record{rec("keep", "k1"), rec("new", "n1")},
		Deletes: [][]byte{[]byte("gone")},
		Swaps: []kv.Swap{
			{Key: []byte("r1"), Old: []byte("a"), New: []byte("a2")},
			{Key: []byte("r2"), Old: []byte("stale"), New: []byte("b2")},
			{Key: []byte("r3"), Absent: true, New: []byte("c")},
			{Key: []byte("r4"), Old: []byte("x"), Delete: true},
		},
	})
	wantConflict(t, err, map[string][]byte{"r2": []byte("b"), "r4": nil})
	wantValue(t, d, "keep", []byte("k0"))
	wantValue(t, d, "gone", []byte("g0"))
	wantValue(t, d, "new", nil)
	wantValue(t, d, "r1", []byte("a"))
	wantValue(t, d, "r2", []byte("b"))
	wantValue(t, d, "r3", nil)
	commit(t, d, kv.Batch{
		Sets:    []kv.Record{rec("keep", "k1"), rec("new", "n1")},
		Deletes: [][]byte{[]byte("gone")},
		Swaps: []kv.Swap{
			{Key: []byte("r1"), Old: []byte("a"), New: []byte("a2")},
			{Key: []byte("r2"), Old: []byte("b"), Delete: true},
			{Key: []byte("r3"), Absent: true, New: []byte("c")},
		},
	})
	for k, v := range map[string][]byte{"keep": []byte("k1"), "new": []byte("n1"), "gone": nil, "r1": []byte("a2"), "r2": nil, "r3": []byte("c")} {
		wantValue(t, d, k, v)
	}
}

func testConcurrentSwap(t *testing.T, d kv.Driver) {
	const workers, rounds = 8, 25
	ctx := context.Background()
	ref := []byte("ref\x00race")
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: ref, Absent: true, New: []byte("start")}}})
	var read, swapped sync.WaitGroup
	wins := make([][]int, rounds) // round -> winning workers
	var mu sync.Mutex
	errs := make(chan error, workers*rounds+4)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	// Readers and immutable writers run alongside the racing swaps.
	for i := 0; i < 2; i++ {
		bg.Add(1)
		go func(i int) {
			defer bg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Appendf(nil, "obj\x00%d-%d", i, n)
				if err := d.PutImmutable(ctx, []kv.Record{{Key: k, Value: k}}); err != nil {
					errs <- err
					return
				}
				if err := d.Scan(ctx, []byte("win\x00"), nil, 0, func(k, v []byte) error { return nil }); err != nil {
					errs <- err
					return
				}
				if _, err := d.GetMany(ctx, [][]byte{ref, k}); err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	for r := 0; r < rounds; r++ {
		read.Add(workers)
		swapped.Add(workers)
		for w := 0; w < workers; w++ {
			go func(w int) {
				defer swapped.Done()
				cur, err := d.Get(ctx, ref)
				read.Done()
				read.Wait() // everyone has read before anyone swaps
				if err != nil {
					errs <- err
					return
				}
				mine := fmt.Appendf(nil, "r%d-w%d", r, w)
				err = d.Commit(ctx, kv.Batch{
					Sets:  []kv.Record{{Key: fmt.Appendf(nil, "win\x00%04d\x00%d", r, w), Value: mine}},
					Swaps: []kv.Swap{{Key: ref, Old: cur, New: mine}},
				})
				var ce *kv.ConflictError
				switch {
				case err == nil:
					mu.Lock()
					wins[r] = append(wins[r], w)
					mu.Unlock()
				case errors.As(err, &ce):
					if len(ce.Conflicts) != 1 || !bytes.HasPrefix(ce.Conflicts[0].Current, fmt.Appendf(nil, "r%d-", r)) {
						errs <- fmt.Errorf("round %d: loser sees %v, want the round's winner", r, ce)
					}
				default:
					errs <- err
				}
			}(w)
		}
		swapped.Wait()
	}
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for r, ws := range wins {
		if len(ws) != 1 {
			t.Fatalf("round %d: %d winners %v, want exactly 1", r, len(ws), ws)
		}
	}
	last := fmt.Appendf(nil, "r%d-w%d", rounds-1, wins[rounds-1][0])
	wantValue(t, d, string(ref), last)
	got := scanAll(t, d, []byte("win\x00"), nil, 0)
	if len(got) != rounds {
		t.Fatalf("%d win records, want one per round (%d)", len(got), rounds)
	}
	for r, g := range got {
		if want := fmt.Appendf(nil, "r%d-w%d", r, wins[r][0]); !bytes.Equal(g.Value, want) {
			t.Errorf("round %d: win record %q, want %q", r, g.Value, want)
		}
	}
}

// immKey is the key of the i-th record of a large batch: content-style
// binary keys, spread over the key space.
func immKey(i int) []byte {
	k := []byte("obj\x00")
	x := uint64(i) * 0x9e3779b97f4a7c15
	k = binary.BigEndian.AppendUint64(k, x)
	return binary.BigEndian.AppendUint32(k, uint32(i))
}

func immValue(i int) []byte {
	v := make([]byte, 200)
	for j := range v {
		v[j] = byte(i*31 + j)
	}
	return binary.BigEndian.AppendUint32(v[:196], uint32(i))
}

func testLargeImmutable(t *testing.T, d kv.Driver) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	ctx := context.Background()
	recs := make([]kv.Record, n)
	for i := range recs {
		recs[i] = kv.Record{Key: immKey(i), Value: immValue(i)}
	}
	must(t, "PutImmutable", d.PutImmutable(ctx, recs))
	commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: []byte("ref\x00big"), Absent: true, New: []byte("done")}}})
	count := 0
	var prev []byte
	err := d.Scan(ctx, []byte("obj\x00"), nil, 0, func(k, v []byte) error {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return fmt.Errorf("scan order: %x after %x", k, prev)
		}
		prev = append(prev[:0], k...)
		i := int(binary.BigEndian.Uint32(k[len(k)-4:]))
		if !bytes.Equal(v, immValue(i)) {
			return fmt.Errorf("record %d has the wrong value", i)
		}
		count++
		return nil
	})
	must(t, "Scan", err)
	if count != n {
		t.Fatalf("scan found %d records, want %d", count, n)
	}
	var keys [][]byte
	for i := 0; i < n; i += 97 {
		keys = append(keys, immKey(i))
	}
	keys = append(keys, []byte("obj\x00missing"))
	vals, err := d.GetMany(ctx, keys)
	must(t, "GetMany", err)
	for j, v := range vals[:len(vals)-1] {
		if !bytes.Equal(v, immValue(j*97)) {
			t.Fatalf("GetMany: record %d wrong", j*97)
		}
	}
	if vals[len(vals)-1] != nil {
		t.Errorf("GetMany: a missing key has a value")
	}
	// Repeating the whole put is a no-op.
	must(t, "PutImmutable again", d.PutImmutable(ctx, recs[:n/10]))
}

func testLargeCommit(t *testing.T, d kv.Driver) {
	const n = 3000
	var b kv.Batch
	for i := 0; i < n; i++ {
		b.Sets = append(b.Sets, kv.Record{Key: binary.BigEndian.AppendUint32([]byte("seq\x00"), uint32(i)), Value: bytes.Repeat([]byte{byte(i)}, 100)})
	}
	b.Swaps = []kv.Swap{{Key: []byte("ref\x00x"), Absent: true, New: []byte("big")}}
	commit(t, d, b)
	got := scanAll(t, d, []byte("seq\x00"), nil, 0)
	if len(got) != n {
		t.Fatalf("%d records after a commit of %d sets", len(got), n)
	}
	for i, r := range got {
		if !bytes.Equal(r.Value, bytes.Repeat([]byte{byte(i)}, 100)) {
			t.Fatalf("record %d wrong", i)
		}
	}
	var del kv.Batch
	for _, r := range got {
		del.Deletes = append(del.Deletes, r.Key)
	}
	del.Swaps = []kv.Swap{{Key: []byte("ref\x00x"), Old: []byte("big"), Delete: true}}
	commit(t, d, del)
	if got := scanAll(t, d, nil, nil, 0); len(got) != 0 {
		t.Errorf("%d records left after deleting all", len(got))
	}
}

func testCanceled(t *testing.T, d kv.Driver) {
	put(t, d, rec("a", "1"), rec("b", "2"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	isCanceled := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: %v, want context.Canceled", what, err)
		}
	}
	isCanceled("PutImmutable", d.PutImmutable(ctx, []kv.Record{rec("c", "3")}))
	_, err := d.Get(ctx, []byte("a"))
	isCanceled("Get", err)
	_, err = d.GetMany(ctx, [][]byte{[]byte("a")})
	isCanceled("GetMany", err)
	_, err = kv.GetSame(ctx, d, [][]byte{[]byte("a")})
	isCanceled("GetSame", err)
	_, err = kv.Has(ctx, d, [][]byte{[]byte("a")})
	isCanceled("Has", err)
	isCanceled("ScanKeys", kv.ScanKeys(ctx, d, nil, nil, 0, func(k []byte) error { return nil }))
	isCanceled("Scan", d.Scan(ctx, nil, nil, 0, func(k, v []byte) error { return nil }))
	isCanceled("ScanReverse", d.ScanReverse(ctx, nil, nil, 0, func(k, v []byte) error { return nil }))
	isCanceled("Commit", d.Commit(ctx, kv.Batch{Sets: []kv.Record{rec("d", "4")}, Swaps: []kv.Swap{{Key: []byte("r"), Absent: true, New: []byte("x")}}}))
	wantValue(t, d, "c", nil)
	wantValue(t, d, "d", nil)
	wantValue(t, d, "r", nil)

	// Canceled during a scan: fn is not called again.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err = d.Scan(ctx, nil, nil, 0, func(k, v []byte) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("Scan canceled in fn: err %v after %d calls, want context.Canceled after 1", err, calls)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	calls = 0
	err = d.ScanReverse(ctx, nil, nil, 0, func(k, v []byte) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("ScanReverse canceled in fn: err %v after %d calls, want context.Canceled after 1", err, calls)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	calls = 0
	err = kv.ScanKeys(ctx, d, nil, nil, 0, func(k []byte) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("ScanKeys canceled in fn: err %v after %d calls, want context.Canceled after 1", err, calls)
	}
}

// testCommitCanceled: a Commit whose context is canceled at some moment
// while it runs — before it sends anything, while it writes, while the
// engine commits — tells whether its batch landed: nil when it did,
// ctx's error only when nothing was written. Each round moves a ref one
// step and sets a record, with a cancellation after a random delay.
func testCommitCanceled(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	step := func(i int) []byte { return fmt.Appendf(nil, "%d", i) }
	ref := []byte("ref\x00main")
	commit(t, d, kv.Batch{Sets: []kv.Record{{Key: ref, Value: step(0)}}})
	// The delays spread over twice the median time of a Commit.
	var took []time.Duration
	for i := range 9 {
		start := time.Now()
		commit(t, d, kv.Batch{Swaps: []kv.Swap{{Key: ref, Old: step(i), New: step(i + 1)}}})
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	spread := max(2*took[len(took)/2], time.Microsecond)
	at, landed, canceled := 9, 0, 0
	for round := 0; round < 200; round++ {
		cctx, cancel := context.WithCancel(ctx)
		delay := time.Duration(rng.Int64N(int64(spread)))
		timer := time.AfterFunc(delay, cancel)
		mark := fmt.Appendf(nil, "cmt\x00%d", round)
		err := d.Commit(cctx, kv.Batch{
			Swaps: []kv.Swap{{Key: ref, Old: step(at), New: step(at + 1)}},
			Sets:  []kv.Record{{Key: mark, Value: mark}},
		})
		timer.Stop()
		cancel()
		got, gerr := d.Get(ctx, ref)
		must(t, "Get", gerr)
		_, merr := d.Get(ctx, mark)
		switch {
		case err == nil:
			if !bytes.Equal(got, step(at+1)) || merr != nil {
				t.Fatalf("round %d: Commit returned nil, but ref is %q (want %q) and its record: %v", round, got, step(at+1), merr)
			}
			at++
			landed++
		case errors.Is(err, context.Canceled):
			if !bytes.Equal(got, step(at)) || !errors.Is(merr, kv.ErrNotFound) {
				t.Fatalf("round %d: Commit returned %v, but ref is %q (want %q, unchanged) and its record: %v", round, err, got, step(at), merr)
			}
			canceled++
		default:
			t.Fatalf("round %d: Commit canceled after %s: %v, want nil or context.Canceled", round, delay, err)
		}
	}
	t.Logf("%d commits landed, %d were canceled before they wrote", landed, canceled)
}

func testClosed(t *testing.T, d kv.Driver) {
	ctx := context.Background()
	put(t, d, rec("a", "1"))
	must(t, "Close", d.Close())
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, kv.ErrClosed) {
			t.Errorf("%s after Close: %v, want kv.ErrClosed", what, err)
		}
	}
	closed("PutImmutable", d.PutImmutable(ctx, []kv.Record{rec("b", "2")}))
	_, err := d.Get(ctx, []byte("a"))
	closed("Get", err)
	_, err = d.GetMany(ctx, [][]byte{[]byte("a")})
	closed("GetMany", err)
	_, err = kv.GetSame(ctx, d, [][]byte{[]byte("a")})
	closed("GetSame", err)
	_, err = kv.Has(ctx, d, [][]byte{[]byte("a")})
	closed("Has", err)
	closed("ScanKeys", kv.ScanKeys(ctx, d, nil, nil, 0, func(k []byte) error { return nil }))
	closed("Scan", d.Scan(ctx, nil, nil, 0, func(k, v []byte) error { return nil }))
	closed("ScanReverse", d.ScanReverse(ctx, nil, nil, 0, func(k, v []byte) error { return nil }))
	closed("Commit", d.Commit(ctx, kv.Batch{Sets: []kv.Record{rec("c", "3")}}))
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}
