package guard

import "sync"

// Guard counts calls in flight. The zero value is open.
type Guard struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n      int  // calls in flight; guarded by mu
	closed bool // guarded by mu
}

// Enter registers a call; it returns false once Close has begun. A call
// that entered must Leave.
func (g *Guard) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// Leave ends a call registered by Enter.
func (g *Guard) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.cond != nil {
		g.cond.Broadcast()
	}
}

// Close refuses new calls and waits for those in flight. It returns false
// when the guard was already closed. A call that is in flight must not
// call Close, or Close waits for itself.
func (g *Guard) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.cond.Wait()
	}
	return true
}
