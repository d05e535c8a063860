package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// FormatVersion is the version of the key layout documented in doc.go.
const FormatVersion = "5"

// formatLegacy, formatUnindexed, formatReverseInMap and formatUnpacked
// are the earlier layouts a store is upgraded from on open (doc.go, "Key
// layout"): state maps keyed by hash, ordered state maps without their
// index, maps that hold their reverse edges, and records the Badger
// driver never packs.
const (
	formatLegacy       = "1"
	formatUnindexed    = "2"
	formatReverseInMap = "3"
	formatUnpacked     = "4"
)

// upgradedFormat reports whether v is a layout Open reads as it is and
// stamps with FormatVersion.
func upgradedFormat(v string) bool {
	switch v {
	case formatLegacy, formatUnindexed, formatReverseInMap, formatUnpacked:
		return true
	}
	return false
}

// Key prefixes. Parts are joined with a NUL byte, which no context id,
// branch name or artifact id may contain.
const (
	pMeta   = "meta\x00"
	pCtx    = "ctx\x00"
	pRef    = "ref\x00"
	pCommit = "cmt\x00"
	pSeq    = "seq\x00"
	pOps    = "ops\x00"
	pObj    = "obj\x00"
	pBlob   = "blob\x00"
	pNode   = "node\x00"
	pType   = "type\x00"
	pRelDef = "reldef\x00"
	pRev    = "rev\x00"
)

func keyMetaFormat() []byte { return []byte(pMeta + "format") }

func keyMetaRegistry() []byte { return []byte(pMeta + "registry") }

func keyCtx(ctx string) []byte { return []byte(pCtx + ctx) }

func keyRef(ctx, branch string) []byte { return []byte(pRef + ctx + "\x00" + branch) }

func prefixRefs(ctx string) []byte { return []byte(pRef + ctx + "\x00") }

func keyCommit(ctx string, id hashing.Digest) []byte {
	return append([]byte(pCommit+ctx+"\x00"), id[:]...)
}

func prefixCommits(ctx string) []byte { return []byte(pCommit + ctx + "\x00") }

func keySeq(ctx string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(pSeq+ctx+"\x00"), seq)
}

func prefixSeq(ctx string) []byte { return []byte(pSeq + ctx + "\x00") }

func keyOps(ctx string, id hashing.Digest, chunk uint32) []byte {
	k := append([]byte(pOps+ctx+"\x00"), id[:]...)
	return binary.BigEndian.AppendUint32(k, chunk)
}

func keyObj(d hashing.Digest) []byte  { return append([]byte(pObj), d[:]...) }
func keyBlob(d hashing.Digest) []byte { return append([]byte(pBlob), d[:]...) }
func keyNode(d hashing.Digest) []byte { return append([]byte(pNode), d[:]...) }
func keyType(name string) []byte      { return []byte(pType + name) }
func keyRelDef(name string) []byte    { return []byte(pRelDef + name) }

// keyRev is the key of the reverse-index record of the edges that commit
// first linked to artifact to in context ctx (format 4): rev NUL ctx NUL
// to NUL commit, so that the edges that ever arrived at an artifact, on
// any branch, are one prefix, and a commit linking many artifacts to one
// hub writes one record, not one per edge.
func keyRev(ctx, to string, commit hashing.Digest) []byte {
	return append(prefixRev(ctx, to), commit[:]...)
}

// prefixRev is the prefix of the reverse-index records of the edges
// arriving at to in context ctx.
func prefixRev(ctx, to string) []byte {
	b := make([]byte, 0, len(pRev)+len(ctx)+2+len(to)+len(hashing.Digest{}))
	b = append(append(append(b, pRev...), ctx...), 0)
	return append(append(b, to...), 0)
}

// prefixRevs is the prefix of context ctx's reverse index.
func prefixRevs(ctx string) []byte { return []byte(pRev + ctx + "\x00") }

// revTarget returns the artifact a reverse-index key of context ctx
// names (what follows prefixRevs(ctx)).
func revTarget(ctx string, k []byte) (string, error) {
	rest := k[len(pRev)+len(ctx)+1:] // past prefixRevs(ctx), not built again per key
	to, commit, ok := bytes.Cut(rest, []byte{0})
	if !ok || len(to) == 0 || len(commit) != len(hashing.Digest{}) {
		return "", fmt.Errorf("%w: malformed reverse-index key %q", ErrCorrupt, k)
	}
	return string(to), nil
}

