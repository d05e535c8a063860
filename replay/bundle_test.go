package replay

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// bundleFixture is a chain with a side branch merged back, a blob named by
// a payload, and a deleted artifact.
func bundleFixture(t *testing.T) *memChain {
	m := newMemChain(t)
	blob := []byte("<html>the page body</html>")
	bd := hashing.Sum(blob)
	m.blobs[bd] = blob
	m.commit("main", tPut("q", "question", map[string]any{"text": "what is the price?"}))
	m.commit("main", tPut("f", "fetch_verdict", map[string]any{"verdict": "RETRIEVED", "url": "https://example.org/p", "body": bd.String(),
		"not_a_blob": "sha256:" + strings.Repeat("0", 64)}), tLink("f", "derived_from", "q"))
	m.branch("exp", "main")
	m.commit("exp", tPut("c", "claim", map[string]any{"text": "it costs 3 <EUR> & more \u2028"}), tLink("c", "extracted_from", "f"))
	m.commit("main", tPut("n", "note", map[string]any{"n": 1}))
	m.commit("main", tDel("n"))
	if _, err := m.merge("main", "exp", nil); err != nil {
		t.Fatal(err)
	}
	m.commit("main", tPut("a", "answer", map[string]any{"text": "3 EUR"}), tLinkAttrs("a", "supported_by", "c", map[string]any{"weight": 1}))
	return m
}

func exportFixture(t *testing.T, m *memChain) []byte {
	t.Helper()
	h := BundleHeader{Context: "run-1", Settings: BundleSettings{Quarantine: "observe", Created: m.order[0].Time}}
	for _, name := range []string{"exp", "main"} {
		h.Branches = append(h.Branches, BundleBranch{Name: name, Head: m.heads[name]})
	}
	var buf bytes.Buffer
	got, err := ExportBundle(context.Background(), &buf, h, m, m.order, m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Commits != len(m.order) || got.Blobs != 1 || got.Objects != 5 {
		t.Fatalf("header counts %+v", got)
	}
	return buf.Bytes()
}

func TestBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	m := bundleFixture(t)
	raw := exportFixture(t, m)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if !strings.HasPrefix(lines[0], `{"type":"header","format":"artifactd-bundle/v1","context":"run-1"`) {
		t.Fatalf("header line: %s", lines[0])
	}
	if want := 1 + len(m.order) + 5 + 1; len(lines) != want {
		t.Fatalf("%d lines, want %d", len(lines), want)
	}
	b, err := ReadBundle(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Verify(ctx, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.ID != m.heads["main"] || res.State.Hash() != m.head("main").ContextHash || res.Commits != len(m.order) {
		t.Fatalf("verify: commit %s hash %s commits %d", res.Commit.ID.Short(), res.State.Hash(), res.Commits)
	}
	// At a side branch and at a commit prefix.
	res, err = b.Verify(ctx, "exp", Options{})
	if err != nil || res.State.Hash() != m.head("exp").ContextHash {
		t.Fatalf("verify exp: %v", err)
	}
	res, err = b.Verify(ctx, m.order[2].ID.Hex()[:10], Options{})
	if err != nil || res.State.Hash() != m.order[2].ContextHash {
		t.Fatalf("verify at prefix: %v", err)
	}
	// Fold reads the bundle as a Source, with no store.
	fres, err := Fold(ctx, b, m.heads["main"], Options{Objects: ObjectsAll})
	if err != nil || fres.State.Hash() != m.head("main").ContextHash {
		t.Fatalf("fold: %v", err)
	}
	// The payload with HTML characters and U+2028 is byte-exact.
	for _, c := range b.Commits() {
		ops, _ := b.Ops(ctx, c)
		for _, op := range ops {
			if op.ID == "c" {
				data, _ := b.Object(ctx, op.ContentHash)
				if !bytes.Contains(data, []byte("<EUR> & more \u2028")) {
					t.Fatalf("object rewritten: %s", data)
				}
			}
		}
	}
	if blobs := b.Blobs(); len(blobs) != 1 {
		t.Fatalf("blobs = %v", blobs)
	}
	// Exporting what was read gives the same bytes.
	var again bytes.Buffer
	if _, err := ExportBundle(ctx, &again, b.Header, b, b.Commits(), bundleBlobs{b}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), raw) {
		t.Fatalf("re-export differs:\n%s\n---\n%s", again.Bytes(), raw)
	}
}

// bundleBlobs serves a bundle's blobs as a BlobStore.
type bundleBlobs struct{ b *Bundle }

func (s bundleBlobs) HasBlob(ctx context.Context, d hashing.Digest) (bool, error) {
	_, ok := s.b.Blob(d)
	return ok, nil
}

func (s bundleBlobs) GetBlob(ctx context.Context, d hashing.Digest) ([]byte, error) {
	b, _ := s.b.Blob(d)
	return b, nil
}

func TestBundleTampered(t *testing.T) {
	ctx := context.Background()
	m := bundleFixture(t)
	raw := exportFixture(t, m)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	// Line index of each commit (lines[1+i] is m.order[i]).
	commitLine := func(i int) int { return 1 + i }
	objectLine := func(substr string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, `{"type":"object"`) && strings.Contains(l, substr) {
				return i
			}
		}
		t.Fatalf("no object line with %q", substr)
		return -1
	}
	blobLine := len(lines) - 1
	fPut := 2 // the commit that puts f (and names the blob)
	cases := []struct {
		name string
		edit func(ls []string) []string
		// want is the index in m.order of the commit the error must name,
		// or -1 for an error that names no commit.
		want int
	}{
		{"op changed", func(ls []string) []string {
			ls[commitLine(3)] = strings.Replace(ls[commitLine(3)], `"id":"c"`, `"id":"C"`, 1)
			return ls
		}, 3},
		{"op version changed", func(ls []string) []string {
			ls[commitLine(fPut)] = strings.Replace(ls[commitLine(fPut)], `"version":1`, `"version":2`, 1)
			return ls
		}, fPut},
		{"object byte flipped", func(ls []string) []string {
			i := objectLine("what is the price")
			ls[i] = strings.Replace(ls[i], "price", "prize", 1)
			return ls
		}, 1},
		{"object made unreadable", func(ls []string) []string {
			i := objectLine("3 EUR")
			ls[i] = strings.Replace(ls[i], `"3 EUR"`, `"3 EUR`, 1)
			return ls
		}, len(m.order) - 1},
		{"commit line removed", func(ls []string) []string {
			return append(ls[:commitLine(4)], ls[commitLine(4)+1:]...)
		}, 5},
		{"head commit line removed", func(ls []string) []string {
			return append(ls[:commitLine(len(m.order)-1)], ls[commitLine(len(m.order)-1)+1:]...)
		}, len(m.order) - 1},
		{"commit message changed", func(ls []string) []string {
			ls[commitLine(2)] = strings.Replace(ls[commitLine(2)], `"message":"step"`, `"message":"stop"`, 1)
			return ls
		}, 2},
		{"blob byte flipped", func(ls []string) []string {
			ls[blobLine] = strings.Replace(ls[blobLine], `"base64":"P`, `"base64":"Q`, 1)
			return ls
		}, fPut},
		{"object line removed", func(ls []string) []string {
			i := objectLine("what is the price")
			return append(ls[:i], ls[i+1:]...)
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls := tc.edit(append([]string(nil), lines...))
			tampered := strings.Join(ls, "\n") + "\n"
			if tampered == string(raw) {
				t.Fatal("the edit changed nothing")
			}
			b, err := ReadBundle(strings.NewReader(tampered))
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Verify(ctx, "", Options{})
			if !errors.Is(err, ErrBroken) {
				t.Fatalf("verify: %v, want ErrBroken", err)
			}
			var ce *ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("verify: %v, want a *ChainError", err)
			}
			if want := m.order[tc.want].ID; ce.Commit != want {
				t.Fatalf("names commit %s (%v), want %s (seq %d)", ce.Commit.Short(), err, want.Short(), tc.want+1)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), m.order[tc.want].ID.String()) {
				t.Fatalf("message does not name the commit: %v", err)
			}
		})
	}
}

func TestBundleMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"\n\n",
		`{"type":"commit"}` + "\n",
		`{"type":"header","format":"artifactd-bundle/v9"}` + "\n",
		"not json\n",
	} {
		if _, err := ReadBundle(strings.NewReader(in)); !errors.Is(err, ErrBundle) {
			t.Errorf("%q: %v, want ErrBundle", in, err)
		}
	}
	m := bundleFixture(t)
	raw := exportFixture(t, m)
	// An extra unknown line is a defect the verification reports.
	b, err := ReadBundle(bytes.NewReader(append(raw, []byte(`{"type":"mystery"}`+"\n")...)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(context.Background(), "", Options{}); !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), "mystery") {
		t.Fatalf("unknown line: %v", err)
	}
	// Writing out of order is refused.
	var buf bytes.Buffer
	bw, _ := NewBundleWriter(&buf, BundleHeader{Context: "x"})
	if err := bw.Object(hashing.Sum(nil), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := bw.Commit(m.order[0], nil); err == nil {
		t.Fatal("a commit after an object was accepted")
	}
}

func TestBlobRefs(t *testing.T) {
	a, b := hashing.Sum([]byte("a")), hashing.Sum([]byte("b"))
	data := []byte(`{"x":"` + a.String() + `","y":["` + b.String() + `",{"` + a.String() + `":1}],"z":"sha256:XYZ","w":"prefix ` + b.String() + `"}`)
	got := BlobRefs(data)
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("refs = %v", got)
	}
}

// TestBundleBranchNamedWithHex: a bundle's branch named with the digits
// a commit's id starts with hid that commit from Resolve (and Verify's
// ref), silently. Digits that are a branch and a prefix of another
// commit are refused naming both; a full id is the commit; sha256:<digits>
// is the commit; a branch no other commit starts with is the branch.
func TestBundleBranchNamedWithHex(t *testing.T) {
	m := bundleFixture(t)
	b, err := ReadBundle(bytes.NewReader(exportFixture(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	old, head := m.order[1].ID, m.heads["main"]
	digits := old.Hex()[:8]
	b.Header.Branches = append(b.Header.Branches, BundleBranch{Name: digits, Head: head},
		BundleBranch{Name: old.Hex(), Head: head}, BundleBranch{Name: "cafef00d", Head: head})
	if c, err := b.Resolve(digits); err == nil || !strings.Contains(err.Error(), "both a branch") || !strings.Contains(err.Error(), old.Short()) {
		t.Errorf("Resolve(%s) = %v, %v; want an error naming the branch and commit %s", digits, c, err, old.Short())
	}
	for ref, want := range map[string]hashing.Digest{old.Hex(): old, "sha256:" + digits: old, "cafef00d": head} {
		if c, err := b.Resolve(ref); err != nil || c.ID != want {
			t.Errorf("Resolve(%s) = %v, %v; want %s", ref, c, err, want.Short())
		}
	}
}
