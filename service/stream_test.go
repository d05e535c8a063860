package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// TestWriteAuditJSONIsMarshal: the streamed report is byte for byte what
// Marshal writes, for reports with nil and empty lists, HTML-looking and
// non-ASCII strings, edge attributes and every optional trust member, and
// for random ones; a report type that gains a member fails here until
// WriteAuditJSON writes it.
func TestWriteAuditJSONIsMarshal(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[graph.AuditReport]().Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"AuditMeta", "Answer", "Trust", "Artifacts", "Edges", "Sources", "Summary"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("graph.AuditReport has members %v; WriteAuditJSON writes %v", names, want)
	}
	odd := "<a href=\"x\">&amp;</a> é ✓ \u2028 \x01"
	cases := []*graph.AuditReport{
		{},
		{AuditMeta: graph.AuditMeta{Context: odd}, Answer: "a", Artifacts: []graph.AuditArtifact{}, Edges: []*graph.Edge{}, Sources: []graph.AuditSource{}},
		{
			AuditMeta: graph.AuditMeta{Context: "c", Commit: "deadbeef", ContextHash: "00"},
			Answer:    odd,
			Trust:     graph.Trust{ID: odd, Status: graph.StatusQuarantined, Reason: odd, Roots: []string{"r"}, Path: []string{"a", "r"}, PathTruncated: true},
			Artifacts: []graph.AuditArtifact{{ID: "a", Type: "claim", Version: 3, ContentHash: hashing.Sum([]byte("x")), ProducedBy: odd, Depth: 1}},
			Edges:     []*graph.Edge{{From: "a", Rel: "derived_from", To: "b", Attrs: json.RawMessage(`{"note":"<&>"}`)}, {From: "b", Rel: "cites", To: "c"}},
			Sources:   []graph.AuditSource{{Locator: "https://example.test/?a=1&b=<2>", Artifacts: []string{"a", "b"}}, {Locator: "x"}},
			Summary:   graph.TrustSummary{Confirmed: 1, Quarantined: 2, PoisonRoots: 3},
		},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	str := func() string {
		const alphabet = "ab<>&\"\\é✓\n\t\u2028"
		r := []rune(alphabet)
		out := make([]rune, rng.IntN(8))
		for i := range out {
			out[i] = r[rng.IntN(len(r))]
		}
		return string(out)
	}
	for range 200 {
		rep := &graph.AuditReport{AuditMeta: graph.AuditMeta{Context: str(), Commit: str()}, Answer: str()}
		if rng.IntN(3) > 0 {
			rep.Artifacts = []graph.AuditArtifact{}
			for range rng.IntN(20) {
				rep.Artifacts = append(rep.Artifacts, graph.AuditArtifact{ID: str(), Type: str(), Version: rng.Int64N(9), Depth: rng.IntN(9),
					Trust: graph.Trust{ID: str(), Status: graph.StatusConfirmed, Reason: str()}})
			}
		}
		if rng.IntN(3) > 0 {
			for range rng.IntN(20) {
				rep.Edges = append(rep.Edges, &graph.Edge{From: str(), Rel: str(), To: str()})
			}
		}
		if rng.IntN(3) > 0 {
			for range rng.IntN(5) {
				rep.Sources = append(rep.Sources, graph.AuditSource{Locator: str(), Artifacts: []string{str()}})
			}
		}
		cases = append(cases, rep)
	}
	checkIsMarshal(t, cases, WriteAuditJSON)
}

// failingWriter fails once it has taken n bytes.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("connection reset")
	}
	w.n -= len(p)
	return len(p), nil
}

// TestWriteAuditJSONWriteError: a writer that fails part way (a client
// gone) makes WriteAuditJSON return its error rather than go on.
func TestWriteAuditJSONWriteError(t *testing.T) {
	rep := &graph.AuditReport{Answer: "a"}
	for i := range 20000 {
		rep.Artifacts = append(rep.Artifacts, graph.AuditArtifact{ID: fmt.Sprintf("a%05d", i), Type: "claim"})
	}
	if err := WriteAuditJSON(&failingWriter{n: 100 << 10}, rep); err == nil || err.Error() != "connection reset" {
		t.Fatalf("error %v; want the writer's", err)
	}
}

