package gate

import (
	"strings"
)

// Evidence is what a fetcher saw: the requested URL, the redirect chain, the
// final status, headers and body, or the transport error. An agent POSTs it
// (the JSON tags match the fetch endpoint's request body and
// testdata/gate/cases.json); a server-side fetcher fills it in itself.
//
// Body is not part of the JSON form: the HTTP layer carries it separately
// (raw bytes, or a blob) and sets it before calling [Classify]. Body must be
// the bytes exactly as received on the wire, still encoded per the
// Content-Encoding header; a body that a client already decompressed while
// keeping the header is tolerated (see [Receipt].Notes).
type Evidence struct {
	// URL is the URL the fetcher requested.
	URL string `json:"url"`
	// FinalURL is the URL that produced the final response; empty means
	// "the last hop", or URL when there were no redirects.
	FinalURL string `json:"final_url,omitempty"`
	// Redirects lists the responses that redirected, in order: each entry is
	// the URL that answered with a 3xx and that status. The first entry is
	// normally URL itself; the hop after the last entry is FinalURL.
	Redirects []Redirect `json:"redirects,omitempty"`
	// Status is the final HTTP status, 0 when no response arrived.
	Status int `json:"status"`
	// Headers holds the final response headers, one value per name. Names are
	// matched case-insensitively (see [Evidence.Header]).
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the raw final response body as received.
	Body []byte `json:"-"`
	// Error is the transport error text (timeout, connection refused, a body
	// read that broke off), empty when the exchange completed.
	Error string `json:"error,omitempty"`
}

// Redirect is one hop of a redirect chain: URL answered with Status (a 3xx).
type Redirect struct {
	URL    string `json:"url"`    // the URL that answered with a redirect
	Status int    `json:"status"` // its status (normally 301, 302, 303, 307 or 308)
}

// Header returns the value of the named response header, matching names
// case-insensitively, or "" when absent. When Headers holds several keys
// that differ only in case, the value of the smallest key in byte order
// wins, so the lookup never depends on map iteration order.
func (ev Evidence) Header(name string) string {
	var bestKey, bestVal string
	found := false
	for k, v := range ev.Headers {
		if !strings.EqualFold(k, name) {
			continue
		}
		if !found || k < bestKey {
			bestKey, bestVal, found = k, v, true
		}
	}
	return bestVal
}
