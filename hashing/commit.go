package hashing

import (
	"crypto/sha256"
	"time"
)

// CommitHeader is what a commit id covers (HASHING.md §5).
type CommitHeader struct {
	// Parents are the ids of the parent commits, in order: none for the
	// first commit of a context, two for a merge.
	Parents []Digest
	// ContextHash is the context hash of the state after the commit.
	ContextHash Digest
	// OpsHash is [OpsHash] of the canonical JSON of the commit's ops.
	OpsHash Digest
	// Author and Message are free text, hashed as given.
	Author, Message string
	// Time is the commit time as an RFC 3339 UTC string, already formatted
	// (see [FormatTime]); it is hashed as given, not parsed.
	Time string
}

// CommitID returns the id of the commit h: the SHA-256 of the canonical JSON
// of
//
//	{"parents":["sha256:<hex>",...],"context_hash":"sha256:<hex>",
//	 "ops_hash":"sha256:<hex>","author":...,"message":...,"time":...}
//
// "parents" is [] when there are none, never null. Strings are treated as in
// [ArtifactLeaf].
func CommitID(h CommitHeader) Digest {
	b := make([]byte, 0, 256+len(h.Parents)*75+len(h.Author)+len(h.Message))
	// Members in canonical order: author, context_hash, message, ops_hash,
	// parents, time.
	b = append(b, `{"author":`...)
	b = appendString(b, h.Author)
	b = append(b, `,"context_hash":`...)
	b = appendDigestString(b, h.ContextHash)
	b = append(b, `,"message":`...)
	b = appendString(b, h.Message)
	b = append(b, `,"ops_hash":`...)
	b = appendDigestString(b, h.OpsHash)
	b = append(b, `,"parents":[`...)
	for i, p := range h.Parents {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendDigestString(b, p)
	}
	b = append(b, `],"time":`...)
	b = appendString(b, h.Time)
	b = append(b, '}')
	return sha256.Sum256(b)
}

// OpsHash returns the SHA-256 of canonicalOps, the canonical JSON of a
// commit's ops (the output of [Canonicalize] or [Marshal]); it does not
// check that the bytes are canonical.
func OpsHash(canonicalOps []byte) Digest { return sha256.Sum256(canonicalOps) }

// FormatTime formats t for [CommitHeader.Time]: t in UTC in RFC 3339 with
// nanoseconds and trailing zeros dropped, e.g. "2026-11-30T07:42:05.123456789Z"
// or "2026-11-30T07:42:05Z". It only formats; it never reads the clock.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
