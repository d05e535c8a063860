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
// maximum. It uses only the kv API, so the same file measures any
// version of the driver (with the store's defaults: a sync per write).
func BenchmarkGetDuringBulkPuts(b *testing.B) {
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
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			recs := make([]kv.Record, 2000)
			for j := range recs {
				v := make([]byte, 2048)
				rand.Read(v)
				recs[j] = kv.Record{Key: fmt.Appendf(nil, "node\x00%d-%d", i, j), Value: v}
			}
			err := d.PutSame(ctx, recs)
			if err == nil {
				err = d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: fmt.Appendf(nil, "ref%d", i%10), Value: []byte("c")}}})
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		if _, err := d.Get(ctx, probe); err != nil {
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
