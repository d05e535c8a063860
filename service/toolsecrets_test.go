package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// declaredSecret is the secret secretService declares.
const declaredSecret = "Qx7vLm2Rp9Kw"

// secretService is a service over an in-memory store that declares
// declaredSecret, with an observe context "k".
func secretService(t *testing.T) (*Service, *store.Store) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, store.Options{Driver: memkv.New(), Logger: log, ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := NewRegistry()
	if err := reg.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	sec, err := gate.NewSecrets([]string{declaredSecret})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, Types: reg, Logger: log, LeaseKey: make([]byte, 32), Sanitize: gate.SanitizeOptions{Secrets: sec}})
	if _, err := st.CreateContext(ctx, "k", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	return s, st
}

// TestToolResultKeepsDeclaredSecretsOut: a tool result's produced_by is
// masked as a fetch's is (it was stored as sent), and a declared secret in
// its id or an edge's attributes, which masking would change into another
// name, is refused with nothing written.
func TestToolResultKeepsDeclaredSecretsOut(t *testing.T) {
	const secret = declaredSecret
	ctx := context.Background()
	s, st := secretService(t)
	out := "fine"
	if _, err := s.RecordToolResult(ctx, "k", ToolResultInput{ID: "t0", Tool: "ls", OK: true, Output: &out}); err != nil {
		t.Fatal(err)
	}
	aw, err := s.RecordToolResult(ctx, "k", ToolResultInput{ID: "t1", Tool: "ls", OK: true, Output: &out, ProducedBy: "agent-login:" + secret})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(aw.Artifact.ProducedBy, secret) {
		t.Errorf("produced_by stored with the secret: %q", aw.Artifact.ProducedBy)
	}
	head := aw.Commit
	for _, c := range []struct {
		in  ToolResultInput
		ptr string
	}{
		{ToolResultInput{ID: "login-" + secret, Tool: "ls", OK: true, Output: &out}, "/id"},
		{ToolResultInput{ID: "t2", Tool: "ls", OK: true, Output: &out, Edges: []EdgeInput{{Rel: "uses", To: "t0", Attrs: json.RawMessage(`{"note":"pw ` + secret + `"}`)}}}, "/edges/0/attrs"},
	} {
		_, err := s.RecordToolResult(ctx, "k", c.in)
		fe, ok := fault.As(err)
		if !ok || fe.Code != fault.Invalid || len(fe.Errors) != 1 || fe.Errors[0].Pointer != c.ptr || fe.Errors[0].Rule != "no_secret" {
			t.Errorf("%s: %v, want 422 no_secret at %s", c.ptr, err, c.ptr)
		}
	}
	var now string
	if err := st.Read(ctx, "k", "", func(v *store.View) error { now = v.Commit.ID.String(); return nil }); err != nil {
		t.Fatal(err)
	}
	if now != head.String() {
		t.Errorf("a refused write moved the head")
	}
}

// TestFetchVerdictKeepsDeclaredSecretsOut: a declared secret in a fetch's
// URL, final URL, redirects or transport error is masked in the verdict
// it records (they were stored as sent), and the verdict still verifies
// against its evidence.
func TestFetchVerdictKeepsDeclaredSecretsOut(t *testing.T) {
	const secret = declaredSecret
	ctx := context.Background()
	s, _ := secretService(t)
	body := "<html><head><title>Report</title></head><body><p>" + strings.Repeat("The harbour ferry crosses the bay every forty minutes. ", 10) + "</p></body></html>"
	fw, err := s.RecordFetch(ctx, "k", FetchInput{
		ID: "f1", URL: "https://api.example/v1/report?sig=" + secret,
		FinalURL:  "https://api.example/v1/done#s=" + secret,
		Redirects: []gate.Redirect{{URL: "https://api.example/v1/report?sig=" + secret, Status: 302}},
		Status:    200, Headers: map[string]string{"Content-Type": "text/html"}, Body: &body,
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(fw.Artifact.Data), secret) {
		t.Errorf("the declared secret is stored in the verdict:\n%s", fw.Artifact.Data)
	}
	if fw.Verdict != gate.Retrieved {
		t.Errorf("verdict %s %s", fw.Verdict, fw.Reason)
	}
	if err := s.verifyVerdict(ctx, "k", fw.Artifact.Data, true); err != nil {
		t.Errorf("the recorded verdict does not verify against its evidence: %v", err)
	}
	errText := "dial tcp: lookup " + secret + ".internal: no such host"
	fw, err = s.RecordFetch(ctx, "k", FetchInput{ID: "f2", URL: "https://" + secret + ".internal/", Error: &errText})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(fw.Artifact.Data), secret) || fw.Verdict != gate.Failed {
		t.Errorf("%s: the declared secret is stored in the verdict:\n%s", fw.Verdict, fw.Artifact.Data)
	}
}