// encodeRevVal encodes the edges of one reverse-index record, all
// arriving at one artifact, sorted: uvarint len(rel) rel uvarint
// len(from) from, for each.
func encodeRevVal(edges []graph.EdgeKey) []byte {
	n := 0
	for _, e := range edges {
		n += 4 + len(e.Rel) + len(e.From)
	}
	b := make([]byte, 0, n)
	for _, e := range edges {
		b = binary.AppendUvarint(b, uint64(len(e.Rel)))
		b = append(b, e.Rel...)
		b = binary.AppendUvarint(b, uint64(len(e.From)))
		b = append(b, e.From...)
	}
	return b
}

// decodeRevVal calls fn with each edge of a reverse-index record of the
// edges arriving at to.
func decodeRevVal(to string, v []byte, fn func(graph.EdgeKey)) error {
	str := func() (string, bool) {
		n, w := binary.Uvarint(v)
		if w <= 0 || n == 0 || n > uint64(len(v)-w) {
			return "", false
		}
		out := string(v[w : w+int(n)])
		v = v[w+int(n):]
		return out, true
	}
	if len(v) == 0 {
		return fmt.Errorf("%w: empty reverse-index record of %q", ErrCorrupt, to)
	}
	for len(v) > 0 {
		rel, ok1 := str()
		from, ok2 := str()
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: malformed reverse-index record of %q", ErrCorrupt, to)
		}
		fn(graph.EdgeKey{From: from, Rel: rel, To: to})
	}
	return nil
}

// Trie entry keys: 'a' id for an artifact, 'e' from NUL rel NUL to for an
// edge, 't' id for a tombstone (the last version of a deleted artifact);
// and the index a commit of format 3 keeps with them, so that a head
// need not be loaded whole to decide a commit: 'r' to NUL rel NUL from,
// the edge again from its other end (the dependents of an artifact are a
// prefix), and 'q' id for the trust entry of an unconfirmed artifact (a
// confirmed one — the common case — has none: its entry is always the
// same). The commit record keeps the sizes (replay.MapIndex).
func tkRev(k graph.EdgeKey) []byte {
	b := make([]byte, 0, 3+len(k.From)+len(k.Rel)+len(k.To))
	b = append(append(append(b, 'r'), k.To...), 0)
	b = append(append(b, k.Rel...), 0)
	return append(b, k.From...)
}
func tkTrust(id string) []byte    { return append(append(make([]byte, 0, 1+len(id)), 'q'), id...) }
func tkArtifact(id string) []byte { return append(append(make([]byte, 0, 1+len(id)), 'a'), id...) }
func tkTomb(id string) []byte     { return append(append(make([]byte, 0, 1+len(id)), 't'), id...) }
func tkEdge(k graph.EdgeKey) []byte {
	b := make([]byte, 0, 3+len(k.From)+len(k.Rel)+len(k.To))
	b = append(append(append(b, 'e'), k.From...), 0)
	b = append(append(b, k.Rel...), 0)
	return append(b, k.To...)
}

// artifact value: uvarint version, content hash [32], commit [32],
// uvarint len(type) type, uvarint len(produced_by) produced_by.
func encodeArtifactVal(a *graph.Artifact, commit hashing.Digest) []byte {
	b := make([]byte, 0, 80+len(a.Type)+len(a.ProducedBy))
	b = binary.AppendUvarint(b, uint64(a.Version))
	b = append(b, a.ContentHash[:]...)
	b = append(b, commit[:]...)
	b = binary.AppendUvarint(b, uint64(len(a.Type)))
	b = append(b, a.Type...)
	b = binary.AppendUvarint(b, uint64(len(a.ProducedBy)))
	b = append(b, a.ProducedBy...)
	return b
}

// artifactVal is a decoded trie artifact value.
type artifactVal struct {
	version     int64
	contentHash hashing.Digest
	commit      hashing.Digest
	typ         string
	producedBy  string
}