// fieldNames lists the members of struct type T, in order.
func fieldNames[T any]() []string {
	var names []string
	for f := range reflect.TypeFor[T]().Fields() {
		names = append(names, f.Name)
	}
	return names
}

// oddText returns a random short string of characters JSON escapes or
// HTML would.
func oddText(rng *rand.Rand) string {
	r := []rune("ab<>&\"\\é✓\n\t\u2028")
	out := make([]rune, rng.IntN(8))
	for i := range out {
		out[i] = r[rng.IntN(len(r))]
	}
	return string(out)
}

// TestWriteComparisonJSONIsMarshal: the streamed comparison is byte for
// byte what Marshal writes — equal and unequal, nil and empty lists, odd
// strings, edge attributes present and absent, random ones; a comparison
// type that gains a member fails here until WriteComparisonJSON writes it.
func TestWriteComparisonJSONIsMarshal(t *testing.T) {
	if got, want := fieldNames[Comparison](), []string{"Equal", "A", "B", "Divergences"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Comparison has members %v; WriteComparisonJSON writes %v", got, want)
	}
	if got, want := fieldNames[ProducerDivergence](), []string{"Producer", "OnlyInA", "OnlyInB", "Changed", "EdgesOnlyInA", "EdgesOnlyInB", "EdgesChanged"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ProducerDivergence has members %v; WriteComparisonJSON writes %v", got, want)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	version := func() replay.ArtifactVersion {
		return replay.ArtifactVersion{Type: oddText(rng), Version: rng.Int64N(5), ContentHash: hashing.Sum([]byte(oddText(rng))), ProducedBy: oddText(rng)}
	}
	attrs := func() json.RawMessage {
		if rng.IntN(2) == 0 {
			return nil
		}
		return json.RawMessage(`{"w":"<&>"}`)
	}
	cases := []*Comparison{
		{},
		{Equal: true, A: CompareSide{Context: "a", Commit: hashing.Sum([]byte("a"))}, B: CompareSide{Context: "b", Ref: "main"}, Divergences: []ProducerDivergence{}},
		{Divergences: []ProducerDivergence{{}}},
	}
	for range 200 {
		c := &Comparison{Equal: rng.IntN(2) == 0, A: CompareSide{Context: oddText(rng), Ref: oddText(rng), ContextHash: hashing.Sum([]byte{1})}, B: CompareSide{Context: oddText(rng)}}
		for range rng.IntN(4) {
			d := ProducerDivergence{Producer: oddText(rng)}
			if rng.IntN(3) > 0 {
				d.OnlyInA, d.OnlyInB, d.Changed = []ComparedArtifact{}, []ComparedArtifact{}, []ChangedArtifact{}
				d.EdgesOnlyInA, d.EdgesOnlyInB, d.EdgesChanged = []graph.EdgeKey{}, []graph.EdgeKey{}, []ChangedEdge{}
			}
			for range rng.IntN(6) {
				d.OnlyInA = append(d.OnlyInA, ComparedArtifact{ID: oddText(rng), ArtifactVersion: version()})
				d.OnlyInB = append(d.OnlyInB, ComparedArtifact{ID: oddText(rng), ArtifactVersion: version()})
				d.Changed = append(d.Changed, ChangedArtifact{ID: oddText(rng), Fields: []string{"type"}, A: version(), B: version()})
				k := graph.EdgeKey{From: oddText(rng), Rel: oddText(rng), To: oddText(rng)}
				d.EdgesOnlyInA = append(d.EdgesOnlyInA, k)
				d.EdgesOnlyInB = append(d.EdgesOnlyInB, k)
				d.EdgesChanged = append(d.EdgesChanged, ChangedEdge{EdgeKey: k, AAttrs: attrs(), BAttrs: attrs()})
			}
			c.Divergences = append(c.Divergences, d)
		}
		cases = append(cases, c)
	}
	checkIsMarshal(t, cases, WriteComparisonJSON)
}

