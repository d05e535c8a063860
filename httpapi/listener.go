package httpapi

import (
	"context"
	"net"
	"sync"
	"time"
)

// LimitListener returns a listener that holds at most max connections of
// ln open, plus reserve more for health checks, so that a flood of slow
// or idle connections cannot take the file descriptors the store and
// /healthz need.
//
// While fewer than max connections are open, a connection is ordinary.
// Beyond that, up to reserve connections are accepted as reserve
// connections: the Server (through ConnContext) answers only /healthz and
// /readyz on them, and everything else with 503 overloaded and
// Retry-After; each lives at most reserveLife in all (its reads fail after
// that, whatever deadline net/http sets), so a reserve slot held by a slow
// client frees itself. When both are full, Accept waits for a slot, like
// golang.org/x/net/netutil.LimitListener. Serve the listener with
// http.Server.ConnContext set to ConnContext.
func LimitListener(ln net.Listener, max, reserve int, reserveLife time.Duration) net.Listener {
	if reserveLife <= 0 {
		reserveLife = 2 * time.Second
	}
	return &limitListener{Listener: ln, general: make(chan struct{}, max), reserve: make(chan struct{}, reserve),
		life: reserveLife, done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	// general and reserve hold one token per open connection of each kind.
	general, reserve chan struct{}
	life             time.Duration
	done             chan struct{}
	closeOnce        sync.Once
}

// acquire takes a slot: an ordinary one when free, else whichever frees
// first. It reports false when the listener is closed.
func (l *limitListener) acquire() (reserved, ok bool) {
	select {
	case l.general <- struct{}{}:
		return false, true
	default:
	}
	select {
	case l.general <- struct{}{}:
		return false, true
	case l.reserve <- struct{}{}:
		return true, true
	case <-l.done:
		return false, false
	}
}

// Accept waits for a slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	reserved, ok := l.acquire()
	if !ok {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release(reserved)
		return nil, err
	}
	if reserved {
		// An ordinary slot may have freed while Accept waited.
		select {
		case l.general <- struct{}{}:
			l.release(true)
			reserved = false
		default:
		}
	}
	lc := &limitConn{Conn: c, l: l, reserved: reserved}
	if reserved {
		lc.until = time.Now().Add(l.life)
		_ = c.SetReadDeadline(lc.until)
	}
	return lc, nil
}

func (l *limitListener) release(reserved bool) {
	if reserved {
		<-l.reserve
	} else {
		<-l.general
	}
}

// Close closes the listener; Accept calls waiting for a slot return.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn is an accepted connection; Close frees its slot once.
type limitConn struct {
	net.Conn
	l         *limitListener
	reserved  bool
	until     time.Time // the end of a reserve connection's life
	closeOnce sync.Once
}

// Close closes the connection and frees its slot.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.l.release(c.reserved) })
	return err
}

// SetReadDeadline sets the read deadline, never past the end of a reserve
// connection's life.
func (c *limitConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(t))
}

// SetDeadline sets both deadlines, the read one never past the end of a
// reserve connection's life.
func (c *limitConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func (c *limitConn) clamp(t time.Time) time.Time {
	if c.reserved && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

// CloseWrite half-closes a TCP connection (net/http uses it to let the
// client read a final answer before the connection closes).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// connKey is the context key of a reserve connection's mark.
type connKey struct{}

// ConnContext marks the context of a LimitListener reserve connection; use
// it as http.Server.ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitConn); ok && lc.reserved {
		return context.WithValue(ctx, connKey{}, true)
	}
	return ctx
}

// reservedConn reports whether ctx is a request's on a reserve connection.
func reservedConn(ctx context.Context) bool {
	v, _ := ctx.Value(connKey{}).(bool)
	return v
}