func decodeArtifactVal(b []byte) (artifactVal, error) {
	var v artifactVal
	ver, n := binary.Uvarint(b)
	if n <= 0 || len(b[n:]) < 64 {
		return v, fmt.Errorf("%w: artifact value header", ErrCorrupt)
	}
	v.version = int64(ver)
	b = b[n:]
	copy(v.contentHash[:], b[:32])
	copy(v.commit[:], b[32:64])
	b = b[64:]
	str := func() (string, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b[n:])) < l {
			return "", false
		}
		s := string(b[n : n+int(l)])
		b = b[n+int(l):]
		return s, true
	}
	var ok1, ok2 bool
	v.typ, ok1 = str()
	v.producedBy, ok2 = str()
	if !ok1 || !ok2 || len(b) != 0 {
		return v, fmt.Errorf("%w: artifact value strings", ErrCorrupt)
	}
	return v, nil
}

func (v artifactVal) artifact(id string) *graph.Artifact {
	return &graph.Artifact{ID: id, Type: v.typ, Version: v.version, ContentHash: v.contentHash, ProducedBy: v.producedBy}
}

func encodeTombVal(version int64) []byte { return binary.AppendUvarint(nil, uint64(version)) }

func decodeTombVal(b []byte) (int64, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) {
		return 0, fmt.Errorf("%w: tombstone value", ErrCorrupt)
	}
	return int64(v), nil
}

// edgeVal is the edge's canonical attrs; an edge without attrs stores a
// single 0 byte (a nil value would mean "delete").
func encodeEdgeVal(attrs []byte) []byte {
	if len(attrs) == 0 {
		return []byte{0}
	}
	return attrs
}

func decodeEdgeVal(b []byte) []byte {
	if len(b) == 1 && b[0] == 0 {
		return nil
	}
	return b
}

// splitRevKey decodes an 'r' key into the edge's key.
func splitRevKey(k []byte) (graph.EdgeKey, error) {
	r, err := splitEdgeKey(k)
	return graph.EdgeKey{From: r.To, Rel: r.Rel, To: r.From}, err
}

// A trust value is a flags byte (1: the artifact's base holds; an entry
// is never confirmed), the number of its dependency edges to unconfirmed
// artifacts as a uvarint, and for a poison root (base does not hold) the
// reason, the rest of the value.
func encodeTrustVal(e graph.TrustEntry, reason string) []byte {
	b := make([]byte, 0, 2+len(reason))
	var flags byte
	if e.Base {
		flags = 1
	}
	b = binary.AppendUvarint(append(b, flags), uint64(e.Bad))
	if !e.Base {
		b = append(b, reason...)
	}
	return b
}

func decodeTrustVal(b []byte) (e graph.TrustEntry, reason string, err error) {
	if len(b) < 2 || b[0] > 1 {
		return e, "", fmt.Errorf("%w: trust value flags", ErrCorrupt)
	}
	e.Base = b[0] == 1
	bad, n := binary.Uvarint(b[1:])
	if n <= 0 || bad > 1<<31-1 {
		return e, "", fmt.Errorf("%w: trust value count", ErrCorrupt)
	}
	e.Bad = int32(bad)
	rest := b[1+n:]
	switch {
	case e.Base && (len(rest) != 0 || bad == 0):
		// A quarantined artifact rests on at least one unconfirmed one.
		return e, "", fmt.Errorf("%w: trust value of a quarantined artifact", ErrCorrupt)
	case !e.Base:
		reason = string(rest)
	}
	return e, reason, nil
}

func splitEdgeKey(k []byte) (graph.EdgeKey, error) {
	s := string(k[1:])
	var parts [3]string
	n := 0
	start := 0
	for i := 0; i < len(s) && n < 2; i++ {
		if s[i] == 0 {
			parts[n] = s[start:i]
			n++
			start = i + 1
		}
	}
	if n != 2 {
		return graph.EdgeKey{}, fmt.Errorf("%w: edge key", ErrCorrupt)
	}
	parts[2] = s[start:]
	return graph.EdgeKey{From: parts[0], Rel: parts[1], To: parts[2]}, nil
}