// TestWriteDiffJSONIsMarshal: the streamed diff is byte for byte what
// Marshal writes — with and without its commits and hashes, nil and empty
// lists, odd strings, attributes, trust changes, random ones; a diff type
// that gains a member fails here until WriteDiffJSON writes it.
func TestWriteDiffJSONIsMarshal(t *testing.T) {
	want := []string{"From", "To", "FromHash", "ToHash", "Added", "Removed", "Changed", "EdgesAdded", "EdgesRemoved", "EdgesChanged", "Trust"}
	if got := fieldNames[replay.DiffResult](); !reflect.DeepEqual(got, want) {
		t.Fatalf("replay.DiffResult has members %v; WriteDiffJSON writes %v", got, want)
	}
	rng := rand.New(rand.NewPCG(10, 11))
	version := func() *replay.ArtifactVersion {
		if rng.IntN(4) == 0 {
			return nil
		}
		return &replay.ArtifactVersion{Type: oddText(rng), Version: rng.Int64N(5), ContentHash: hashing.Sum([]byte(oddText(rng))), ProducedBy: oddText(rng)}
	}
	digest := func() hashing.Digest {
		if rng.IntN(2) == 0 {
			return hashing.Digest{}
		}
		return hashing.Sum([]byte(oddText(rng)))
	}
	cases := []*replay.DiffResult{{}, {From: hashing.Sum([]byte("f")), ToHash: hashing.Sum([]byte("t")), Added: []replay.ArtifactChange{}, Trust: []replay.TrustChange{}}}
	for range 200 {
		d := &replay.DiffResult{From: digest(), To: digest(), FromHash: digest(), ToHash: digest()}
		if rng.IntN(3) > 0 {
			d.Added, d.Removed, d.Changed = []replay.ArtifactChange{}, []replay.ArtifactChange{}, []replay.ArtifactChange{}
			d.EdgesAdded, d.EdgesRemoved, d.EdgesChanged, d.Trust = []replay.EdgeChange{}, []replay.EdgeChange{}, []replay.EdgeChange{}, []replay.TrustChange{}
		}
		for range rng.IntN(6) {
			d.Added = append(d.Added, replay.ArtifactChange{ID: oddText(rng), New: version()})
			d.Removed = append(d.Removed, replay.ArtifactChange{ID: oddText(rng), Old: version()})
			d.Changed = append(d.Changed, replay.ArtifactChange{ID: oddText(rng), Old: version(), New: version()})
			e := replay.EdgeChange{From: oddText(rng), Rel: oddText(rng), To: oddText(rng)}
			if rng.IntN(2) == 0 {
				e.OldAttrs, e.NewAttrs = json.RawMessage(`{"a":"<"}`), json.RawMessage(`[1,"&"]`)
			}
			d.EdgesAdded = append(d.EdgesAdded, e)
			d.EdgesRemoved = append(d.EdgesRemoved, e)
			d.EdgesChanged = append(d.EdgesChanged, e)
			d.Trust = append(d.Trust, replay.TrustChange{ID: oddText(rng), Old: graph.StatusConfirmed, New: graph.StatusQuarantined})
		}
		cases = append(cases, d)
	}
	checkIsMarshal(t, cases, WriteDiffJSON)
}

// checkIsMarshal checks that write writes each of cases as the bytes
// Marshal returns.
func checkIsMarshal[T any](t *testing.T, cases []T, write func(io.Writer, T) error) {
	t.Helper()
	for i, v := range cases {
		want, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := write(&got, v); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("case %d: streamed\n%s\nMarshal\n%s", i, got.Bytes(), want)
		}
	}
}
