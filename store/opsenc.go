package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// The commit path writes a commit's recorded ops once, straight into their
// canonical JSON (RFC 8785), and takes both the ops hash and the stored op
// chunks from those bytes. graph.OpsHash gets the same bytes through
// encoding/json and a full re-parse, which costs several microseconds per
// op; TestEncodeOpsMatchesOpsHash keeps the two equal.

// encodedOps is the canonical JSON of a commit's recorded ops, cut into
// the chunks the store keeps (canonical arrays of up to ChunkOps ops), and
// the ops hash of the whole array.
type encodedOps struct {
	chunks [][]byte
	hash   hashing.Digest
}

// encodeOps returns the canonical JSON of ops in chunks of chunkOps ops
// and the ops hash of the whole array (the chunks joined). The bytes equal
// what graph.OpsHash canonicalizes: members in key order, strings with the
// minimal escapes and invalid UTF-8 as U+FFFD (as encoding/json writes
// it), attrs embedded as the canonical object they already are.
func encodeOps(ops []graph.Op, chunkOps int) (*encodedOps, error) {
	e := &encodedOps{}
	h := sha256.New()
	h.Write([]byte{'['})
	for start := 0; start < len(ops); start += chunkOps {
		end := min(start+chunkOps, len(ops))
		size := 2
		for i := start; i < end; i++ {
			o := &ops[i]
			size += 120 + len(o.ID) + len(o.Type) + len(o.ProducedBy) + len(o.From) + len(o.Rel) + len(o.To) + len(o.Attrs)
		}
		buf := make([]byte, 0, size)
		buf = append(buf, '[')
		for i := start; i < end; i++ {
			if i > start {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = graph.AppendCanonicalOp(buf, &ops[i]); err != nil {
				return nil, fmt.Errorf("%w: op %d: %v", ErrInvalid, i, err)
			}
		}
		buf = append(buf, ']')
		if start > 0 {
			h.Write([]byte{','})
		}
		h.Write(buf[1 : len(buf)-1])
		e.chunks = append(e.chunks, buf)
	}
	h.Write([]byte{']'})
	h.Sum(e.hash[:0])
	return e, nil
}

// decodeOps reads a stored chunk of ops. Chunks written by this store are
// canonical JSON with a fixed member set per op kind, which a small scanner
// reads several times faster than encoding/json; anything it does not
// expect (escapes, unknown members, other spacing) is read by
// encoding/json instead, so both give the same ops for every input.
func decodeOps(raw []byte) ([]graph.Op, error) {
	if ops, ok := scanOps(raw); ok {
		return ops, nil
	}
	var ops []graph.Op
	if err := json.Unmarshal(raw, &ops); err != nil {
		return nil, err
	}
	return ops, nil
}

// opScanner reads the canonical op arrays that encodeOps writes.
type opScanner struct {
	b   []byte
	pos int
	// names interns the short strings that repeat across ops (types,
	// producers, relations).
	names map[string]string
}

func scanOps(raw []byte) ([]graph.Op, bool) {
	s := opScanner{b: raw, names: make(map[string]string)}
	if !s.lit("[") {
		return nil, false
	}
	ops := make([]graph.Op, 0, bytes.Count(raw, []byte("},{"))+1)
	if s.lit("]") {
		return ops, s.pos == len(raw)
	}
	for {
		op, ok := s.op()
		if !ok {
			return nil, false
		}
		ops = append(ops, op)
		if s.lit(",") {
			continue
		}
		if s.lit("]") && s.pos == len(raw) {
			return ops, true
		}
		return nil, false
	}
}

func (s *opScanner) lit(l string) bool {
	if len(s.b)-s.pos >= len(l) && string(s.b[s.pos:s.pos+len(l)]) == l {
		s.pos += len(l)
		return true
	}
	return false
}

// name reads a string like str, interned: types, producers and relations
// repeat across ops.
func (s *opScanner) name() (string, bool) {
	v, ok := s.strBytes()
	if !ok {
		return "", false
	}
	if n, ok := s.names[string(v)]; ok {
		return n, true
	}
	n := string(v)
	s.names[n] = n
	return n, true
}

// str reads a string with no escapes and valid UTF-8 (the only kind the
// scanner accepts; others fall back to encoding/json).
func (s *opScanner) str() (string, bool) {
	v, ok := s.strBytes()
	return string(v), ok
}

func (s *opScanner) strBytes() ([]byte, bool) {
	if !s.lit(`"`) {
		return nil, false
	}
	start := s.pos
	for s.pos < len(s.b) {
		c := s.b[s.pos]
		switch {
		case c == '"':
			v := s.b[start:s.pos]
			s.pos++
			return v, utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.pos++
	}
	return nil, false
}

func (s *opScanner) digest() (hashing.Digest, bool) {
	var d hashing.Digest
	const n = len(`"sha256:`) + 64 + 1
	if len(s.b)-s.pos < n || string(s.b[s.pos:s.pos+8]) != `"sha256:` || s.b[s.pos+n-1] != '"' {
		return d, false
	}
	h := s.b[s.pos+8 : s.pos+n-1]
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return d, false
		}
	}
	if _, err := hex.Decode(d[:], h); err != nil {
		return d, false
	}
	s.pos += n
	return d, true
}

