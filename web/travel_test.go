package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// travelPart is the time-travel control of a page.
func travelPart(body string) string {
	i := strings.Index(body, `id="travel"`)
	j := strings.Index(body, `id="timeline"`)
	if i < 0 || j < i {
		return ""
	}
	return body[i:j]
}

// TestTravelControl: every context page has a slider over its branch's
// commits that keeps the view, step links, and what changed at the shown
// step; the slider's form redirects to the same view at the chosen step.
func TestTravelControl(t *testing.T) {
	h, pc, s := newPlanServer(t)
	loadBig(t, s, "bulk", 1000)
	hex := func(step string) string { return pc.Steps[step].ID.Hex() }
	amp := func(u string) string { return strings.ReplaceAll(u, "&", "&amp;") }

	// At main's head: step 11 of 11 (the context's first commit, then
	// s1…s10), the previous step is the same view at s9.
	_, body := get(t, h, "/ui/contexts/poison-plan/graph?root=s5&up=2")
	tv := travelPart(body)
	for _, want := range []string{
		`<input type="range" id="step" name="step" min="1" max="11" value="11"`,
		`<input type="hidden" name="root" value="s5"><input type="hidden" name="up" value="2">`,
		`id="step-prev" rel="prev"`,
		amp(`href="/ui/contexts/poison-plan/graph?at=` + hex("s9") + `&root=s5&up=2" id="step-prev"`),
		`4 ops: 1 artifact added, 3 edges added`,
		amp(`href="/ui/contexts/poison-plan/diff?from=` + hex("s9") + `&to=` + hex("s10") + `" id="step-diff"`),
	} {
		if !strings.Contains(tv, want) {
			t.Errorf("main head: control lacks %s:\n%s", want, tv)
		}
	}
	if strings.Contains(tv, `id="step-next"`) {
		t.Error("the head has a next step")
	}

	// The form: step 6 is s5's commit; every parameter of the view stays,
	// repeated ones too.
	res, _ := get(t, h, "/ui/contexts/poison-plan/graph?expand=s8&expand=s6&root=s5&up=2&step=6")
	if want := "/ui/contexts/poison-plan/graph?at=" + hex("s5") + "&expand=s8&expand=s6&root=s5&up=2"; res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
		t.Errorf("step=6: %d %q, want 303 %q", res.StatusCode, res.Header.Get("Location"), want)
	}
	// A step past the end is the head; on the diff page from= and to= go
	// (the diff then shows what changed at the step).
	res, _ = get(t, h, "/ui/contexts/poison-plan/diff?from=main&to=refetch&step=99&on=refetch")
	if want := "/ui/contexts/poison-plan/diff?at=" + pc.Refetch.ID.Hex() + "&on=refetch"; res.Header.Get("Location") != want {
		t.Errorf("diff step=99: %q, want %q", res.Header.Get("Location"), want)
	}
	for _, bad := range []string{"step=0", "step=x", "step=2&on=%3Cscript%3E"} {
		res, body := get(t, h, "/ui/contexts/poison-plan?"+bad)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "invalid-query") {
			t.Errorf("%s: %d", bad, res.StatusCode)
		}
	}

	// At s5's commit: step 6, and what s5 added, with its trust.
	_, body = get(t, h, "/ui/contexts/poison-plan/artifacts/s3?at="+hex("s5"))
	tv = travelPart(body)
	for _, want := range []string{
		`value="6"`, `2 ops: 1 artifact added, 1 edge added, trust of 1 artifact changed`,
		`<span class="kind added">added</span> <a href="/ui/contexts/poison-plan/artifacts/s5?at=` + hex("s5") + `">s5</a>`,
		`<li>s5: new, <span class="badge quarantined">`,
		amp(`href="/ui/contexts/poison-plan/artifacts/s3?at=` + hex("s6") + `" id="step-next"`),
	} {
		if !strings.Contains(tv, want) {
			t.Errorf("at s5: control lacks %s:\n%s", want, tv)
		}
	}

	// The refetch branch: 12 steps; its last changed s1 and lifted the
	// quarantine.
	_, body = get(t, h, "/ui/contexts/poison-plan/artifacts/s1?at=refetch")
	tv = travelPart(body)
	for _, want := range []string{`max="12" value="12"`, `<input type="hidden" name="on" value="refetch">`, ` on refetch</label>`,
		`<span class="kind changed">changed</span>`, `<li>s1: <span class="badge poison_root">poison root</span> → <span class="badge confirmed">confirmed</span></li>`} {
		if !strings.Contains(tv, want) {
			t.Errorf("refetch head: control lacks %s:\n%s", want, tv)
		}
	}
	// A commit below both heads is stepped on the branch the URL names,
	// else on main.
	_, body = get(t, h, "/ui/contexts/poison-plan?at="+hex("s10")+"&on=refetch")
	if tv := travelPart(body); !strings.Contains(tv, `max="12" value="11"`) || !strings.Contains(tv, `id="step-next"`) {
		t.Errorf("s10 on refetch:\n%s", tv)
	}
	_, body = get(t, h, "/ui/contexts/poison-plan?at="+hex("s10"))
	if tv := travelPart(body); !strings.Contains(tv, `max="11" value="11"`) || strings.Contains(tv, `id="step-next"`) {
		t.Errorf("s10 on main:\n%s", tv)
	}
	// The first commit created the context.
	res, _ = get(t, h, "/ui/contexts/poison-plan?step=1")
	_, body = get(t, h, res.Header.Get("Location"))
	if tv := travelPart(body); !strings.Contains(tv, `value="1"`) || !strings.Contains(tv, "the context was created") || strings.Contains(tv, `id="step-prev"`) {
		t.Errorf("step 1:\n%s", tv)
	}

	// A bulk step is summarized by its counts.
	_, body = get(t, h, "/ui/contexts/bulk")
	if tv := travelPart(body); !strings.Contains(tv, "2,700 ops: 1,000 artifacts more, 1,700 edges more") {
		t.Errorf("bulk step:\n%s", tv)
	}
}

