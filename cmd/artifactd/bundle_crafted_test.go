package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

func bundleLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func writeBundleLines(t *testing.T, lines []map[string]any) string {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range lines {
		b, _ := json.Marshal(l)
		buf.Write(append(b, '\n'))
	}
	p := filepath.Join(t.TempDir(), "crafted.jsonl")
	os.WriteFile(p, buf.Bytes(), 0o644)
	return p
}

// appendCommit appends to the bundle a commit on main's head with ops,
// its ops hash, context hash (given) and id recomputed, and moves main.
func appendCommit(t *testing.T, lines []map[string]any, ops []graph.Op, ctxHash *hashing.Digest, author string) []map[string]any {
	t.Helper()
	hdr := lines[0]
	var headID string
	for _, br := range hdr["branches"].([]any) {
		if br.(map[string]any)["name"] == "main" {
			headID = br.(map[string]any)["head"].(string)
		}
	}
	var head map[string]any
	for _, l := range lines {
		if l["type"] == "commit" && l["id"] == headID {
			head = l
		}
	}
	hid, _ := hashing.ParseDigest(headID)
	ch, _ := hashing.ParseDigest(head["context_hash"].(string))
	if ctxHash != nil {
		ch = *ctxHash
	}
	seq, _ := head["seq"].(json.Number).Int64()
	tm := hashing.FormatTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := replay.NewCommit([]hashing.Digest{hid}, ops, ch, author, "crafted", tm)
	if err != nil {
		t.Fatal(err)
	}
	opsJSON, _ := json.Marshal(ops)
	var opsAny any
	json.Unmarshal(opsJSON, &opsAny)
	if opsAny == nil {
		opsAny = []any{}
	}
	line := map[string]any{"type": "commit", "id": c.ID.String(), "seq": seq + 1, "parents": []any{hid.String()},
		"context_hash": ch.String(), "ops_hash": c.OpsHash.String(), "author": author, "message": "crafted", "time": tm,
		"artifacts": head["artifacts"], "edges": head["edges"], "ops": opsAny}
	// insert after the last commit line
	var out []map[string]any
	last := 0
	for i, l := range lines {
		if l["type"] == "commit" {
			last = i
		}
	}
	out = append(out, lines[:last+1]...)
	out = append(out, line)
	out = append(out, lines[last+1:]...)
	n, _ := hdr["commits"].(json.Number).Int64()
	hdr["commits"] = n + 1
	for _, br := range hdr["branches"].([]any) {
		if br.(map[string]any)["name"] == "main" {
			br.(map[string]any)["head"] = c.ID.String()
		}
	}
	return out
}

// TestBundleWithAnEmptyCommitRefusedWhole: a bundle whose hashes all
// verify but which holds a commit no store writes (one parent, no ops) is
// refused by replay and by import before anything is written; replay
// called it sound and import stopped part-way, leaving the context behind
// and calling it store corruption.
func TestBundleWithAnEmptyCommitRefusedWhole(t *testing.T) {
	f := newVerifyFixture(t)
	bundle := filepath.Join(t.TempDir(), "b.jsonl")
	if code, _, errOut := runArtifactd(t, "export", "--data", f.dir, "--context", "c", "-o", bundle); code != 0 {
		t.Fatal(errOut)
	}
	cases := map[string]func(lines []map[string]any) []map[string]any{
		"empty commit": func(lines []map[string]any) []map[string]any {
			return appendCommit(t, lines, []graph.Op{}, nil, "agent")
		},
		"empty author": func(lines []map[string]any) []map[string]any {
			return appendCommit(t, lines, []graph.Op{}, nil, "")
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			p := writeBundleLines(t, edit(bundleLines(t, bundle)))
			rcode, _, rerr := runArtifactd(t, "replay", p)
			if rcode == 0 || !strings.Contains(rerr, "no ops and one parent") {
				t.Errorf("replay: exit %d %s", rcode, rerr)
			}
			dst := filepath.Join(t.TempDir(), "dst")
			if code, _, errOut := runArtifactd(t, "demo", "--data", dst); code != 0 {
				t.Fatal(errOut)
			}
			icode, _, ierr := runArtifactd(t, "import", "--data", dst, p)
			if icode == 0 || !strings.Contains(ierr, "no ops and one parent") {
				t.Errorf("import: exit %d %s", icode, ierr)
			}
			if lcode, lout, _ := runArtifactd(t, "log", "--data", dst, "--context", "c", "-n", "1"); lcode == 0 {
				t.Errorf("the refused import left context c: %s", lout)
			}
		})
	}
}