func (s *opScanner) int() (int64, bool) {
	start := s.pos
	for s.pos < len(s.b) && s.b[s.pos] >= '0' && s.b[s.pos] <= '9' {
		s.pos++
	}
	digits := s.b[start:s.pos]
	if len(digits) == 0 || len(digits) > 15 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	v, err := strconv.ParseInt(string(digits), 10, 64)
	return v, err == nil
}

// object reads a JSON object value and returns its bytes as they are.
func (s *opScanner) object() ([]byte, bool) {
	if s.pos >= len(s.b) || s.b[s.pos] != '{' {
		return nil, false
	}
	start := s.pos
	depth := 0
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case '"':
			s.pos++
			for s.pos < len(s.b) && s.b[s.pos] != '"' {
				if s.b[s.pos] == '\\' {
					s.pos++
				}
				s.pos++
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.pos++
				v := s.b[start:s.pos]
				if !json.Valid(v) {
					return nil, false
				}
				return append(json.RawMessage(nil), v...), true
			}
		}
		s.pos++
	}
	return nil, false
}

func (s *opScanner) op() (graph.Op, bool) {
	var o graph.Op
	ok := true
	str := func(key string, dst *string) {
		if ok {
			ok = s.lit(key)
		}
		if ok {
			*dst, ok = s.str()
		}
	}
	name := func(key string, dst *string) {
		if ok {
			ok = s.lit(key)
		}
		if ok {
			*dst, ok = s.name()
		}
	}
	switch {
	case s.lit(`{"content_hash":`):
		o.Op = graph.OpPut
		o.ContentHash, ok = s.digest()
		str(`,"id":`, &o.ID)
		ok = ok && s.lit(`,"op":"put"`)
		name(`,"produced_by":`, &o.ProducedBy)
		name(`,"type":`, &o.Type)
		ok = ok && s.lit(`,"version":`)
		if ok {
			o.Version, ok = s.int()
		}
	case s.lit(`{"id":`):
		o.Op = graph.OpDelete
		o.ID, ok = s.str()
		ok = ok && s.lit(`,"op":"delete"`)
	default:
		if s.lit(`{"attrs":`) {
			if o.Attrs, ok = s.object(); ok {
				ok = s.lit(`,"from":`)
			}
		} else {
			ok = s.lit(`{"from":`)
		}
		if ok {
			o.From, ok = s.str()
		}
		if ok {
			switch {
			case s.lit(`,"op":"link"`):
				o.Op = graph.OpLink
			case o.Attrs == nil && s.lit(`,"op":"unlink"`):
				o.Op = graph.OpUnlink
			default:
				ok = false
			}
		}
		name(`,"rel":`, &o.Rel)
		str(`,"to":`, &o.To)
	}
	return o, ok && s.lit("}")
}
