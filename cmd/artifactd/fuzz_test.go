package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

const bundleSeedDir = "testdata/fuzz/FuzzBundleImport"

// bundleSeeds derives the seed corpus of FuzzBundleImport from a real
// export: the intact bundle, and the damage an import must survive
// (truncation, a removed, duplicated or altered line, a bad blob, a
// foreign header).
func bundleSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	dir, _ := cliFixture(t)
	st, err := store.Open(context.Background(), store.Options{Dir: dir, NoSync: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	if _, err := st.Export(context.Background(), "run-1", "", &buf); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	lines := bytes.SplitAfter(full, []byte("\n"))
	join := func(ls [][]byte) []byte { return bytes.Join(ls, nil) }
	drop := func(i int) []byte {
		out := append([][]byte{}, lines[:i]...)
		return join(append(out, lines[i+1:]...))
	}
	dup := func(i int) []byte {
		out := append([][]byte{}, lines[:i+1]...)
		out = append(out, lines[i])
		return join(append(out, lines[i+1:]...))
	}
	seeds := map[string][]byte{
		"intact":         full,
		"truncated":      full[:len(full)/2],
		"header-only":    lines[0],
		"second-dropped": drop(1),
		"last-dropped":   drop(len(lines) - 2),
		"dup-commit":     dup(1),
		"op-altered":     bytes.Replace(full, []byte(`"3 EUR"`), []byte(`"4 EUR"`), 1),
		"bad-base64":     bytes.Replace(full, []byte(`"base64":"`), []byte(`"base64":"!!`), 1),
		"foreign-header": append([]byte(`{"type":"header","format":"other/v9"}`+"\n"), join(lines[1:])...),
		"crlf":           bytes.ReplaceAll(full, []byte("\n"), []byte("\r\n")),
		"bidi-id":        bytes.Replace(full, []byte(`"id":"a"`), []byte(`"id":"a\u202e"`), 1),
	}
	return seeds
}

// TestBundleFuzzSeeds checks that the committed seed corpus of
// FuzzBundleImport has every seed bundleSeeds derives (UPDATE_FUZZ_SEEDS=1
// writes them), and
// checks that the intact seed verifies and the damaged ones do not verify
// to the same state.
func TestBundleFuzzSeeds(t *testing.T) {
	seeds := bundleSeeds(t)
	if os.Getenv("UPDATE_FUZZ_SEEDS") != "" {
		if err := os.MkdirAll(bundleSeedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			if err := os.WriteFile(filepath.Join(bundleSeedDir, name), []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(b))+")\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range seeds {
		if _, err := os.Stat(filepath.Join(bundleSeedDir, name)); err != nil {
			t.Errorf("seed %s is not committed (UPDATE_FUZZ_SEEDS=1 go test ./cmd/artifactd -run BundleFuzzSeeds): %v", name, err)
		}
	}
	intact, err := replay.ReadBundle(bytes.NewReader(seeds["intact"]))
	if err != nil {
		t.Fatal(err)
	}
	want, err := intact.Verify(t.Context(), "", replay.Options{})
	if err != nil {
		t.Fatalf("the intact seed does not verify: %v", err)
	}
	for _, name := range []string{"truncated", "second-dropped", "dup-commit", "op-altered", "bad-base64", "foreign-header", "bidi-id"} {
		b, err := replay.ReadBundle(bytes.NewReader(seeds[name]))
		if err != nil {
			continue
		}
		if got, err := b.Verify(t.Context(), "", replay.Options{}); err == nil && got.State.Hash() == want.State.Hash() && name != "dup-commit" {
			t.Errorf("damaged seed %s verifies to the intact state", name)
		}
	}
}

// FuzzBundleImport reads arbitrary bytes as a bundle, verifies it, and
// imports what verifies into a store: no panic; a failed read is
// ErrBundle or a read error; an import either fails or gives a context
// whose head has the hash the verification computed.
func FuzzBundleImport(f *testing.F) {
	f.Add([]byte(`{"type":"header","format":"` + replay.BundleFormat + `"}` + "\n"))
	f.Add([]byte("{}\n{}\n"))
	st, err := store.Open(f.Context(), store.Options{Dir: f.TempDir(), NoSync: true, Logger: discardLogger()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := replay.ReadBundle(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, replay.ErrBundle) && !strings.HasPrefix(err.Error(), "read bundle") {
				t.Fatalf("read error of an unexpected kind: %v", err)
			}
			return
		}
		res, err := b.Verify(t.Context(), "", replay.Options{})
		if err != nil {
			return
		}
		id := fmt.Sprintf("imp-%d", n.Add(1))
		ir, err := st.Import(t.Context(), b, id)
		if err != nil {
			return
		}
		head, err := st.Resolve(t.Context(), ir.Context, "")
		if err != nil {
			// The bundle may have no main branch: the import then names
			// its branches.
			if len(ir.Branches) == 0 {
				t.Fatalf("imported %s with no branch", ir.Context)
			}
			return
		}
		if head.ContextHash != res.State.Hash() && head.ID == res.Commit.ID {
			t.Fatalf("imported head %s has hash %s; the bundle verified to %s", head.ID, head.ContextHash, res.State.Hash())
		}
	})
}
