package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
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
	for i, rep := range cases {
		want, err := Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteAuditJSON(&got, rep); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("case %d: streamed\n%s\nMarshal\n%s", i, got.Bytes(), want)
		}
	}
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
