package pgkv_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgProxy is a TCP proxy between the driver and PostgreSQL that reads
// the messages the driver sends: it can hold back the server's answer to
// a COMMIT, or the COMMIT itself, cut the link instead of passing a
// COMMIT or its answer on, or a message that carries given bytes (in the
// middle of a batch), refuse new links and cut the open ones, and
// it counts the bytes the server sent and the COMMITs the driver sent.
type pgProxy struct {
	ln     net.Listener
	server string
	// fromServer counts the bytes read from the server, on every link.
	fromServer atomic.Int64
	// commits counts the COMMITs read from the driver, on every link.
	commits atomic.Int64
	// refusing, set, makes the proxy close each new link at once.
	refusing atomic.Bool
	// silent, set, makes the proxy keep each new link open and answer
	// nothing on it: a server that takes connections and never speaks
	// (frozen, or behind a path that drops its packets).
	silent atomic.Bool
	mu     sync.Mutex // guards armed, stalled, swallow, cutAt, cutRefuse and links
	// armed is the gate the next COMMIT's answer waits at (nil: none).
	armed *answerGate
	// stalled is the gate the next COMMIT itself waits at, unsent, while
	// the link's connection to the server stays open (nil: none).
	stalled *answerGate
	// swallow is how many of the next COMMITs make the link that
	// carries each close both its connections instead of forwarding it:
	// the driver has sent it, the server never reads it.
	swallow int
	// cutAt, set, makes the link that carries the next message from the
	// driver containing these bytes close both its connections instead
	// of forwarding it; with cutRefuse, the proxy then also refuses new
	// links and cuts every open one.
	cutAt     []byte
	cutRefuse bool
	links     []net.Conn
	wg        sync.WaitGroup
}

// answerGate holds back the server's answer to one COMMIT (holdNextCommit)
// or the COMMIT itself (stallNextCommit).
type answerGate struct {
	arrivedOnce sync.Once
	// arrived is closed when the server's answer reached the proxy: the
	// server has settled the COMMIT (or, stalled, when the COMMIT did).
	arrived chan struct{}
	// release, closed, lets the answer through — or, with cut set,
	// closes the link without it.
	release     chan struct{}
	releaseOnce sync.Once
	cut         atomic.Bool
	// mute, for a stalled COMMIT, makes the link drop what the server
	// sends from then on and keep the driver's connection open when the
	// server's closes: a half-open link, on which the server's answers and
	// its end of the connection never reach the driver.
	mute bool
}

// open lets the held answer through (and any later one).
func (g *answerGate) open() { g.releaseOnce.Do(func() { close(g.release) }) }

// cutLink closes the link whose answer is held, both its connections,
// instead of letting the answer through: the driver never reads it.
func (g *answerGate) cutLink() {
	g.cut.Store(true)
	g.open()
}

// swallowNextCommit makes the link that carries the next COMMIT close
// instead of forwarding it.
func (p *pgProxy) swallowNextCommit() { p.swallowCommits(1) }

// swallowCommits makes the links that carry the next n COMMITs close
// instead of forwarding them (0: none).
func (p *pgProxy) swallowCommits(n int) {
	p.mu.Lock()
	p.swallow = n
	p.mu.Unlock()
}

// cutAtNext makes the link that carries the next message from the driver
// containing marker close instead of forwarding it — and, with refuse,
// every other link close and new ones be refused (refuse(false) takes
// them again).
func (p *pgProxy) cutAtNext(marker []byte, refuse bool) {
	p.mu.Lock()
	p.cutAt, p.cutRefuse = marker, refuse
	p.mu.Unlock()
}

// newPGProxy starts a proxy to the server dsn names and returns it with
// a DSN that connects through it. The proxy stops when t ends.
func newPGProxy(t *testing.T, dsn string) (*pgProxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, server: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	// The proxy reads the driver's messages, so they go in the clear.
	proxied := withParam(withParam(withParam(dsn, "host", host), "port", port), "sslmode", "disable")
	return p, proxied
}

