package web

import (
	"bytes"
	"context"
	"fmt"
	"github.com/artifactd/artifactd/internal/lru"
	"sync"

	"github.com/goccy/go-graphviz"
)

// gv is the one Graphviz instance of the process. go-graphviz runs
// Graphviz compiled to WebAssembly in a single module instance shared by
// the whole process, which is not safe for concurrent use, so every call
// into it holds gv.mu — across all handlers New returns.
var gv struct {
	mu sync.Mutex // guards g and every go-graphviz call
	g  *graphviz.Graphviz
}

// layoutSVG lays out a DOT graph with the dot engine and returns
// Graphviz's SVG. A panic inside go-graphviz (it panics on WebAssembly
// errors) is turned into an error.
func layoutSVG(ctx context.Context, dot string) (svg []byte, err error) {
	gv.mu.Lock()
	defer gv.mu.Unlock()
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

// cachedSVG is a cached SVG and the length of the drawing it is kept by.
type cachedSVG struct {
	svg     string
	drawing int
}

func newPictureCache(maxBytes int) *pictureCache {
	return &pictureCache{lru: lru.New[string](int64(maxBytes), func(p cachedSVG) int64 { return int64(len(p.svg) + p.drawing) })}
}

// svg returns the sanitized SVG of d, laying it out when not cached.
// class and label go on the root element (they are part of the key).
func (c *pictureCache) svg(ctx context.Context, d *drawing, class, label string) (string, error) {
	full := class + "\x00" + label + "\x00" + d.key()
	if p, ok := c.lru.Get(full); ok {
		return p.svg, nil
	}

	raw, err := layoutSVG(ctx, d.dot)
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