// TestToolResultRefusesAnEscapedSecretInAttrs: an edge's attributes are
// checked for a declared secret as they will be stored (canonical JSON),
// so a secret written with escapes no encoder would use ("\u0051" for
// "Q") is refused too; it was stored decoded before.
func TestToolResultRefusesAnEscapedSecretInAttrs(t *testing.T) {
	ctx := context.Background()
	s, _ := secretService(t)
	out := "fine"
	if _, err := s.RecordToolResult(ctx, "k", ToolResultInput{ID: "t0", Tool: "ls", OK: true, Output: &out}); err != nil {
		t.Fatal(err)
	}
	escaped := `\u00` + strconv.FormatInt(int64(declaredSecret[0]), 16) + declaredSecret[1:]
	in := ToolResultInput{ID: "t1", Tool: "ls", OK: true, Output: &out,
		Edges: []EdgeInput{{Rel: "uses", To: "t0", Attrs: json.RawMessage(`{"note":"pw ` + escaped + `"}`)}}}
	stored, err := hashing.CanonicalizeObject(in.Edges[0].Attrs)
	if err != nil || !strings.Contains(string(stored), declaredSecret) {
		t.Fatalf("the attributes are stored as %s (%v), without the secret", stored, err)
	}
	_, err = s.RecordToolResult(ctx, "k", in)
	if err == nil {
		t.Fatalf("written with attributes %s", stored)
	}
	fe, ok := fault.As(err)
	if !ok || fe.Code != fault.Invalid || len(fe.Errors) != 1 || fe.Errors[0].Pointer != "/edges/0/attrs" || fe.Errors[0].Rule != "no_secret" {
		t.Errorf("%v, want 422 no_secret at /edges/0/attrs", err)
	}
}

// TestToolResultShapeNamesTheField: a tool result with both an output and
// an error, or with neither, is refused naming the field that is wrong and
// its rule, as the HTTP door's request schema does: the field that must
// not be there is not_allowed, the missing one required. Both were named
// by the other field's "required" before.
func TestToolResultShapeNamesTheField(t *testing.T) {
	ctx := context.Background()
	s, _ := secretService(t)
	out, msg := "listing", "boom"
	for _, c := range []struct {
		in        ToolResultInput
		ptr, rule string
	}{
		{ToolResultInput{OK: true, Output: &out, Error: &msg}, "/error", "not_allowed"},
		{ToolResultInput{OK: true}, "/output", "required"},
		{ToolResultInput{OK: false, Output: &out, Error: &msg}, "/output", "not_allowed"},
		{ToolResultInput{OK: false}, "/error", "required"},
	} {
		_, err := s.RecordToolResult(ctx, "k", c.in)
		fe, ok := fault.As(err)
		if !ok || fe.Code != fault.Invalid || len(fe.Errors) != 1 || fe.Errors[0].Pointer != c.ptr || fe.Errors[0].Rule != c.rule {
			t.Errorf("ok %v, output %v, error %v: %v %+v, want %s %s", c.in.OK, c.in.Output != nil, c.in.Error != nil, err, fe, c.ptr, c.rule)
		}
	}
}