// TestTravelPastAnArtifactsCreation slides an artifact page back to a
// commit before the artifact existed: the answer is a 404 that says so
// and keeps the time-travel control, whose next step leads back to a
// commit that has it.
func TestTravelPastAnArtifactsCreation(t *testing.T) {
	h, pc, _ := newPlanServer(t)
	before := pc.Steps["s4"].ID.Hex() // s5 is created by the next step
	res, body := get(t, h, "/ui/contexts/poison-plan/artifacts/s5?at="+before)
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("s5 at the commit before it: %d, want 404", res.StatusCode)
	}
	if !strings.Contains(body, "no artifact with this id at commit") {
		t.Errorf("the page does not say the artifact is absent at this commit:\n%s", body)
	}
	tv := travelPart(body)
	next := strings.ReplaceAll(`href="/ui/contexts/poison-plan/artifacts/s5?at=`+pc.Steps["s5"].ID.Hex()+`" id="step-next"`, "&", "&amp;")
	if !strings.Contains(tv, `<input type="range" id="step"`) || !strings.Contains(tv, next) {
		t.Errorf("the 404 lacks the control or its next step to s5's commit (%s):\n%s", next, tv)
	}
	// JSON clients still get the plain problem.
	req := httptest.NewRequest("GET", "/ui/contexts/poison-plan/artifacts/s5?at="+before, nil)
	req.Header.Set("Accept", "application/problem+json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"status":404`) {
		t.Errorf("JSON: %d %s", rec.Code, rec.Body.String())
	}
}

// failingGetKV is memkv whose Get fails for one key once armed.
type failingGetKV struct {
	*memkv.Driver
	fail atomic.Pointer[[]byte]
}

func (d *failingGetKV) Get(ctx context.Context, key []byte) ([]byte, error) {
	if k := d.fail.Load(); k != nil && bytes.Equal(*k, key) {
		return nil, errors.New("injected read error")
	}
	return d.Driver.Get(ctx, key)
}

// TestTravelControlLeftOutWhenItsChainFails: a page whose commit chain
// cannot be read (a parent commit's record fails) is served without the
// time-travel control; the control dereferenced the missing chain and
// the handler panicked before.
func TestTravelControlLeftOutWhenItsChainFails(t *testing.T) {
	drv := &failingGetKV{Driver: memkv.New()}
	s, err := store.Open(context.Background(), store.Options{Driver: drv, Clock: testClock(), NoSync: true, Logger: quietLogger(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	loadContext(t, s, "c", putOp(t, "a", "claim", "agent", map[string]any{"text": "one"}))
	c2 := commit(t, s, "c", "", "agent", "two", putOp(t, "b", "claim", "agent", map[string]any{"text": "two"}))
	parent := c2.Parents[0]
	key := append([]byte("cmt\x00c\x00"), parent[:]...)
	if _, err := drv.Driver.Get(context.Background(), key); err != nil {
		t.Fatalf("the parent's commit record is not at %q: %v", key, err)
	}
	drv.fail.Store(&key)
	h := New(Options{Store: s, Logger: quietLogger()})
	// The quarantine page needs the chain for its control alone: it is
	// served. The context page lists the chain's commits too: a read
	// failure is its 500, not a panic.
	for target, want := range map[string]int{"/ui/contexts/c/quarantine": 200, "/ui/contexts/c": 500} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("GET %s: handler panicked: %v", target, p)
				}
			}()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
			if rec.Code != want {
				t.Errorf("GET %s: %d, want %d", target, rec.Code, want)
			}
		}()
	}
}
