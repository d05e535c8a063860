package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeSlowSocketFlood runs `artifactd serve` with a small connection
// cap and short timeouts and floods it with sockets that never finish
// their headers or their body — more than the cap — as in the report where
// 300 such sockets on a 256-descriptor limit took /healthz down. /healthz
// must still answer while the flood holds every slot, every slow socket
// must be closed by the server, and an unauthenticated body that never
// ends must get its 401 and a closed connection at once.
func TestServeSlowSocketFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the flood takes a few seconds")
	}
	t.Setenv("ARTIFACTD_TOKENS", "")
	base, stop, stderr := serveInProcess(t, "--data", t.TempDir(), "--tokens", writeTokens(t),
		"--max-conns", "16", "--header-timeout", "1s", "--body-timeout", "1s", "--idle-timeout", "1s")
	addr := strings.TrimPrefix(base, "http://")
	// An unauthenticated body that never ends: 401, then the server closes.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/blobs HTTP/1.1\r\nHost: %s\r\nContent-Length: 200000\r\n\r\npartial", addr)
	_ = c.SetReadDeadline(time.Now().Add(900 * time.Millisecond)) // under the body timeout
	got, err := io.ReadAll(c)
	c.Close()
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 401")) || err != nil {
		t.Fatalf("refused body: %v %q", err, got)
	}

	const slow = 150
	var socks []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				return
			}
			if i%2 == 0 {
				fmt.Fprintf(c, "POST /v1/blobs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 90000\r\n\r\nabc", addr, floodToken)
			} else {
				fmt.Fprintf(c, "GET /v1/contexts HTTP/1.1\r\nHost: %s\r\nX-Never-Ends: ", addr)
			}
			mu.Lock()
			socks = append(socks, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	start := time.Now()
	healthy := false
	for time.Since(start) < 10*time.Second && !healthy {
		hc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		_ = hc.SetDeadline(time.Now().Add(4 * time.Second))
		fmt.Fprintf(hc, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
		b, _ := io.ReadAll(hc)
		hc.Close()
		healthy = bytes.HasPrefix(b, []byte("HTTP/1.1 200"))
	}
	if !healthy {
		t.Fatalf("/healthz did not answer within 10s of a %d-socket flood on 16+8 slots", slow)
	}
	t.Logf("/healthz answered %v into a flood of %d slow sockets (16 connections + 8 reserve)", time.Since(start).Round(time.Millisecond), len(socks))
	var open sync.WaitGroup
	var still int
	for _, c := range socks {
		open.Add(1)
		go func() {
			defer open.Done()
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, err := io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				mu.Lock()
				still++
				mu.Unlock()
			}
			c.Close()
		}()
	}
	open.Wait()
	if still != 0 {
		t.Fatalf("%d of %d slow sockets were still open after 15s", still, len(socks))
	}
	t.Logf("all %d slow sockets closed by the server within %v", len(socks), time.Since(start).Round(time.Millisecond))
	stop()
	if strings.Contains(stderr.String(), "too many open files") {
		t.Errorf("the flood exhausted descriptors:\n%s", stderr.String())
	}
}

const floodToken = "flood-token-0123456789abcdef"

func writeTokens(t *testing.T) string {
	t.Helper()
	p := t.TempDir() + "/tokens"
	if err := os.WriteFile(p, []byte(floodToken+" admin *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
