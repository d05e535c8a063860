package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestNetHTTPRefusesBeforeHandlers: some malformed requests are answered
// by Go's net/http before any handler runs, in text/plain, and the
// connection is closed; docs/API.md lists each with the status a client
// sees. Each is sent over a real listener served as artifactd serve does.
func TestNetHTTPRefusesBeforeHandlers(t *testing.T) {
	e := newEnv(t)
	e.createContext("p", "")
	addr := startServer(t, e.srv, 64, 4, 10*time.Second)
	body := `{"type":"note","data":{"text":"a"}}`
	post := "POST /v1/contexts/p/artifacts HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
	for _, c := range []struct {
		name, raw string
		status    int
		doc       string // what docs/API.md says of it
	}{
		{"Transfer-Encoding gzip, chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body), 501, "`Transfer-Encoding` other than `chunked` alone"},
		{"Transfer-Encoding identity", post + "Transfer-Encoding: identity\r\n\r\n" + body, 501, "`Transfer-Encoding` other than `chunked` alone"},
		{"two different Content-Lengths", post + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(body), len(body)+1) + body, 400, "two `Content-Length` headers that differ"},
		{"negative Content-Length", post + "Content-Length: -1\r\n\r\n", 400, "a negative `Content-Length`"},
		{"NUL in a header value", "GET /v1/contexts/p HTTP/1.1\r\nHost: " + addr + "\r\nX-Note: a\x00b\r\n\r\n", 400, "a NUL in a header value"},
		{"no Host", "GET /v1/contexts/p HTTP/1.1\r\n\r\n", 400, "no `Host` header"},
	} {
		before := e.hash("p")
		status, ct, line := rawExchange(t, addr, c.raw)
		t.Logf("%s: %q (Content-Type %q)", c.name, line, ct)
		if status != c.status || !strings.HasPrefix(ct, "text/plain") || !strings.Contains(line, "(closed)") {
			t.Errorf("%s: %d %q, want %d text/plain, closed", c.name, status, ct, c.status)
		}
		if e.hash("p") != before {
			t.Errorf("%s: state changed", c.name)
		}
		if !strings.Contains(apiDocNetHTTP(t), c.doc) {
			t.Errorf("%s: docs/API.md does not list it (%q)", c.name, c.doc)
		}
	}
	// The same Content-Length given twice is one: the request is served.
	status, ct, line := rawExchange(t, addr, post+fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(body), len(body))+body)
	if status != http.StatusCreated {
		t.Errorf("two equal Content-Lengths: %q (%q), want 201", line, ct)
	}
}

// rawExchange sends raw on a new connection to addr and reads the status
// and Content-Type of the answer, and its status line, whether it closes
// the connection and the start of its body.
func rawExchange(t *testing.T, addr, raw string) (int, string, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	line := res.Proto + " " + res.Status
	if res.Close {
		line += " (closed)"
	}
	return res.StatusCode, res.Header.Get("Content-Type"), fmt.Sprintf("%s %.80q", line, b)
}

// apiDocNetHTTP is the paragraph of docs/API.md on what net/http refuses
// before any handler runs.
func apiDocNetHTTP(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "are refused by Go's net/http")
	if i < 0 {
		t.Fatal("docs/API.md says nothing of what net/http refuses")
	}
	end := strings.Index(doc[i:], "\n- ")
	if end < 0 {
		end = len(doc) - i
	}
	return strings.Join(strings.Fields(doc[i:i+end]), " ")
}
