package hashing

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// ContentHash returns the content hash of an artifact: the SHA-256 of
// canonicalData, which must already be canonical JSON (the output of
// [CanonicalizeObject] on the artifact's data). It does not check that.
func ContentHash(canonicalData []byte) Digest { return sha256.Sum256(canonicalData) }

// ArtifactLeaf returns the leaf of one artifact (HASHING.md §3): the SHA-256
// of the canonical JSON of
//
//	{"kind":"artifact","id":id,"type":typ,"version":version,
//	 "content_hash":"sha256:<hex>","produced_by":producedBy}
//
// producedBy is "" when the artifact has no producer. version is an integer
// of at least 1; it is written in decimal, which is its canonical form for
// every version up to 2^53. The strings must be valid UTF-8 (the API
// validates them); invalid bytes are hashed as U+FFFD, as encoding/json
// would write them.
func ArtifactLeaf(id, typ string, version int64, contentHash Digest, producedBy string) Digest {
	var buf [256]byte
	b := buf[:0]
	// Members in canonical order: content_hash, id, kind, produced_by, type,
	// version.
	b = append(b, `{"content_hash":`...)
	b = appendDigestString(b, contentHash)
	b = append(b, `,"id":`...)
	b = appendString(b, id)
	b = append(b, `,"kind":"artifact","produced_by":`...)
	b = appendString(b, producedBy)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, version, 10)
	b = append(b, '}')
	return sha256.Sum256(b)
}

// EdgeLeaf returns the leaf of one edge (HASHING.md §3): the SHA-256 of the
// canonical JSON of {"kind":"edge","from":from,"rel":rel,"to":to} plus
// "attrs" when the edge has attributes.
//
// canonicalAttrs is the canonical JSON of the attrs object (the output of
// [CanonicalizeObject]). When it is nil, empty or "{}" the attrs member is
// omitted, so an edge with an empty attrs object has the same leaf as one
// without attrs. Otherwise it is embedded byte for byte and not checked.
// Strings are treated as in [ArtifactLeaf].
func EdgeLeaf(from, rel, to string, canonicalAttrs []byte) Digest {
	var buf [256]byte
	b := buf[:0]
	// Members in canonical order: attrs, from, kind, rel, to.
	b = append(b, '{')
	if len(canonicalAttrs) > 0 && string(canonicalAttrs) != "{}" {
		b = append(b, `"attrs":`...)
		b = append(b, canonicalAttrs...)
		b = append(b, ',')
	}
	b = append(b, `"from":`...)
	b = appendString(b, from)
	b = append(b, `,"kind":"edge","rel":`...)
	b = appendString(b, rel)
	b = append(b, `,"to":`...)
	b = appendString(b, to)
	b = append(b, '}')
	return sha256.Sum256(b)
}

// appendDigestString appends d as the JSON string "sha256:<hex>".
func appendDigestString(dst []byte, d Digest) []byte {
	dst = append(dst, '"')
	dst = append(dst, digestPrefix...)
	dst = hex.AppendEncode(dst, d[:])
	return append(dst, '"')
}
