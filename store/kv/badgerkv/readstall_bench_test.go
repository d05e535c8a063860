package badgerkv_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/badgerkv"
)

// BenchmarkGetDuringBulkPuts measures point reads while another goroutine
// writes what a bulk commit writes: PutSame of 2,000 state-map-sized
// records (2 KiB), then a small Commit, over and over. Each of b.N reads
// is 1 ms after the last; the benchmark reports their p50, p99 and
// maximum, for reads with Get and with GetSame (which need not wait for
// the writes in flight). It uses only the kv API, so the same file
// measures any version of the driver (with the store's defaults: a sync
// per write).
func BenchmarkGetDuringBulkPuts(b *testing.B) {
	readsDuring(b, func(ctx context.Context, d *badgerkv.Driver, i int) error {
		recs := make([]kv.Record, 2000)
		for j := range recs {
			v := make([]byte, 2048)
			rand.Read(v)
			recs[j] = kv.Record{Key: fmt.Appendf(nil, "node\x00%d-%d", i, j), Value: v}
		}
		if err := d.PutSame(ctx, recs); err != nil {
			return err
		}
		return d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: fmt.Appendf(nil, "ref%d", i%10), Value: []byte("c")}}})
	})
}

// BenchmarkGetDuringSmallCommits is BenchmarkGetDuringBulkPuts with a
// writer that makes one-record commits back to back, as one-artifact
// commits of other contexts do: each waits for its syncs.
func BenchmarkGetDuringSmallCommits(b *testing.B) {
	readsDuring(b, func(ctx context.Context, d *badgerkv.Driver, i int) error {
		v := make([]byte, 700)
		rand.Read(v)
		return d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: fmt.Appendf(nil, "small\x00%d", i), Value: v}}})
	})
}

// readsDuring runs write(i) for i = 0, 1, … on one goroutine while it
// times b.N point reads of a record written before, one a millisecond,
// with Get and with GetSame.
func readsDuring(b *testing.B, write func(ctx context.Context, d *badgerkv.Driver, i int) error) {
	for _, r := range []struct {
		name string
		read func(context.Context, *badgerkv.Driver, []byte) ([]byte, error)
	}{
		{"Get", func(ctx context.Context, d *badgerkv.Driver, k []byte) ([]byte, error) { return d.Get(ctx, k) }},
		{"GetSame", func(ctx context.Context, d *badgerkv.Driver, k []byte) ([]byte, error) {
			vals, err := d.GetSame(ctx, [][]byte{k})
			if err != nil {
				return nil, err
			}
			return vals[0], nil
		}},
	} {
		b.Run(r.name, func(b *testing.B) {
			ctx := context.Background()
			d, err := badgerkv.Open(ctx, badgerkv.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			probe := []byte("probe")
			if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: probe, Value: []byte("x")}}}); err != nil {
				b.Fatal(err)
			}
			timedDuring(b, func(i int) error { return write(ctx, d, i) }, func(int) error {
				v, err := r.read(ctx, d, probe)
				if err == nil && string(v) != "x" {
					err = fmt.Errorf("probe read %q", v)
				}
				return err
			})
		})
	}
}

// timedDuring runs write(i) for i = 0, 1, … on another goroutine while
// it times b.N calls op(i), one a millisecond after the last ended, and
// reports their p50, p99 and maximum.
func timedDuring(b *testing.B, write, op func(i int) error) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if err := write(i); err != nil {
				errc <- err
				return
			}
		}
	})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCommitDuringBulkPuts measures one-record commits — another
// context's one-artifact commit — while another goroutine writes what a
// 10,000-artifact commit writes: PutSame of 12,000 records (2,000 of
// 600 bytes, as its state-map nodes, and 10,000 of 290, as its payloads),
// then a small Commit, over and over. Each of b.N commits starts 1 ms
// after the last ended; the benchmark reports their p50, p99 and maximum.
// Like the read benchmarks above it uses only the kv API.
func BenchmarkCommitDuringBulkPuts(b *testing.B) {
	ctx := context.Background()
	d, err := badgerkv.Open(ctx, badgerkv.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	small := make([]byte, 700)
	timedDuring(b, func(i int) error {
		recs := make([]kv.Record, 12_000)
		for j := range recs {
			v := make([]byte, 290)
			if j < 2000 {
				v = make([]byte, 600)
			}
			rand.Read(v)
			recs[j] = kv.Record{Key: fmt.Appendf(nil, "bulk\x00%d-%d", i, j), Value: v}
		}
		if err := d.PutSame(ctx, recs); err != nil {
			return err
		}
		return d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("ref\x00bulk"), Value: fmt.Append(nil, i)}}})
	}, func(i int) error {
		return d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: fmt.Appendf(nil, "small\x00%d", i), Value: small}}})
	})
}
