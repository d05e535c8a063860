package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
)

// TestGraphExpandOnlyWhatIsThere: ?expand= values that name no artifact
// of the state are dropped before any link is built, and the list is
// bounded in bytes. Every node's links repeat the list: 50 made-up ids of
// 1,200 bytes made a 60 KB request into a 62 MB page of 500 nodes.
func TestGraphExpandOnlyWhatIsThere(t *testing.T) {
	s := openStore(t)
	ops := []graph.Op{putOp(t, "hub", "claim", "agent", map[string]any{"text": "hub"})}
	for i := range 499 {
		id := fmt.Sprintf("leaf%03d", i)
		ops = append(ops, putOp(t, id, "claim", "agent", map[string]any{"text": "leaf"}), linkOp(id, "mentions", "hub"))
	}
	loadContext(t, s, "star", ops...)
	h := New(Options{Store: s, Logger: quietLogger()})
	q := url.Values{"root": {"hub"}, "expand": {"leaf007"}}
	for i := range 50 {
		q.Add("expand", fmt.Sprintf("made-up-%02d-", i)+strings.Repeat("x", 1200))
	}
	page := func(q url.Values) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/contexts/star/graph?"+q.Encode(), nil))
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
		return rec.Body.String()
	}
	body := page(q)
	// The time-travel control keeps the request's query as it came, in
	// a few links; the nodes' links (two a node, 500 nodes) carry none.
	if n := strings.Count(body, "made-up-00-"); n > 10 {
		t.Errorf("the page carries an expand value that names no artifact %d times", n)
	}
	if !strings.Contains(body, "expand=leaf007") {
		t.Error("the expand value that names an artifact is not carried on")
	}
	// What the made-up values still cost (the time-travel form keeps the
	// request's query as it came) is a few times the request, not a
	// multiple of the nodes.
	base := page(url.Values{"root": {"hub"}, "expand": {"leaf007"}})
	if extra, req := len(body)-len(base), len(q.Encode()); extra > 6*req {
		t.Errorf("a request of %d bytes made the page %d bytes longer", req, extra)
	}
	// The bytes bound, on ids of the state: 40 ids of 100 bytes are more
	// than 2 KiB, so not all of them are kept.
	var long []graph.Op
	for i := range 40 {
		long = append(long, putOp(t, fmt.Sprintf("%03d-%s", i, strings.Repeat("y", 96)), "claim", "agent", map[string]any{"text": "long"}))
	}
	loadContext(t, s, "long", long...)
	gq, p := parseGraphQuery(func() url.Values {
		v := url.Values{"root": {"000-" + strings.Repeat("y", 96)}}
		for i := range 40 {
			v.Add("expand", fmt.Sprintf("%03d-%s", i, strings.Repeat("y", 96)))
		}
		return v
	}())
	if p != nil {
		t.Fatal(p)
	}
	size := 0
	for _, e := range gq.expand {
		size += len(e)
	}
	if size > maxExpandBytes || len(gq.expand) == 0 || len(gq.expand) == 40 {
		t.Errorf("kept %d expand ids of %d bytes in all (bound %d)", len(gq.expand), size, maxExpandBytes)
	}
}
