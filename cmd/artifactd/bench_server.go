package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/store"
)

// benchServer is an in-process server over a data directory on a loopback
// port, which a scenario can restart (close the store, reopen the same
// directory) to measure cold heads. It is used by one goroutine at a time.
type benchServer struct {
	dir  string
	tmp  bool // dir was created here and is removed by close
	opts benchStore
	st   *store.Store
	srv  *http.Server
	base string // "http://127.0.0.1:port" of the running server
	// stopLimit ends the memory limit's following of the store's caches
	// (limitMemory) and gives GOMAXPROCS back (setServerProcs).
	stopLimit func()
}

// benchStore is how the in-process server opens its store: bench's
// --nosync, and serve's --cache-bytes, --mapped-bytes, --value-threshold
// and --table-bytes (zero: the store's defaults, as serve has them).
type benchStore struct {
	NoSync         bool  `json:"nosync,omitempty"`
	CacheBytes     int64 `json:"cache_bytes,omitempty"`
	MappedBytes    int64 `json:"mapped_bytes,omitempty"`
	ValueThreshold int64 `json:"value_threshold,omitempty"`
	TableBytes     int64 `json:"table_bytes,omitempty"`
}

// flags defines the in-process store's flags on fs.
func (o *benchStore) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.NoSync, "nosync", false, "in-process server only: skip fsync (measures the API without durability; acknowledged commits may be lost by an OS crash)")
	fs.Int64Var(&o.CacheBytes, "cache-bytes", 0, "in-process server only: serve --cache-bytes (0: its default)")
	fs.Int64Var(&o.MappedBytes, "mapped-bytes", 0, "in-process server only: serve --mapped-bytes (0: its default; -1: no bound)")
	fs.Int64Var(&o.ValueThreshold, "value-threshold", 0, "in-process server only: serve --value-threshold (0: its default; -1: every value below 1 MiB in the tree)")
	fs.Int64Var(&o.TableBytes, "table-bytes", 0, "in-process server only: serve --table-bytes (0: its default)")
}

// check refuses what serve would refuse.
func (o benchStore) check() error {
	switch {
	case o.CacheBytes != 0 && o.CacheBytes < store.MinCacheBytes:
		return fmt.Errorf("--cache-bytes must be 0 (the default) or at least 1 MiB (%d)", store.MinCacheBytes)
	case o.MappedBytes < -1:
		return errors.New("--mapped-bytes must be -1 (no bound), 0 (the default) or a size")
	case o.ValueThreshold < -1 || o.ValueThreshold > store.MaxValueThreshold:
		return fmt.Errorf("--value-threshold must be -1, 0 (the default) or a size up to %d", store.MaxValueThreshold)
	case o.TableBytes != 0 && (o.TableBytes < store.MinTableBytes || o.TableBytes > store.MaxTableBytes):
		return fmt.Errorf("--table-bytes must be 0 (the default) or from %d to %d", store.MinTableBytes, store.MaxTableBytes)
	}
	return nil
}

// storeOptions returns the store.Options the in-process server opens dir
// with: each of o's fields as the field of that name (zero: the store's
// default, as serve has it).
func (o benchStore) storeOptions(dir string) store.Options {
	return store.Options{Dir: dir, Logger: discardLogger(), NoSync: o.NoSync,
		CacheBytes: o.CacheBytes, MappedBytes: o.MappedBytes, ValueThreshold: o.ValueThreshold,
		TableBytes: o.TableBytes}
}

// newBenchServer opens dir (a new temporary directory when empty) and
// serves it.
func newBenchServer(ctx context.Context, dir string, opts benchStore) (*benchServer, error) {
	s := &benchServer{dir: dir, opts: opts}
	if dir == "" {
		d, err := os.MkdirTemp("", "artifactd-bench-")
		if err != nil {
			return nil, fmt.Errorf("temporary data directory: %w", err)
		}
		s.dir, s.tmp = d, true
	}
	if err := s.start(ctx); err != nil {
		if s.tmp {
			_ = os.RemoveAll(s.dir)
		}
		return nil, err
	}
	return s, nil
}

func (s *benchServer) start(ctx context.Context) (err error) {
	reg := httpapi.NewRegistry()
	restoreProcs := setServerProcs() // as serve does
	defer func() {
		if err != nil {
			restoreProcs()
		}
	}()
	st, err := store.Open(ctx, store.Options{Dir: s.dir, Logger: discardLogger(), NoSync: s.opts.NoSync,
		CacheBytes: s.opts.CacheBytes, MappedBytes: s.opts.MappedBytes, ValueThreshold: s.opts.ValueThreshold,
		TableBytes: s.opts.TableBytes})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	if err := reg.Load(ctx, st); err != nil {
		st.Close()
		return fmt.Errorf("load types: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return fmt.Errorf("listen: %w", err)
	}
	s.st = st
	limit := limitMemory(st, s.opts.CacheBytes) // as serve does, so the figures are serve's
	s.stopLimit = func() { limit(); restoreProcs() }
	s.srv = &http.Server{Handler: newServer(st, reg, serveConfig{Logger: discardLogger()}), ReadHeaderTimeout: 10 * time.Second}
	s.base = "http://" + ln.Addr().String()
	go func() { _ = s.srv.Serve(ln) }()
	return nil
}

// stop shuts the HTTP server down and closes the store, keeping the
// directory.
func (s *benchServer) stop() error {
	if s.st == nil {
		return nil
	}
	s.stopLimit()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if cerr := s.st.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	s.st, s.srv = nil, nil
	return err
}

// restart closes the store and reopens the same directory on a new port,
// returning the memory the closed store held to the OS first, so that the
// resident size after it is what the reopened store needs.
func (s *benchServer) restart(ctx context.Context) error {
	if err := s.stop(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	return s.start(ctx)
}

// close stops the server and removes a temporary directory.
func (s *benchServer) close() error {
	err := s.stop()
	if s.tmp {
		if rerr := os.RemoveAll(s.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
