package web

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/artifactd/artifactd/graph"
)

// TestBrowserLookAlikeProducersReadApart draws, in Chromium, the context
// page of producers that differ only by a code point that draws nothing
// or draws as a space ("agent" and "agent" with a ZERO WIDTH SPACE or a
// WORD JOINER, "agent x" with a space and with a NO-BREAK SPACE), and one
// named as the UI writes an escape. Each producer's cell is drawn again
// in one fixed box at the top left of the page and photographed: no two
// producers may be drawn with the same pixels.
func TestBrowserLookAlikeProducersReadApart(t *testing.T) {
	ctx := newBrowser(t)
	st := openStore(t)
	producers := []string{"agent", "agent\u200b", "agent\u2060", "agent x", "agent\u00a0x", "agent⟨U+200B⟩"}
	var ops []graph.Op
	for i, by := range producers {
		ops = append(ops, putOp(t, fmt.Sprintf("p%d", i), "claim", by, map[string]any{"text": "a claim"}))
	}
	loadContext(t, st, "look", ops...)
	srv := httptest.NewServer(New(Options{Store: st, Logger: quietLogger()}))
	defer srv.Close()

	step(t, ctx, "context page", chromedp.Navigate(srv.URL+"/ui/contexts/look"), chromedp.WaitReady(chromedp.CSS("#list-count")))
	ids := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('td[data-label="id"]')).map(td => td.textContent)`)
	if len(ids) != len(producers) {
		t.Fatalf("the page lists %q, want %d artifacts", ids, len(producers))
	}
	drawn := make([]image.Image, len(producers))
	for i, id := range ids {
		n, err := strconv.Atoi(id[1:])
		if err != nil || n >= len(producers) {
			t.Fatalf("row %d is artifact %q", i, id)
		}
		eval[bool](t, ctx, `(() => {
  let probe = document.getElementById("probe");
  if (!probe) {
    probe = document.createElement("div");
    probe.id = "probe";
    probe.style.cssText = "position:fixed;left:0;top:0;z-index:9;padding:4px;background:#fff;color:#000;white-space:nowrap";
    document.body.appendChild(probe);
  }
  const cell = document.querySelectorAll('td[data-label="produced by"]')[`+strconv.Itoa(i)+`];
  probe.replaceChildren(...Array.from(cell.cloneNode(true).childNodes));
  return true;
})()`)
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		shot, err := chromedp.Run(c, chromedp.Screenshot(chromedp.CSS("#probe")))
		cancel()
		if err != nil {
			t.Fatalf("photograph the producer of %s: %v", id, err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		drawn[n] = img
	}
	for i := range producers {
		for j := i + 1; j < len(producers); j++ {
			if samePixels(drawn[i], drawn[j]) {
				t.Errorf("producers %q and %q are drawn alike", producers[i], producers[j])
			}
		}
	}
}

// samePixels reports whether a and b are the same picture.
func samePixels(a, b image.Image) bool {
	if a.Bounds().Size() != b.Bounds().Size() {
		return false
	}
	ra := image.NewRGBA(image.Rectangle{Max: a.Bounds().Size()})
	rb := image.NewRGBA(image.Rectangle{Max: b.Bounds().Size()})
	draw.Draw(ra, ra.Bounds(), a, a.Bounds().Min, draw.Src)
	draw.Draw(rb, rb.Bounds(), b, b.Bounds().Min, draw.Src)
	return bytes.Equal(ra.Pix, rb.Pix)
}
