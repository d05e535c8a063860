package kvtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
)

// Bench runs the seam's benchmarks on drivers from newDriver (a new,
// empty driver per sub-benchmark; Bench closes it):
//
//   - PutImmutable/<n>: one PutImmutable of n new records of about 200 B
//     (keys like the store's content-addressed ones), reported in
//     records/s;
//   - Commit: one small durable commit as the store makes it — a commit
//     record and a seq entry set, and the branch ref swapped from the
//     previous commit — reported in ns/op (its latency: commits run one
//     after another).
func Bench(b *testing.B, newDriver func(b *testing.B) kv.Driver) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("PutImmutable/%d", n), func(b *testing.B) {
			d := newDriver(b)
			defer d.Close()
			ctx := context.Background()
			next := 0
			batch := func() []kv.Record {
				recs := make([]kv.Record, n)
				for i := range recs {
					recs[i] = kv.Record{Key: immKey(next), Value: immValue(next)}
					next++
				}
				return recs
			}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				recs := batch()
				b.StartTimer()
				if err := d.PutImmutable(ctx, recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "records/s")
		})
	}
	b.Run("Commit", func(b *testing.B) {
		d := newDriver(b)
		defer d.Close()
		ctx := context.Background()
		ref := []byte("ref\x00bench\x00main")
		var prev []byte
		i := uint64(0)
		for b.Loop() {
			id := binary.BigEndian.AppendUint64(make([]byte, 24, 32), i)
			sw := kv.Swap{Key: ref, Old: prev, New: id, Absent: prev == nil}
			err := d.Commit(ctx, kv.Batch{
				Sets: []kv.Record{
					{Key: append([]byte("cmt\x00bench\x00"), id...), Value: make([]byte, 300)},
					{Key: binary.BigEndian.AppendUint64([]byte("seq\x00bench\x00"), i), Value: id},
				},
				Swaps: []kv.Swap{sw},
			})
			if err != nil {
				b.Fatal(err)
			}
			prev, i = id, i+1
		}
	})
}
