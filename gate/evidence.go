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
	// Kind is what kind of read this is: "http" (the default when empty),
	// "file" (a local file read: Path, Size and the bytes) or "tool" (a
	// tool's read of a resource: Tool, the resource in URL, and the bytes
	// it returned). A file or tool read has no HTTP exchange: a zero Status
	// is not judged (no status is invented), and only the transport error,
	// the size and the bytes are; extraction and fingerprints run as for
	// HTTP. See [ReadHTTP], [ReadFile], [ReadTool].
	Kind string `json:"kind,omitempty"`
	// URL is the URL the fetcher requested; for a tool read, the resource
	// it read (a URL or another identifier), if any.
	URL string `json:"url"`
	// Path is the file read (kind "file").
	Path string `json:"path,omitempty"`
	// Size is the file's size as the reader saw it (kind "file", optional):
	// fewer or more bytes than that is a short or overlong read
	// ([ReasonSizeMismatch]).
	Size *int64 `json:"size,omitempty"`
	// Tool names the tool that read the resource (kind "tool").
	Tool string `json:"tool,omitempty"`
	// ContentType is the media type of a file or tool read when no
	// Content-Type header says it; a file's type is otherwise guessed from
	// its extension, then from its bytes.
	ContentType string `json:"content_type,omitempty"`
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

// Read kinds of [Evidence].Kind.
const (
	ReadHTTP = "http" // an HTTP exchange (the default)
	ReadFile = "file" // a local file read
	ReadTool = "tool" // a tool's read of a resource
)

// readKind returns the evidence's kind with the default applied.
func (ev Evidence) readKind() string {
	if ev.Kind == "" {
		return ReadHTTP
	}
	return ev.Kind
}

// contentType returns the media type to judge the body by: the
// Content-Type header, else (file and tool reads) ContentType, else (file
// reads) a type guessed from the path's extension.
func (ev Evidence) contentType() string {
	if ct := ev.Header("Content-Type"); ct != "" || ev.readKind() == ReadHTTP {
		return ct
	}
	if ev.ContentType != "" {
		return ev.ContentType
	}
	if ev.readKind() == ReadFile {
		return extensionTypes[strings.ToLower(pathExt(ev.Path))]
	}
	return ""
}

// pathExt returns the extension of the last element of a slash or
// backslash separated path, with its dot.
func pathExt(p string) string {
	if i := strings.LastIndexAny(p, "/\\"); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.LastIndexByte(p, '.'); i > 0 {
		return p[i:]
	}
	return ""
}

// extensionTypes maps common file extensions to media types. It is a fixed
// table (not the system's MIME database), so a verdict never depends on the
// machine.
var extensionTypes = map[string]string{
	".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml",
	".json": "application/json", ".geojson": "application/json", ".jsonl": "application/x-ndjson", ".ndjson": "application/x-ndjson",
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".xml": "application/xml", ".rss": "application/rss+xml", ".atom": "application/atom+xml",
	".txt": "text/plain", ".md": "text/markdown", ".rst": "text/x-rst", ".log": "text/plain",
	".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml", ".ini": "text/plain", ".sql": "application/sql",
	".go": "text/plain", ".py": "text/plain", ".js": "application/javascript", ".ts": "text/plain", ".rs": "text/plain",
	".java": "text/plain", ".c": "text/plain", ".h": "text/plain", ".sh": "text/plain",
	".pdf": "application/pdf", ".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
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
