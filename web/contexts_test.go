package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// TestContextListUnfilteredMatchesFiltered: the context page without a
// search or filter (which looks up only its page's artifacts) lists what
// the same page does with a filter every artifact passes (which looks up
// every artifact) — the rows, their order, the counts, the types — on the
// first, a middle and the last page and one past it, and over the state
// map after a restart as well as on a head made by commits. It reopens
// its store, so it keeps to the embedded backend (a store's Close closes
// the driver it was given) whichever the other tests use.
func TestContextListUnfilteredMatchesFiltered(t *testing.T) {
	dir := t.TempDir()
	so := store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*artifactsPerPage + 37
	loadContext(t, s, "claims", claimOps(t, n)...)
	rowsOf := func(body string) string {
		i := strings.Index(body, "<tbody")
		j := strings.Index(body[i:], "</tbody>")
		return body[i : i+j]
	}
	check := func(h http.Handler, what string) {
		for _, page := range []int{1, 2, 3, 4} {
			p := fmt.Sprintf("/ui/contexts/claims?page=%d", page)
			_, all := get(t, h, p)
			_, typed := get(t, h, p+"&type=claim")
			if rowsOf(all) != rowsOf(typed) {
				t.Errorf("%s, page %d: the unfiltered rows differ from the filtered ones", what, page)
			}
			if page <= 3 && !strings.Contains(all, fmt.Sprintf("of %d", n)) {
				t.Errorf("%s, page %d: no count of %d", what, page, n)
			}
			if want := fmt.Sprintf(`<option value="claim">claim (%d)</option>`, n); !strings.Contains(all, want) {
				t.Errorf("%s, page %d: the type list lacks %s", what, page, want)
			}
		}
	}
	check(New(Options{Store: s, Logger: quietLogger()}), "a head made by commits")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(New(Options{Store: s, Logger: quietLogger()}), "after a restart")
}

// TestContextPageHugePageNumber: a page number whose offset would
// overflow renders, past the last page, instead of panicking on a slice
// with a negative bound (or listing the first rows as a page before the
// first, as it once did).
func TestContextPageHugePageNumber(t *testing.T) {
	s := openStore(t)
	loadContext(t, s, "claims", claimOps(t, 150)...)
	h := New(Options{Store: s, Logger: quietLogger()})
	for _, page := range []string{"184467440737095517", "92233720368547760", "9223372036854775807", "3"} {
		for _, filter := range []string{"", "&type=claim"} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("page=%s%s: panic: %v", page, filter, p)
					}
				}()
				res, body := get(t, h, "/ui/contexts/claims?page="+page+filter)
				if res.StatusCode != http.StatusOK {
					t.Errorf("page=%s%s: status %d", page, filter, res.StatusCode)
				}
				if strings.Contains(body, `<td class="id"`) {
					t.Errorf("page=%s%s: lists artifacts past the last page", page, filter)
				}
			}()
		}
	}
}

// claimOps are n claims s0…s{n-1}, claim i derived_from claim i/2.
func claimOps(t testing.TB, n int) []graph.Op {
	var ops []graph.Op
	for i := range n {
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), "claim", "agent", map[string]any{"text": fmt.Sprintf("claim %d", i)}))
		if i > 0 {
			ops = append(ops, linkOp(fmt.Sprintf("s%d", i), "derived_from", fmt.Sprintf("s%d", i/2)))
		}
	}
	return ops
}
