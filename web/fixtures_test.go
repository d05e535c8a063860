package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// testClock returns increasing, deterministic commit times.
func testClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 3, 14, 9, 26, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(1500 * time.Millisecond)
		return t
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openStore opens a store in a temporary directory, closed at cleanup.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	so := store.Options{Dir: t.TempDir(), Clock: testClock(), NoSync: true, Logger: quietLogger()}
	testBackend(t, &so)
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func canon(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hashing.CanonicalizeObject(raw)
	if err != nil {
		t.Fatalf("canonicalize %s: %v", raw, err)
	}
	return c
}

func putOp(t testing.TB, id, typ, by string, data any) graph.Op {
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, ProducedBy: by, Data: canon(t, data)}
}

func linkOp(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to}
}

func commit(t testing.TB, s *store.Store, ctxID, branch, author, msg string, ops ...graph.Op) *replay.Commit {
	t.Helper()
	res, err := s.Commit(context.Background(), store.CommitRequest{Context: ctxID, Branch: branch, Author: author, Message: msg, Ops: ops})
	if err != nil {
		t.Fatalf("commit %q: %v", msg, err)
	}
	return res.Commit
}

// planFile is testdata/poison-plan/plan.json.
type planFile struct {
	Steps []struct {
		ID         string          `json:"id"`
		Kind       string          `json:"kind"`
		What       string          `json:"what"`
		Type       string          `json:"type"`
		ProducedBy string          `json:"produced_by"`
		Data       json.RawMessage `json:"data"`
		Evidence   struct {
			URL      string            `json:"url"`
			FinalURL string            `json:"final_url"`
			Status   int               `json:"status"`
			Headers  map[string]string `json:"headers"`
			Body     string            `json:"body"`
		} `json:"evidence"`
		Edges []struct {
			Rel string `json:"rel"`
			To  string `json:"to"`
		} `json:"edges"`
	} `json:"steps"`
	Expect struct {
		Observe struct {
			PoisonRoots []string `json:"poison_roots"`
			Quarantined []string `json:"quarantined"`
			Confirmed   []string `json:"confirmed"`
		} `json:"observe"`
		AfterRefetch struct {
			RefetchBody string `json:"refetch_body"`
		} `json:"after_refetch"`
	} `json:"expect"`
}

// planContext is the poison plan loaded into a store.
type planContext struct {
	ID      string
	Plan    planFile
	Steps   map[string]*replay.Commit // the commit that wrote each step
	Head    *replay.Commit            // main after the ten steps
	Refetch *replay.Commit            // branch "refetch": s1 fetched again, RETRIEVED
}

// fetchVerdict builds the data a gate-classified fetch_verdict carries:
// the verdict, its reason and a receipt in the gate/v1 shape.
func fetchVerdict(url, finalURL string, status int, ctype, body, verdict, reason, detail string) map[string]any {
	sum := sha256.Sum256([]byte(body))
	layer := ""
	layers := []map[string]any{
		{"layer": "transport", "verdict": "RETRIEVED"},
		{"layer": "extraction", "verdict": "RETRIEVED"},
		{"layer": "fingerprint", "verdict": "RETRIEVED"},
	}
	if verdict != "RETRIEVED" {
		layer = "transport"
		layers[0] = map[string]any{"layer": "transport", "verdict": verdict, "reason": reason, "detail": detail}
		layers[1] = map[string]any{"layer": "extraction", "verdict": "UNKNOWN", "reason": "extraction.too_little_text", "detail": "0 readable characters"}
	}
	receipt := map[string]any{
		"ruleset": "gate/v1", "verdict": verdict, "url": url, "final_url": finalURL,
		"redirects": []any{}, "status": status, "content_type": ctype,
		"raw_bytes": len(body), "decoded_bytes": len(body), "extracted_bytes": len(body), "readable_chars": len(body),
		"body_sha256": "sha256:" + hex.EncodeToString(sum[:]), "layers": layers,
	}
	if layer != "" {
		receipt["layer"], receipt["reason"] = layer, reason
	}
	data := map[string]any{"verdict": verdict, "url": url, "final_url": finalURL, "status": status, "receipt": receipt}
	if reason != "" {
		data["reason"] = reason
	}
	return data
}

