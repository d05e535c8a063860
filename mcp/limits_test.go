package mcp_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// slowPost opens a connection to ts and sends a POST to path whose body
// announces size bytes and sends a few: a client that never finishes its
// body. It returns the connection, whose reader is at the answer.
func slowPost(t *testing.T, ts *httptest.Server, path, token string, size int) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n{\"jsonrpc\":", path, auth, size)
	return c, bufio.NewReader(c)
}

// answerWithin reads the status line of the answer on c, which must come
// within d; it returns the line and how long it took.
func answerWithin(t *testing.T, c net.Conn, rd *bufio.Reader, d time.Duration) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer within %v: %v", d, err)
	}
	return strings.TrimSpace(line), time.Since(start)
}

// TestMCPBodyDeadline: a request body to /mcp that does not arrive within
// the API's body timeout is cut off then with the API's 408, as on every
// API route. serve sets no ReadTimeout (the API sets body deadlines per
// request), and /mcp waited for the body forever.
func TestMCPBodyDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	a := newAPIWith(t, "", func(o *httpapi.Options) { o.BodyTimeout = timeout })
	ts := serve(t, a)
	for _, path := range []string{"/v1/contexts", "/mcp"} {
		c, rd := slowPost(t, ts, path, "", 1000)
		line, took := answerWithin(t, c, rd, 10*timeout)
		if !strings.HasPrefix(line, "HTTP/1.1 408") || took < timeout/2 {
			t.Errorf("%s, a body that never ends: %q after %v, want 408 after about %v", path, line, took, timeout)
		}
	}
}

// TestGuardRefusalDoesNotWaitForTheBody: /mcp's refusal of a request
// whose token the API does not accept is answered at once and the
// connection closed, not held while the client keeps its body back (as
// the API answers such refusals).
func TestGuardRefusalDoesNotWaitForTheBody(t *testing.T) {
	a := newAPIWith(t, writeToken+" write *", func(o *httpapi.Options) { o.BodyTimeout = time.Minute })
	ts := serve(t, a)
	c, rd := slowPost(t, ts, "/mcp", "unknown-token-0123456789", 1000)
	if line, _ := answerWithin(t, c, rd, 5*time.Second); !strings.HasPrefix(line, "HTTP/1.1 401") {
		t.Fatalf("answer %q, want 401", line)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, rd); err != nil {
		t.Errorf("the connection was not closed after the refusal: %v", err)
	}
}

// TestMCPTakesTheAPIsLargeBodySlots: a large body to /mcp takes one of the
// API's large-body slots (it bypassed them), and one only: the tool call
// it carries, served by the API in this process with the bytes already
// read, does not take a second (with one slot, every large call would be
// refused).
func TestMCPTakesTheAPIsLargeBodySlots(t *testing.T) {
	a := newAPIWith(t, "", func(o *httpapi.Options) { o.MaxLargeBodies = 1; o.BodyTimeout = time.Minute })
	a.createContext(t, "c", "")
	ts := serve(t, a)
	cs, err := connectHTTP(t, ts.URL+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	large := strings.Repeat("x", 2<<20) // over the 1 MiB from which a body is large
	ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{"context": "c", "id": "large", "type": "note", "data": map[string]any{"text": large}})

	// A large /mcp body that never ends holds the one slot: other large
	// bodies, to /mcp or the API, are refused 503 overloaded meanwhile.
	// A request that has been answered may hold the slot a moment longer
	// (until its handler returns): the slow one is then refused at once,
	// and sent again.
	var c net.Conn
	for attempt := 0; ; attempt++ {
		var rd *bufio.Reader
		c, rd = slowPost(t, ts, "/mcp", "", 2<<20)
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		line, err := rd.ReadString('\n')
		if err != nil { // no answer: it is being read, in the slot
			break
		}
		if !strings.HasPrefix(line, "HTTP/1.1 503") || attempt == 50 {
			t.Fatalf("a slow large /mcp body: %q", line)
		}
		c.Close()
	}
	largeStatus := func(path string) int {
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","pad":"`+large+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(5 * time.Second)
	for largeStatus("/v1/contexts") != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("the slow /mcp body took no large-body slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := largeStatus("/mcp"); got != http.StatusServiceUnavailable {
		t.Errorf("a second large /mcp body while the slot is held: %d, want 503", got)
	}
	// The slot frees when the slow request ends.
	c.Close()
	deadline = time.Now().Add(5 * time.Second)
	for largeStatus("/v1/contexts") == http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("the slot was not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