// stallNextCommit arms a gate at which the next COMMIT waits instead of
// going to the server, whose connection stays open meanwhile, even when
// the driver closes its own: the server's transaction stays in progress.
// Its arrived closes when the COMMIT reached the proxy; opened, the
// COMMIT goes on, and cut, the link closes without it.
func (p *pgProxy) stallNextCommit() *answerGate {
	g := &answerGate{arrived: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.stalled = g
	p.mu.Unlock()
	return g
}

// stallNextCommitMuted is stallNextCommit on a link that also turns
// half-open when the COMMIT arrives: nothing the server sends from then
// on reaches the driver, nor does the close of the server's end.
func (p *pgProxy) stallNextCommitMuted() *answerGate {
	g := &answerGate{arrived: make(chan struct{}), release: make(chan struct{}), mute: true}
	p.mu.Lock()
	p.stalled = g
	p.mu.Unlock()
	return g
}

// refuse makes the proxy close new links at once (on: true) or take
// them again.
func (p *pgProxy) refuse(on bool) { p.refusing.Store(on) }

// hush makes the proxy keep new links open without a word (on: true), or
// pass them to the server again.
func (p *pgProxy) hush(on bool) { p.silent.Store(on) }

// cutAll closes every open link, both its connections.
func (p *pgProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.links {
		c.Close()
	}
}

// holdNextCommit arms a gate: the server's answer to the next COMMIT a
// link forwards waits at it until it is opened.
func (p *pgProxy) holdNextCommit() *answerGate {
	g := &answerGate{arrived: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.armed = g
	p.mu.Unlock()
	return g
}

func (p *pgProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.links {
		c.Close()
	}
	if p.armed != nil {
		p.armed.open()
	}
	if p.stalled != nil {
		p.stalled.open()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *pgProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refusing.Load() {
			client.Close()
			continue
		}
		if p.silent.Load() {
			p.mu.Lock()
			p.links = append(p.links, client)
			p.mu.Unlock()
			continue
		}
		server, err := net.Dial("tcp", p.server)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.links = append(p.links, client, server)
		p.mu.Unlock()
		var gate atomic.Pointer[answerGate]
		// muted: the link is half-open (stallNextCommitMuted).
		var muted atomic.Bool
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer server.Close()
			p.pumpFromClient(client, server, &gate, &muted)
		}()
		go func() {
			defer p.wg.Done()
			defer func() {
				if !muted.Load() {
					client.Close()
				}
			}()
			p.pumpFromServer(server, client, &gate, &muted)
		}()
	}
}

// pumpFromClient forwards the driver's messages one by one; before it
// forwards a COMMIT while a gate is armed, it sets the link's gate.
func (p *pgProxy) pumpFromClient(client, server net.Conn, gate *atomic.Pointer[answerGate], muted *atomic.Bool) {
	r := bufio.NewReader(client)
	started := false
	for {
		typed, typ := started, byte(0)
		if typed {
			b, err := r.ReadByte()
			if err != nil {
				return
			}
			typ = b
		}
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return
		}
		size := int(binary.BigEndian.Uint32(n[:]))
		if size < 4 {
			return
		}
		body := make([]byte, size-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if typed {
			p.mu.Lock()
			cut := p.cutAt != nil && bytes.Contains(body, p.cutAt)
			refuse := cut && p.cutRefuse
			if cut {
				p.cutAt = nil
			}
			p.mu.Unlock()
			if refuse {
				p.refuse(true)
				p.cutAll()
			}
			if cut {
				client.Close()
				return // the deferred Close ends the server's side
			}
		}
		switch {
		case !typed:
			// Untyped: an SSL or GSS request, a cancel request, or the
			// startup message (protocol 3.x), after which every message
			// has a type.
			started = len(body) >= 4 && binary.BigEndian.Uint16(body) == 3
		case typ == 'Q' && strings.EqualFold(strings.TrimRight(string(body), "\x00; "), "commit"):
			p.commits.Add(1)
			p.mu.Lock()
			swallow, stall := p.swallow > 0, p.stalled
			p.swallow, p.stalled = max(p.swallow-1, 0), nil
			if p.armed != nil && !swallow {
				gate.Store(p.armed)
				p.armed = nil
			}
			p.mu.Unlock()
			if swallow {
				client.Close()
				return // the deferred Close ends the server's side
			}
			if stall != nil {
				muted.Store(stall.mute)
				stall.arrivedOnce.Do(func() { close(stall.arrived) })
				<-stall.release
				if stall.cut.Load() {
					client.Close()
					return // the deferred Close ends the server's side
				}
			}
		}
		msg := append(n[:], body...)
		if typed {
			msg = append([]byte{typ}, msg...)
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// pumpFromServer forwards what the server sends; what arrives while the
// link's gate is set waits until the gate opens, and what arrives while
// the link is muted is dropped.
func (p *pgProxy) pumpFromServer(server, client net.Conn, gate *atomic.Pointer[answerGate], muted *atomic.Bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && muted.Load() {
			n = 0
		}
		if n > 0 {
			p.fromServer.Add(int64(n))
			if g := gate.Load(); g != nil {
				g.arrivedOnce.Do(func() { close(g.arrived) })
				<-g.release
				gate.Store(nil)
				if g.cut.Load() {
					server.Close()
					return // the deferred Close ends the driver's side
				}
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