// loadPoisonPlan replays the ten-step plan into context ctxID (observe
// mode), one commit per step, then puts a RETRIEVED re-fetch of s1 on a
// branch "refetch".
func loadPoisonPlan(t testing.TB, s *store.Store, ctxID string) *planContext {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "poison-plan", "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	pc := &planContext{ID: ctxID, Steps: map[string]*replay.Commit{}}
	if err := json.Unmarshal(raw, &pc.Plan); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.CreateContext(ctx, ctxID, store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	for _, st := range pc.Plan.Steps {
		var ops []graph.Op
		author := "agent"
		msg := st.ID
		switch st.Kind {
		case "fetch":
			ev := st.Evidence
			verdict, reason, detail := "RETRIEVED", "", ""
			if st.ID == "s1" {
				verdict, reason, detail = "FAILED", "transport.empty_body", "HTTP 200 with an empty body"
			}
			ops = append(ops, putOp(t, st.ID, "fetch_verdict", "gate/v1",
				fetchVerdict(ev.URL, ev.FinalURL, ev.Status, ev.Headers["content-type"], ev.Body, verdict, reason, detail)))
			author = "gate"
			msg += ": fetch " + st.What
		default:
			var data map[string]any
			if err := json.Unmarshal(st.Data, &data); err != nil {
				t.Fatal(err)
			}
			ops = append(ops, putOp(t, st.ID, st.Type, st.ProducedBy, data))
			for _, e := range st.Edges {
				ops = append(ops, linkOp(st.ID, e.Rel, e.To))
			}
			msg += ": " + st.Type
		}
		pc.Steps[st.ID] = commit(t, s, ctxID, "", author, msg, ops...)
	}
	pc.Head = pc.Steps["s10"]
	if err := s.CreateBranch(ctx, ctxID, "refetch", pc.Head.ID); err != nil {
		t.Fatal(err)
	}
	s1 := pc.Plan.Steps[0].Evidence
	body := pc.Plan.Expect.AfterRefetch.RefetchBody
	pc.Refetch = commit(t, s, ctxID, "refetch", "gate", "s1: fetch again, RETRIEVED",
		putOp(t, "s1", "fetch_verdict", "gate/v1",
			fetchVerdict(s1.URL, s1.FinalURL, 200, "application/json", body, "RETRIEVED", "", "")))
	return pc
}

// Hostile strings for the XSS tests: each must be shown literally and
// never act.
const (
	xssScript   = `<script>window.__pwned=1</script>`
	xssImg      = `<img src=x onerror="window.__pwned=1">`
	xssJSURL    = `javascript:window.__pwned=1`
	xssSVG      = `</svg><script>window.__pwned=1</script>`
	xssDOT      = `"];evil[label="x", URL="javascript:window.__pwned=1"]; n0 -> n1 [`
	xssMermaid  = `%%{init: {"securityLevel": "loose"}}%% click n0 call alert(1)`
	xssDetails  = `<details open ontoggle="window.__pwned=1">x</details>`
	xssDots     = `../../ui/contexts/x`
	xssAttrText = `' onmouseover='window.__pwned=1' x='`
)

// hostileIDs are artifact ids built from the strings above.
var hostileIDs = []string{xssScript, xssImg, xssJSURL, xssSVG, xssDOT, xssMermaid, xssDetails, xssDots, xssAttrText, "..", ".", "a/b?c=d#e f%2Fg"}

// hostileContext is a context whose ids, producers, data, receipts and
// edge attributes carry the hostile strings. The answer "xss-answer"
// rests on all of them; the fetch "xss-fetch" failed with a hostile
// reason, so it is a poison root and the answer is quarantined.
func loadHostile(t testing.TB, s *store.Store, ctxID string) (first, head *replay.Commit) {
	t.Helper()
	if _, err := s.CreateContext(context.Background(), ctxID, store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	hostileData := map[string]any{
		"text": xssScript, "html": xssImg, "url": xssJSURL, "svg": xssSVG, "dot": xssDOT,
		"mermaid": xssMermaid + "\nclick n0 \"javascript:window.__pwned=1\"", "details": xssDetails,
		"source_url": xssJSURL,
	}
	fetch := fetchVerdict(xssJSURL, xssSVG, 200, xssScript, "", "FAILED", xssScript, xssImg)
	fetch["receipt"].(map[string]any)["title"] = xssDetails
	fetch["receipt"].(map[string]any)["error"] = xssSVG
	fetch["receipt"].(map[string]any)["redirects"] = []any{map[string]any{"url": xssJSURL, "status": 301}}
	fetch["receipt"].(map[string]any)["signals"] = []any{xssImg}
	first = commit(t, s, ctxID, "", xssScript, xssImg,
		putOp(t, "xss-fetch", "fetch_verdict", xssScript, fetch),
		putOp(t, "xss-question", "question", xssImg, map[string]any{"text": xssMermaid}))
	var ops []graph.Op
	for i, id := range hostileIDs {
		ops = append(ops, putOp(t, id, "claim", xssScript, hostileData))
		to := "xss-question"
		if i%2 == 0 {
			to = "xss-fetch"
		}
		l := linkOp(id, "derived_from", to)
		l.Attrs = canon(t, map[string]any{"note": xssImg, "href": xssJSURL, "dot": xssDOT, "svg": xssSVG})
		ops = append(ops, l)
	}
	ops = append(ops, putOp(t, "xss-answer", "answer", xssDetails, hostileData))
	for _, id := range hostileIDs {
		ops = append(ops, linkOp("xss-answer", "supported_by", id))
	}
	m := linkOp(hostileIDs[0], "mentions", hostileIDs[1])
	m.Attrs = canon(t, map[string]any{"why": xssMermaid})
	ops = append(ops, m)
	commit(t, s, ctxID, "", xssImg, xssSVG, ops...)
	// A new version of the question with hostile values, so field-level
	// diffs show them too.
	head = commit(t, s, ctxID, "", xssDetails, xssDOT,
		putOp(t, "xss-question", "question", xssImg, map[string]any{"text": xssImg, "html": xssScript, xssSVG: xssDetails}))

	// A context large enough for the clustered overview, its producers
	// hostile: ctxID + "-big".
	if _, err := s.CreateContext(context.Background(), ctxID+"-big", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	producers := []string{xssScript, xssImg, xssSVG, xssDOT}
	var big []graph.Op
	for i := range wholeNodes + 10 {
		id := fmt.Sprintf("%s-%03d", xssAttrText, i)
		big = append(big, putOp(t, id, "claim", producers[i%len(producers)], map[string]any{"text": xssDetails}))
		if i > 0 {
			big = append(big, linkOp(id, "derived_from", fmt.Sprintf("%s-%03d", xssAttrText, i-1)))
		}
	}
	commit(t, s, ctxID+"-big", "", xssScript, xssImg, big...)
	return first, head
}

// loadBig fills context ctxID with n artifacts in one commit: every tenth
// a fetch (one in fifty of those FAILED), the rest claims resting on the
// nearest fetch and on the previous claim of their group.
func loadBig(t testing.TB, s *store.Store, ctxID string, n int) *replay.Commit {
	t.Helper()
	return loadContext(t, s, ctxID, bigOps(t, n)...)
}

// loadContext creates context ctxID (observe mode) and commits ops to it
// in one commit.
func loadContext(t testing.TB, s *store.Store, ctxID string, ops ...graph.Op) *replay.Commit {
	t.Helper()
	if _, err := s.CreateContext(context.Background(), ctxID, store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	return commit(t, s, ctxID, "", "bench", "load", ops...)
}

// bigOps are the ops loadBig commits.
func bigOps(t testing.TB, n int) []graph.Op {
	ops := make([]graph.Op, 0, 3*n)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("a%05d", i)
		if i%10 == 0 {
			verdict, reason := "RETRIEVED", ""
			if i%500 == 0 {
				verdict, reason = "FAILED", "transport.status_5xx"
			}
			ops = append(ops, putOp(t, id, "fetch_verdict", "gate/v1", map[string]any{"verdict": verdict, "reason": reason, "url": "https://example.com/" + id}))
			continue
		}
		ops = append(ops, putOp(t, id, "claim", "agent", map[string]any{"text": "claim " + id, "n": i}))
		ops = append(ops, linkOp(id, "derived_from", fmt.Sprintf("a%05d", i-i%10)))
		if i%10 > 1 {
			ops = append(ops, linkOp(id, "supported_by", fmt.Sprintf("a%05d", i-1)))
		}
	}
	return ops
}
