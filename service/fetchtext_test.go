package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// failingDriver fails its n-th Commit from when it is armed (n counted
// from 1), having written nothing of it.
type failingDriver struct {
	kv.Driver
	left atomic.Int64 // commits before the failing one; < 0: not armed
}

var errInjected = errors.New("injected commit failure")

func (d *failingDriver) Commit(ctx context.Context, b kv.Batch) error {
	if d.left.Add(-1) == -1 {
		return errInjected
	}
	return d.Driver.Commit(ctx, b)
}

// TestFetchTextHeldWithItsVerdict: a fetch whose write fails at any of
// its commits answers an error and leaves no verdict, and a fetch that
// succeeds has its text blob held by the context with the verdict's
// commit. Before the text's blob joined that commit, its membership was a
// write after it: failing that write answered an error for a verdict
// already committed.
func TestFetchTextHeldWithItsVerdict(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// An HTML read: its text is not its body, so the text is a blob of
	// its own.
	text := "The harbour ferry crosses the bay every forty minutes, and the last one leaves at eleven."
	body := "<html><body><p>" + text + "</p></body></html>"
	in := FetchInput{ID: "f1", Kind: "tool", Tool: "browser.read", URL: "https://news.example/a", ContentType: "text/html", Body: &body}
	for n := int64(1); ; n++ {
		d := &failingDriver{Driver: memkv.New()}
		d.left.Store(-1 << 62)
		st, err := store.Open(ctx, store.Options{Driver: d, Logger: log, ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		reg := NewRegistry()
		if err := reg.Load(ctx, st); err != nil {
			t.Fatal(err)
		}
		s := New(Options{Store: st, Types: reg, Logger: log, LeaseKey: make([]byte, 32)})
		if _, err := st.CreateContext(ctx, "k", store.ModeObserve); err != nil {
			t.Fatal(err)
		}
		d.left.Store(n - 1)
		fw, err := s.RecordFetch(ctx, "k", in)
		d.left.Store(-1 << 62)
		var there bool
		gerr := st.Read(ctx, "k", "", func(v *store.View) error {
			there = v.State.Artifact("f1") != nil
			return nil
		})
		if err != nil {
			if !errors.Is(err, errInjected) {
				t.Fatalf("commit %d failed: RecordFetch: %v", n, err)
			}
			if gerr != nil || there {
				t.Fatalf("commit %d failed: RecordFetch answered %v, but the verdict is in the state (read: %v)", n, err, gerr)
			}
			st.Close()
			continue
		}
		if gerr != nil || !there || fw.TextBlob == "" || fw.Text != text {
			t.Fatalf("fetch with no failure (%d commits): %v, text blob %q, text %q", n-1, gerr, fw.TextBlob, fw.Text)
		}
		dg, err := hashing.ParseDigest(fw.TextBlob)
		if err != nil {
			t.Fatal(err)
		}
		if held, err := st.BlobMember(ctx, "k", dg); err != nil || !held {
			t.Fatalf("text blob %s held by the context: %v %v", fw.TextBlob, held, err)
		}
		st.Close()
		if n < 2 {
			t.Fatalf("a fetch with text made %d commits; the test injected no failure", n-1)
		}
		return
	}
}
