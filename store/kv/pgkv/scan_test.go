package pgkv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// TestScanStoppedEarlyReadsLittle: a scan whose fn stops it after the
// first record has the server send a small part of the prefix, not all
// of it. A proxy between the driver and the server counts the bytes the
// server sent during the scan.
func TestScanStoppedEarlyReadsLittle(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := freshSchema(t)
	proxy, proxied := newPGProxy(t, dsn)
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: proxied, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n, size = 4000, 8 << 10 // 32 MiB under the prefix
	recs := make([]kv.Record, n)
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(i + j)
		}
		recs[i] = kv.Record{Key: fmt.Appendf(nil, "big/%05d", i), Value: v}
	}
	if err := d.PutImmutable(ctx, recs); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	for _, tc := range []struct {
		name string
		scan func(fn func(k, v []byte) error) error
	}{
		{"Scan", func(fn func(k, v []byte) error) error { return d.Scan(ctx, []byte("big/"), nil, 0, fn) }},
		{"ScanReverse", func(fn func(k, v []byte) error) error { return d.ScanReverse(ctx, []byte("big/"), nil, 0, fn) }},
	} {
		before := proxy.fromServer.Load()
		calls := 0
		err := tc.scan(func(k, v []byte) error {
			calls++
			if len(v) != size {
				return fmt.Errorf("%s: value of %d bytes, want %d", k, len(v), size)
			}
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("%s stopped by fn: %v after %d calls, want fn's error after 1", tc.name, err, calls)
		}
		sent := proxy.fromServer.Load() - before
		if total := int64(n * size); sent > total/8 {
			t.Errorf("%s stopped after 1 of %d records: the server sent %d bytes, %d%% of the prefix's %d (want under 1/8)", tc.name, n, sent, 100*sent/total, total)
		} else {
			t.Logf("%s stopped after 1 of %d records: the server sent %d bytes of %d", tc.name, n, sent, total)
		}
	}
}
