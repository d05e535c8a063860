package web

import (
	"container/list"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// Lengths of the short text that says what an artifact said.
const (
	saidNode  = 60  // in a graph node label
	saidRow   = 140 // in a table row
	saidLimit = 400 // kept in the cache (the tooltip shows this much)
)

// said returns a short text of what an artifact said, from its type and
// canonical data: a fetch verdict's verdict, reason and URL; otherwise
// its "text" member, then a claim's "value", then the first string
// member (in key order). Control characters become spaces; the result is
// at most saidLimit runes and is plain text (templates escape it).
func said(typ string, data []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m == nil {
		return ""
	}
	str := func(k string) string { return jsonText(m[k]) }
	var out string
	switch {
	case typ == "fetch_verdict":
		out = strings.TrimSpace(str("verdict") + " " + str("reason"))
		if u := str("url"); u != "" {
			out += " · " + u
		}
	case str("text") != "":
		out = str("text")
		if v := str("value"); typ == "claim" && v != "" && !strings.Contains(out, v) {
			out += " (value " + v + ")"
		}
	case str("value") != "":
		out = "value " + str("value")
	default:
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			var s string
			if json.Unmarshal(m[k], &s) == nil && strings.TrimSpace(s) != "" {
				out = k + ": " + s
				break
			}
		}
	}
	return cut(flatten(out), saidLimit)
}

// flatten turns control characters and runs of space into one space.
func flatten(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cut shortens s to n runes, ending with an ellipsis when it cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRightFunc(string(r[:n-1]), unicode.IsSpace) + "…"
}

// saidCache keeps said texts by content hash and type: data is
// content-addressed, so an entry never goes stale. It is bounded by
// entries, least recently used dropped first.
type saidCache struct {
	mu    sync.Mutex // guards ll and byKey
	max   int
	ll    *list.List // of *saidEntry, most recent first
	byKey map[saidKey]*list.Element
}

type saidKey struct {
	hash hashing.Digest
	typ  string
}

type saidEntry struct {
	key  saidKey
	text string
}

func newSaidCache(max int) *saidCache {
	return &saidCache{max: max, ll: list.New(), byKey: map[saidKey]*list.Element{}}
}

// get returns the said text of a, computing it with data when not cached.
// data is called only on a miss; its error leaves the text empty.
func (c *saidCache) get(a *graph.Artifact, data func(*graph.Artifact) (json.RawMessage, error)) string {
	k := saidKey{a.ContentHash, a.Type}
	c.mu.Lock()
	if el, ok := c.byKey[k]; ok {
		c.ll.MoveToFront(el)
		t := el.Value.(*saidEntry).text
		c.mu.Unlock()
		return t
	}
	c.mu.Unlock()
	raw, err := data(a)
	if err != nil {
		return ""
	}
	t := said(a.Type, raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; !ok {
		c.byKey[k] = c.ll.PushFront(&saidEntry{key: k, text: t})
		for c.ll.Len() > c.max {
			old := c.ll.Back()
			delete(c.byKey, old.Value.(*saidEntry).key)
			c.ll.Remove(old)
		}
	}
	return t
}

// naturalLess orders strings with runs of digits compared as numbers:
// s1 < s2 < s10. Ties (as "s01" and "s1") fall back to byte order, so
// the order is total.
func naturalLess(a, b string) bool {
	if c := naturalCompare(a, b); c != 0 {
		return c < 0
	}
	return a < b
}

func naturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na := strings.TrimLeft(a[si:i], "0")
			nb := strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if na != nb {
				return strings.Compare(na, nb)
			}
			continue
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
		i++
		j++
	}
	return cmpInt(len(a)-i, len(b)-j)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// naturalSort sorts ids in natural order.
func naturalSort(ids []string) {
	slices.SortFunc(ids, func(a, b string) int {
		if c := naturalCompare(a, b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// plural writes "1 edge", "2 edges", "1,000 artifacts": n with the
// singular or plural noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(int64(n)) + " " + many
}

// humanTime formats a commit time (RFC 3339, any precision) for reading:
// "14 Mar 2026 09:26:01 UTC". A time that does not parse is shown as is.
func humanTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	t = t.UTC()
	return strconv.Itoa(t.Day()) + " " + t.Format("Jan 2006 15:04:05") + " UTC"
}
