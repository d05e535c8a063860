package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// readsFixture commits, into context "o", a chain c → b → a of notes
// (each derived_from the one before) and then a second version of b, and
// returns the two commits.
func readsFixture(t *testing.T, s *Service) (first, second *replay.Commit) {
	t.Helper()
	put := func(id, text string) graph.Op {
		return graph.Op{Op: graph.OpPut, ID: id, Type: "note", ProducedBy: "agent", Data: json.RawMessage(fmt.Sprintf(`{"text":%q}`, text))}
	}
	commit := func(ops ...graph.Op) *replay.Commit {
		res, err := s.Store().Commit(t.Context(), store.CommitRequest{Context: "o", Author: "t", Message: "m", Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return res.Commit
	}
	first = commit(put("a", "one"), put("b", "two"), put("c", "three"),
		graph.Op{Op: graph.OpLink, From: "b", Rel: "derived_from", To: "a"},
		graph.Op{Op: graph.OpLink, From: "c", Rel: "derived_from", To: "b"})
	second = commit(put("b", "two, again"))
	return first, second
}

// view runs fn on context "o" at at.
func view(t *testing.T, s *Service, at string, fn func(v *store.View) error) error {
	t.Helper()
	return s.Store().Read(t.Context(), "o", at, fn)
}

// wantFault checks that err classifies (Classify) as code, naming param
// with rule (both "" when the refusal names none).
func wantFault(t *testing.T, err error, code fault.Code, param, rule string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a %s fault", code)
	}
	fe := Classify(err)
	if fe.Code != code {
		t.Fatalf("code = %s (%s), want %s", fe.Code, fe.Detail, code)
	}
	if param == "" && rule == "" {
		return
	}
	if len(fe.Errors) != 1 || fe.Errors[0].Parameter != param || fe.Errors[0].Rule != rule {
		t.Fatalf("errors = %+v, want parameter %q rule %q", fe.Errors, param, rule)
	}
}

func TestArtifactAtReadsDataTrustAndWriter(t *testing.T) {
	s, _ := newService(t)
	first, second := readsFixture(t, s)
	for _, tc := range []struct {
		at    string
		wrote *replay.Commit
		text  string
	}{{"", second, "two, again"}, {first.ID.String(), first, "two"}} {
		err := view(t, s, tc.at, func(v *store.View) error {
			a, err := s.ArtifactAt(t.Context(), "o", v, "b")
			if err != nil {
				return err
			}
			if *a.WrittenIn != tc.wrote.ID || a.Trust == nil || a.Trust.Status != graph.StatusConfirmed {
				return fmt.Errorf("at %q: written in %s trust %+v, want %s confirmed", tc.at, a.WrittenIn.Short(), a.Trust, tc.wrote.ID.Short())
			}
			if !strings.Contains(string(a.Data), tc.text) {
				return fmt.Errorf("at %q: data %s, want %q", tc.at, a.Data, tc.text)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := view(t, s, "", func(v *store.View) error {
		_, err := s.ArtifactAt(t.Context(), "o", v, "nope")
		return err
	})
	wantFault(t, err, fault.NotFound, "", "")
	if !strings.Contains(err.Error(), `no artifact "nope" at commit`) {
		t.Fatalf("err = %v", err)
	}
}

func TestProvenanceQueryBounds(t *testing.T) {
	cases := []struct {
		q           ProvenanceQuery
		param, rule string // "" for a query that passes
		format      string // the format a passing query reads as
	}{
		{ProvenanceQuery{Depth: -1, MaxNodes: 1}, "", "", FormatJSON},
		{ProvenanceQuery{Depth: graph.MaxProvenanceDepth, MaxNodes: graph.MaxProvenanceNodes, Format: FormatDOT}, "", "", FormatDOT},
		{ProvenanceQuery{Depth: -2, MaxNodes: 1}, "depth", "range", ""},
		{ProvenanceQuery{Depth: graph.MaxProvenanceDepth + 1, MaxNodes: 1}, "depth", "range", ""},
		{ProvenanceQuery{Depth: 0, MaxNodes: 0}, "max_nodes", "range", ""},
		{ProvenanceQuery{Depth: 0, MaxNodes: graph.MaxProvenanceNodes + 1}, "max_nodes", "range", ""},
		{ProvenanceQuery{Depth: 0, MaxNodes: 1, Format: "svg"}, "format", "enum", ""},
		{ProvenanceQuery{Depth: -3, MaxNodes: 0, Format: "svg"}, "depth", "range", ""}, // the first parameter out of bounds is named
	}
	for _, tc := range cases {
		q, err := tc.q.Check()
		if tc.param == "" {
			if err != nil || q.Format != tc.format {
				t.Errorf("%+v: format %q err %v, want %q and no error", tc.q, q.Format, err, tc.format)
			}
			continue
		}
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Code != fault.InvalidQuery || len(fe.Errors) != 1 || fe.Errors[0].Parameter != tc.param || fe.Errors[0].Rule != tc.rule {
			t.Errorf("%+v: err %v, want invalid-query naming %s (%s)", tc.q, err, tc.param, tc.rule)
		}
	}
}

func TestProvenanceAtFormats(t *testing.T) {
	s, _ := newService(t)
	readsFixture(t, s)
	err := view(t, s, "", func(v *store.View) error {
		p, err := ProvenanceAt(v, "c", ProvenanceQuery{Depth: -1, MaxNodes: 10})
		if err != nil {
			return err
		}
		if p.Format != FormatJSON || len(p.Nodes) != 3 || len(p.Edges) != 2 || p.Truncated || p.Text != "" {
			return fmt.Errorf("json: %+v", p)
		}
		// The JSON keeps the API's field order.
		raw, _ := json.Marshal(p)
		if !strings.HasPrefix(string(raw), `{"commit":`) || !strings.Contains(string(raw), `],"id":"c","nodes":[`) || !strings.HasSuffix(string(raw), `"truncated":false}`) {
			return fmt.Errorf("json: %s", raw)
		}
		p, err = ProvenanceAt(v, "c", ProvenanceQuery{Depth: 1, MaxNodes: 10})
		if err != nil || len(p.Nodes) != 2 {
			return fmt.Errorf("depth 1: %+v, %v", p, err)
		}
		p, err = ProvenanceAt(v, "c", ProvenanceQuery{Depth: -1, MaxNodes: 2})
		if err != nil || len(p.Nodes) != 2 || !p.Truncated {
			return fmt.Errorf("max_nodes 2: %+v, %v", p, err)
		}
		for _, f := range []string{FormatMermaid, FormatDOT} {
			p, err = ProvenanceAt(v, "c", ProvenanceQuery{Depth: -1, MaxNodes: 10, Format: f})
			if err != nil || p.Nodes != nil || !strings.Contains(p.Text, "derived_from") {
				return fmt.Errorf("%s: %+v, %v", f, p, err)
			}
		}
		_, err = ProvenanceAt(v, "c", ProvenanceQuery{Depth: -1, MaxNodes: 0})
		wantFault(t, err, fault.InvalidQuery, "max_nodes", "range")
		_, err = ProvenanceAt(v, "nope", ProvenanceQuery{Depth: -1, MaxNodes: 10})
		wantFault(t, err, fault.NotFound, "", "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAuditAt(t *testing.T) {
	s, _ := newService(t)
	readsFixture(t, s)
	err := view(t, s, "", func(v *store.View) error {
		rep, err := AuditAt(t.Context(), v, "c")
		if err != nil {
			return err
		}
		if rep.Answer != "c" || len(rep.Artifacts) != 3 {
			return fmt.Errorf("audit of c: answer %q, %d artifacts", rep.Answer, len(rep.Artifacts))
		}
		_, err = AuditAt(t.Context(), v, "nope")
		wantFault(t, err, fault.NotFound, "", "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDiffSidesAndData(t *testing.T) {
	s, _ := newService(t)
	first, second := readsFixture(t, s)
	ctx := t.Context()
	_, err := s.DiffSides(ctx, "o", "", "main")
	wantFault(t, err, fault.InvalidQuery, "from", "required")
	_, err = s.DiffSides(ctx, "o", "not a ref!", "")
	wantFault(t, err, fault.InvalidRef, "from", "ref")
	_, err = s.DiffSides(ctx, "o", first.ID.String(), "../x")
	wantFault(t, err, fault.InvalidRef, "to", "ref")
	_, err = s.DiffSides(ctx, "o", "no-such-branch", "")
	wantFault(t, err, fault.NotFound, "", "")

	sides, err := s.DiffSides(ctx, "o", first.ID.String()[len("sha256:"):][:12], "")
	if err != nil {
		t.Fatal(err)
	}
	if sides[0].ID != first.ID || sides[1].ID != second.ID {
		t.Fatalf("sides %s..%s, want %s..%s (to defaults to main)", sides[0].ID.Short(), sides[1].ID.Short(), first.ID.Short(), second.ID.Short())
	}
	d, err := s.Store().Diff(ctx, "o", sides[0], sides[1])
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.DiffData(ctx, "o", sides, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Changed) != 1 || out.Changed[0].ID != "b" || len(out.Changed[0].Data) != 1 || out.Changed[0].Data[0].Pointer != "/text" {
		t.Fatalf("data diff: %+v", out.Changed)
	}
}

func TestParseRange(t *testing.T) {
	cases := []struct {
		text   string
		lo, hi int
		want   int
		ok     bool
	}{
		{"5", 1, 10, 5, true},
		{"+5", 1, 10, 5, true},
		{"-1", -1, 10, -1, true},
		{"10", 1, 10, 10, true},
		{"0", 1, 10, 0, false},
		{"11", 1, 10, 0, false},
		{"five", 1, 10, 0, false},
		{" 5", 1, 10, 0, false},
		{"5.0", 1, 10, 0, false},
		{"99999999999999999999", 1, 10, 0, false},
		{"-99999999999999999999", -1, 10, 0, false},
		// Not an integer, with a range whose lower end has no integer
		// below it: still refused.
		{"x", math.MinInt, 0, 0, false},
	}
	for _, tc := range cases {
		got, err := ParseRange("limit", tc.text, tc.lo, tc.hi)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("ParseRange(%q, %d, %d) = %d, %v; want %d", tc.text, tc.lo, tc.hi, got, err, tc.want)
			}
			continue
		}
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Code != fault.InvalidQuery || len(fe.Errors) != 1 || fe.Errors[0].Parameter != "limit" || fe.Errors[0].Rule != "range" {
			t.Errorf("ParseRange(%q, %d, %d) = %d, %v; want an invalid-query naming limit (range)", tc.text, tc.lo, tc.hi, got, err)
		}
	}
}
