package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/artifactd/artifactd/internal/lru"
	"github.com/goccy/go-graphviz"
)

// gv is the one Graphviz instance of the process. go-graphviz runs
// Graphviz compiled to WebAssembly in a single module instance shared by
// the whole process, which is not safe for concurrent use, so every call
// into it holds gv's turn (turn, a channel of one) — across all handlers
// New returns. A layout cannot be stopped once it runs (the module does
// not end with a context), so a request waits for its turn at most
// layoutWait, or until it ends: a slow picture of one context keeps no
// other page from answering, which then shows its table without the
// picture.
var gv = struct {
	turn chan struct{} // holds a token while a call into go-graphviz runs
	g    *graphviz.Graphviz
}{turn: make(chan struct{}, 1)}

// layoutWait bounds how long a request waits for Graphviz while another
// picture is laid out.
const layoutWait = 5 * time.Second

// errLayoutBusy is layoutSVG's error when the turn did not come in time.
var errLayoutBusy = errors.New("web: graphviz is busy with another picture")

// layoutSVG lays out a DOT graph with the dot engine and returns
// Graphviz's SVG. A panic inside go-graphviz (it panics on WebAssembly
// errors) is turned into an error.
func layoutSVG(ctx context.Context, dot string) (svg []byte, err error) {
	wait := time.NewTimer(layoutWait)
	defer wait.Stop()
	select {
	case gv.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errLayoutBusy, ctx.Err())
	case <-wait.C:
		return nil, errLayoutBusy
	}
	defer func() { <-gv.turn }()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("web: graphviz panicked: %v", p)
		}
	}()
	if gv.g == nil {
		g, err := graphviz.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("web: start graphviz: %w", err)
		}
		gv.g = g
	}
	gr, err := graphviz.ParseBytes([]byte(dot))
	if err != nil {
		return nil, fmt.Errorf("web: graphviz parse: %w", err)
	}
	defer gr.Close()
	var buf bytes.Buffer
	if err := gv.g.Render(ctx, gr, graphviz.SVG, &buf); err != nil {
		return nil, fmt.Errorf("web: graphviz render: %w", err)
	}
	return buf.Bytes(), nil
}

// pictureCache keeps sanitized SVG by the drawing it was made from (DOT,
// links and tooltips). A picture is a pure function of its drawing, and
// the drawing of a page is a function of the commit (immutable), so
// entries never go stale; the least recently used are dropped beyond
// the cache's bytes (an lru keyed by the drawing, each entry costing its
// drawing and its picture).
type pictureCache struct{ lru *lru.Cache[string, cachedSVG] }

// cachedSVG is a cached SVG and the length of the drawing it is kept by;
// failed marks a drawing Graphviz could not lay out, which is not tried
// again (its table stands for it).
type cachedSVG struct {
	svg     string
	drawing int
	failed  error
}

func newPictureCache(maxBytes int) *pictureCache {
	return &pictureCache{lru: lru.New[string](int64(maxBytes), func(p cachedSVG) int64 { return int64(len(p.svg) + p.drawing) })}
}

// svg returns the sanitized SVG of d, laying it out when not cached.
// class and label go on the root element (they are part of the key).
func (c *pictureCache) svg(ctx context.Context, d *drawing, class, label string) (string, error) {
	full := class + "\x00" + label + "\x00" + d.key()
	if p, ok := c.lru.Get(full); ok {
		if p.failed != nil {
			return "", p.failed
		}
		return p.svg, nil
	}

	raw, err := layoutSVG(ctx, d.dot)
	if err != nil && !errors.Is(err, errLayoutBusy) && ctx.Err() == nil {
		// Not again: a failure costs its layout once, not on every visit.
		c.lru.Put(full, cachedSVG{drawing: len(full), failed: err})
	}
	if err != nil {
		return "", err
	}
	var links *svgLinks
	if d.links.nodes != nil {
		links = &d.links
	}
	out, err := sanitizeSVG(raw, class, label, links)
	if err != nil {
		return "", err
	}

	c.lru.Put(full, cachedSVG{svg: out, drawing: len(full)})
	return out, nil
}
