package mcp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/mcp"
)

// postArtifact sends an artifact write to the API over HTTP and returns
// the status.
func postArtifact(t *testing.T, a *api, ctxID, body string) int {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/contexts/"+ctxID+"/artifacts", strings.NewReader(body))
	req.Host = "127.0.0.1"
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)
	return rec.Code
}

// TestMCPTakesWhatTheAPITakes: /mcp reads a tool call of the size the API
// takes, and a call over the API's body limit is the API's 413 as a tool
// result with isError, the session going on. The SDK's 4 MiB default
// refused a 5 MiB record_artifact (201 over HTTP) with a bare 413, and the
// client then took the session for broken.
func TestMCPTakesWhatTheAPITakes(t *testing.T) {
	a := newAPI(t, "")
	a.createContext(t, "c", "")
	cs, err := connectHTTP(t, serve(t, a).URL+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	five := strings.Repeat("x", 5<<20)
	if code := postArtifact(t, a, "c", `{"id":"five-http","type":"note","data":{"text":"`+five+`"}}`); code != http.StatusCreated {
		t.Fatalf("5 MiB over HTTP: %d", code)
	}
	w := ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{"context": "c", "id": "five", "type": "note", "data": map[string]any{"text": five}})
	if w.Artifact.ID != "five" {
		t.Fatalf("5 MiB through /mcp: %+v", w)
	}
	nine := strings.Repeat("x", 9<<20) // over the API's 8 MiB
	wantContains(t, "9 MiB through /mcp", refused(t, cs, "record_artifact", map[string]any{"context": "c", "id": "nine", "type": "note", "data": map[string]any{"text": nine}}),
		"413 payload-too-large")
	if tr := ok[mcp.TrustAnswer](t, cs, "check_trust", map[string]any{"context": "c", "id": "five"}); tr.ID != "five" {
		t.Fatalf("the session after a refusal: %+v", tr)
	}
}

// TestMCPLimitFollowsTheAPIs: the /mcp body limit follows the API's
// (serve --max-body): a call over the API's limit but under RequestLimit is
// the API's 413 as isError; past RequestLimit, the transport refuses it.
func TestMCPLimitFollowsTheAPIs(t *testing.T) {
	const maxBody = 1 << 20
	a := newAPIWith(t, "", func(o *httpapi.Options) { o.MaxBodyBytes = maxBody })
	a.createContext(t, "c", "")
	cs, err := connectHTTP(t, serve(t, a).URL+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := mcp.RequestLimit(maxBody); got != 3<<20 {
		t.Fatalf("RequestLimit(1 MiB) = %d", got)
	}
	wantContains(t, "1.5 MiB through /mcp", refused(t, cs, "record_artifact", map[string]any{"context": "c", "type": "note", "data": map[string]any{"text": strings.Repeat("x", 3<<19)}}),
		"413 payload-too-large")
	ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{"context": "c", "id": "small", "type": "note", "data": map[string]any{"text": "x"}})
	_, err = cs.CallTool(bg, &sdk.CallToolParams{Name: "record_artifact", Arguments: map[string]any{"context": "c", "type": "note", "data": map[string]any{"text": strings.Repeat("x", 4<<20)}}})
	if err == nil {
		t.Fatal("a call past RequestLimit was read")
	}
}
