package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// diskBulkBytes is what the disk scenario's bulk writer writes and syncs
// each time: the size of one of the embedded Badger database's memtables
// (badgerkv.DefaultMemTableSize), which is what it writes out as a level-0
// table — and about what a 10,000-op commit writes.
const diskBulkBytes = 32 << 20

// diskAppendBytes is the size of each small synced append: about a
// one-artifact commit's write-ahead log entry.
const diskAppendBytes = 512

// diskFigures are the disk scenario's figures: the latency of a small
// synced append — the floor of any durable one-artifact commit — on the
// data directory's file system, alone and while another file in it takes
// bulk writes, each synced.
type diskFigures struct {
	AppendBytes int     `json:"append_bytes"`
	BulkBytes   int     `json:"bulk_bytes"`
	Alone       latency `json:"sync_alone"`
	DuringBulk  latency `json:"sync_during_bulk"`
	// Bulk is the time of each bulk write and its sync.
	Bulk latency `json:"bulk_write_and_sync"`
}

// scenarioDisk measures the disk under the server (see diskFigures), with
// no request to it: what the other scenarios' durable writes cannot beat.
// Each phase runs for --duration (default 10 s); the files live in a
// directory of their own inside the data directory and are removed
// afterwards.
func scenarioDisk(ctx context.Context, r *scenarioRun) error {
	f := &diskFigures{AppendBytes: diskAppendBytes, BulkBytes: diskBulkBytes}
	r.res.Disk = f
	dir, err := os.MkdirTemp(r.server.dir, "disk-probe-")
	if err != nil {
		return fmt.Errorf("disk probe: %w", err)
	}
	defer os.RemoveAll(dir)
	r.phase("synced appends alone")
	lat, err := syncedAppends(ctx, filepath.Join(dir, "alone"), r.cfg.duration, nil)
	f.Alone = summarise(lat)
	if err != nil {
		return err
	}
	r.phase("synced appends during bulk writes")
	stop := make(chan struct{})
	type bulkResult struct {
		took []time.Duration
		err  error
	}
	bulk := make(chan bulkResult, 1)
	go func() {
		var res bulkResult
		buf := make([]byte, 1<<20)
		name := filepath.Join(dir, "bulk")
		for {
			select {
			case <-stop:
				bulk <- res
				return
			default:
			}
			t0 := time.Now()
			if res.err = writeSynced(name, buf, diskBulkBytes); res.err != nil {
				bulk <- res
				return
			}
			res.took = append(res.took, time.Since(t0))
		}
	}()
	lat, err = syncedAppends(ctx, filepath.Join(dir, "during"), r.cfg.duration, stop)
	f.DuringBulk = summarise(lat)
	res := <-bulk
	f.Bulk = summarise(res.took)
	if res.err != nil && err == nil {
		err = fmt.Errorf("disk probe: bulk writer: %w", res.err)
	}
	return err
}

// syncedAppends appends diskAppendBytes to a new file at name and syncs
// it, again and again for d, returning each append's latency. It closes
// stop (when not nil) before it returns.
func syncedAppends(ctx context.Context, name string, d time.Duration, stop chan struct{}) (lat []time.Duration, err error) {
	if stop != nil {
		defer close(stop)
	}
	fh, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	defer fh.Close()
	buf := make([]byte, diskAppendBytes)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ctx.Err() != nil {
			return lat, errCut
		}
		t0 := time.Now()
		if _, err := fh.Write(buf); err != nil {
			return lat, fmt.Errorf("disk probe: %w", err)
		}
		if err := fh.Sync(); err != nil {
			return lat, fmt.Errorf("disk probe: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// writeSynced writes size bytes of buf, repeated, to a new file at name,
// syncs it and removes it.
func writeSynced(name string, buf []byte, size int) error {
	fh, err := os.Create(name)
	if err != nil {
		return err
	}
	for n := 0; n < size; n += len(buf) {
		if _, err := fh.Write(buf[:min(len(buf), size-n)]); err != nil {
			fh.Close()
			return err
		}
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	return os.Remove(name)
}
