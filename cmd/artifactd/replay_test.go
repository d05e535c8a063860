package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// verifyFixture is a data directory written through the Go API: context
// "c" with three commits on main. The store is closed when it is returned,
// as it is when an operator runs the CLI.
type verifyFixture struct {
	dir     string
	commits []*replay.Commit // oldest first; the last is main's head
	// payloads are the canonical data of the artifacts at the head, by id.
	payloads map[string][]byte
}

func (f *verifyFixture) head() *replay.Commit { return f.commits[len(f.commits)-1] }

func newVerifyFixture(t *testing.T) *verifyFixture {
	t.Helper()
	ctx := context.Background()
	f := &verifyFixture{dir: filepath.Join(t.TempDir(), "data"), payloads: map[string][]byte{}}
	clock := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := store.Open(ctx, store.Options{Dir: f.dir, Logger: discardLogger(),
		Clock: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	put := func(id, typ, data string) graph.Op {
		canon, err := hashing.CanonicalizeObject([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		f.payloads[id] = canon
		return graph.Op{Op: graph.OpPut, ID: id, Type: typ, ProducedBy: "agent", Data: canon}
	}
	for _, ops := range [][]graph.Op{
		{put("q", "question", `{"text":"What did Q2 cost?"}`), put("e1", "evidence", `{"page":3,"text":"Q2: 41,200 EUR"}`)},
		{put("c1", "claim", `{"text":"Q2 cost 41,200 EUR"}`),
			{Op: graph.OpLink, From: "c1", Rel: "extracted_from", To: "e1"},
			{Op: graph.OpLink, From: "e1", Rel: "derived_from", To: "q", Attrs: []byte(`{"step":1}`)}},
		{put("e1", "evidence", `{"page":3,"text":"Q2: 41,200 EUR (audited)"}`), put("a", "answer", `{"text":"41,200 EUR"}`),
			{Op: graph.OpLink, From: "a", Rel: "supported_by", To: "c1"}},
	} {
		res, err := s.Commit(ctx, store.CommitRequest{Context: "c", Author: "agent", Message: "step", Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		f.commits = append(f.commits, res.Commit)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// runArtifactd runs the CLI in-process and returns its exit code and
// outputs.
func runArtifactd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// noCrash fails the test if the output looks like a Go panic.
func noCrash(t *testing.T, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		if strings.Contains(o, "panic:") || strings.Contains(o, "goroutine ") {
			t.Fatalf("the command crashed:\n%s", o)
		}
	}
}

func TestReplayVerify(t *testing.T) {
	f := newVerifyFixture(t)
	head, first := f.head(), f.commits[0]
	hash := head.ContextHash
	wrong := []byte(hash.Hex()) // the head hash with its last digit changed
	if wrong[len(wrong)-1] == '0' {
		wrong[len(wrong)-1] = '1'
	} else {
		wrong[len(wrong)-1] = '0'
	}
	cases := []struct {
		name string
		args []string
		code int
		// out and errOut must contain these.
		out, errOut []string
	}{
		{"full hash", []string{"--verify", hash.String()}, 0, []string{"verify:       OK", hash.String(), "commit:       " + head.ID.String()}, nil},
		{"bare hex", []string{"--verify", hash.Hex()}, 0, []string{"verify:       OK"}, nil},
		{"8-digit prefix", []string{"--verify", hash.Hex()[:8]}, 0, []string{"verify:       OK"}, nil},
		{"sha256: and a prefix", []string{"--verify", "sha256:" + hash.Hex()[:10]}, 0, []string{"verify:       OK"}, nil},
		{"wrong hash", []string{"--verify", "sha256:" + string(wrong)}, 1,
			[]string{"verify:       MISMATCH"}, []string{"expected: sha256:" + string(wrong), "actual:   " + hash.String()}},
		{"wrong prefix", []string{"--verify", "00000000"}, 1, nil, []string{"expected: 00000000", "actual:   " + hash.String()}},
		{"prefix of 7 digits", []string{"--verify", hash.Hex()[:7]}, 2, nil, []string{"--verify"}},
		{"not hex", []string{"--verify", "sha256:xyz12345"}, 2, nil, []string{"--verify"}},
		{"at an older commit", []string{"--at", first.ID.Hex()[:8], "--verify", first.ContextHash.String()}, 0,
			[]string{"verify:       OK", "commit:       " + first.ID.String()}, nil},
		{"at an older commit, full id", []string{"--at", first.ID.String(), "--verify", first.ContextHash.Hex()[:8]}, 0, []string{"verify:       OK"}, nil},
		{"at an older commit, head hash", []string{"--at", first.ID.Hex(), "--verify", hash.String()}, 1,
			nil, []string{"actual:   " + first.ContextHash.String()}},
		{"at the branch", []string{"--at", "main", "--verify", hash.String()}, 0, []string{"verify:       OK"}, nil},
		{"unknown commit", []string{"--at", "0123abcd", "--verify", hash.String()}, 2, nil, []string{"0123abcd"}},
		{"commit prefix of 7 digits", []string{"--at", head.ID.Hex()[:7]}, 2, nil, []string{head.ID.Hex()[:7]}},
		{"unknown branch", []string{"--at", "nope", "--verify", hash.String()}, 2, nil, []string{"nope"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", "--data", f.dir, "--context", "c"}, tc.args...)
			code, out, errOut := runArtifactd(t, args...)
			noCrash(t, out, errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, s := range tc.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.errOut {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}

func TestReplayUsageErrors(t *testing.T) {
	f := newVerifyFixture(t)
	hash := f.head().ContextHash.String()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown context", []string{"replay", "--data", f.dir, "--context", "nope", "--verify", hash}, `"nope"`},
		{"invalid context id", []string{"replay", "--data", f.dir, "--context", "../etc", "--verify", hash}, "../etc"},
		{"no context", []string{"replay", "--data", f.dir, "--verify", hash}, "--context"},
		{"no data directory", []string{"replay", "--data", filepath.Join(t.TempDir(), "missing"), "--context", "c"}, "missing"},
		{"unknown flag", []string{"replay", "--data", f.dir, "--context", "c", "--frobnicate"}, "frobnicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runArtifactd(t, tc.args...)
			noCrash(t, out, errOut)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want 2), stderr lacks %q?\n%s", code, tc.want, errOut)
			}
		})
	}
}

// TestReplayJSON checks the machine-readable report against the Go API's
// view of the head.
func TestReplayJSON(t *testing.T) {
	f := newVerifyFixture(t)
	head := f.head()
	code, out, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "c", "--json", "--verify", head.ContextHash.Hex()[:12])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Commit      hashing.Digest `json:"commit"`
		ContextHash hashing.Digest `json:"context_hash"`
		Commits     int            `json:"commits_replayed"`
		Ops         int            `json:"ops_replayed"`
		Artifacts   int            `json:"artifacts"`
		Edges       int            `json:"edges"`
		Types       map[string]int `json:"types"`
		Verified    *bool          `json:"verified"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Commit != head.ID || rep.ContextHash != head.ContextHash || rep.Verified == nil || !*rep.Verified {
		t.Fatalf("report %+v, head %s hash %s", rep, head.ID, head.ContextHash)
	}
	if rep.Commits != len(f.commits)+1 || rep.Artifacts != head.Artifacts || rep.Edges != head.Edges ||
		rep.Types["evidence"] != 1 || rep.Types["answer"] != 1 {
		t.Fatalf("report counts %+v, head records %d artifacts, %d edges", rep, head.Artifacts, head.Edges)
	}
}

// TestServerURLTakesHostPort: --server takes "host:port" as curl does
// (the API's first-session example writes B=localhost:7070); it failed
// with "unsupported protocol scheme" before.
func TestServerURLTakesHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:7070":        "http://localhost:7070",
		"http://127.0.0.1:7070": "http://127.0.0.1:7070",
		"https://a.example":     "https://a.example",
		"":                      "",
	} {
		if got := serverURL(in); got != want {
			t.Errorf("serverURL(%q) = %q, want %q", in, got, want)
		}
	}
}
