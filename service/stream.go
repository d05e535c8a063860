package service

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// streamBuffer is the size of the buffer the streamed writers (WriteAuditJSON,
// WriteComparisonJSON, WriteDiffJSON) write through.
const streamBuffer = 64 << 10

// WriteAuditJSON writes rep to w as the bytes Marshal(rep) returns, one
// artifact, edge and source at a time: the audit of a deep answer is tens
// of megabytes of JSON (26 MB for a 100k-deep chain), and Marshal builds
// it whole, twice over while its buffers grow, which the server's
// collector then has to catch up with while commits wait. On an error
// part of the report may have been written.
func WriteAuditJSON(w io.Writer, rep *graph.AuditReport) error {
	st := newStreamer(w)
	// The embedded AuditMeta's members come first, inline.
	if err := st.inline(rep.AuditMeta); err != nil {
		return err
	}
	return st.members(
		member{`"answer":`, func() error { return st.value(rep.Answer) }},
		member{`,"trust":`, func() error { return st.value(rep.Trust) }},
		member{`,"artifacts":`, func() error { return writeSlice(st, rep.Artifacts) }},
		member{`,"edges":`, func() error { return writeSlice(st, rep.Edges) }},
		member{`,"sources":`, func() error { return writeSlice(st, rep.Sources) }},
		member{`,"summary":`, func() error { return st.value(rep.Summary) }},
	)
}

// WriteComparisonJSON writes c to w as the bytes Marshal(c) returns, one
// artifact or edge of each list at a time: the comparison of two big
// runs lists every artifact of each (209 MB of JSON for a run of a
// million against a small one), which Marshal would hold two or three
// times over. On an error part of it may have been written.
func WriteComparisonJSON(w io.Writer, c *Comparison) error {
	st := newStreamer(w)
	if err := st.raw("{"); err != nil {
		return err
	}
	return st.members(
		member{`"equal":`, func() error { return st.value(c.Equal) }},
		member{`,"a":`, func() error { return st.value(c.A) }},
		member{`,"b":`, func() error { return st.value(c.B) }},
		member{`,"divergences":`, func() error {
			return writeSliceWith(st, c.Divergences, func(d *ProducerDivergence) error {
				if err := st.raw("{"); err != nil {
					return err
				}
				return st.membersOnly(
					member{`"producer":`, func() error { return st.value(d.Producer) }},
					member{`,"only_in_a":`, func() error { return writeSlice(st, d.OnlyInA) }},
					member{`,"only_in_b":`, func() error { return writeSlice(st, d.OnlyInB) }},
					member{`,"changed":`, func() error { return writeSlice(st, d.Changed) }},
					member{`,"edges_only_in_a":`, func() error { return writeSlice(st, d.EdgesOnlyInA) }},
					member{`,"edges_only_in_b":`, func() error { return writeSlice(st, d.EdgesOnlyInB) }},
					member{`,"edges_changed":`, func() error { return writeSlice(st, d.EdgesChanged) }},
				)
			})
		}},
	)
}

// diffHead is the members of a replay.DiffResult before its lists, as
// Marshal writes them.
type diffHead struct {
	From     hashing.Digest `json:"from,omitzero"`
	To       hashing.Digest `json:"to,omitzero"`
	FromHash hashing.Digest `json:"from_context_hash,omitzero"`
	ToHash   hashing.Digest `json:"to_context_hash,omitzero"`
}

// WriteDiffJSON writes d to w as the bytes Marshal(d) returns, one change
// of each list at a time (a diff of two big states lists millions). On an
// error part of it may have been written.
func WriteDiffJSON(w io.Writer, d *replay.DiffResult) error {
	st := newStreamer(w)
	if err := st.inline(diffHead{From: d.From, To: d.To, FromHash: d.FromHash, ToHash: d.ToHash}); err != nil {
		return err
	}
	return st.members(
		member{`"added":`, func() error { return writeSlice(st, d.Added) }},
		member{`,"removed":`, func() error { return writeSlice(st, d.Removed) }},
		member{`,"changed":`, func() error { return writeSlice(st, d.Changed) }},
		member{`,"edges_added":`, func() error { return writeSlice(st, d.EdgesAdded) }},
		member{`,"edges_removed":`, func() error { return writeSlice(st, d.EdgesRemoved) }},
		member{`,"edges_changed":`, func() error { return writeSlice(st, d.EdgesChanged) }},
		member{`,"trust":`, func() error { return writeSlice(st, d.Trust) }},
	)
}

// streamer writes a JSON document a piece at a time through a buffer,
// each piece as Marshal writes it.
type streamer struct {
	bw  *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
}

// newStreamer returns a streamer writing to w through a buffer of
// streamBuffer bytes.
func newStreamer(w io.Writer) *streamer {
	st := &streamer{bw: bufio.NewWriterSize(w, streamBuffer)}
	st.enc = json.NewEncoder(&st.buf)
	st.enc.SetEscapeHTML(false)
	return st
}

// encoded returns v as Marshal writes it, without the newline Encode ends
// a value with; valid until the next call.
func (st *streamer) encoded(v any) ([]byte, error) {
	st.buf.Reset()
	if err := st.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return bytes.TrimSuffix(st.buf.Bytes(), []byte{'\n'}), nil
}

// value writes v as Marshal would inside the document.
func (st *streamer) value(v any) error {
	b, err := st.encoded(v)
	if err != nil {
		return err
	}
	_, err = st.bw.Write(b)
	return err
}

// raw writes s as it is.
func (st *streamer) raw(s string) error {
	_, err := st.bw.WriteString(s)
	return err
}

// inline opens the document with the members of v (a struct) and, when
// it has any, the comma before the next.
func (st *streamer) inline(v any) error {
	b, err := st.encoded(v)
	if err != nil {
		return err
	}
	b = bytes.TrimSuffix(b, []byte{'}'})
	if _, err := st.bw.Write(b); err != nil {
		return err
	}
	if len(b) > 1 {
		return st.raw(",")
	}
	return nil
}

// member is one member of a streamed object: its key (with the comma
// before it) and how to write its value.
type member struct {
	key   string
	write func() error
}

// members writes ms, closes the document and flushes it.
func (st *streamer) members(ms ...member) error {
	if err := st.membersOnly(ms...); err != nil {
		return err
	}
	if err := st.raw("\n"); err != nil {
		return err
	}
	return st.bw.Flush()
}

// membersOnly writes ms and closes their object.
func (st *streamer) membersOnly(ms ...member) error {
	for _, m := range ms {
		if err := st.raw(m.key); err != nil {
			return err
		}
		if err := m.write(); err != nil {
			return err
		}
	}
	return st.raw("}")
}

// writeSlice writes s as a JSON array, each element as Marshal writes
// it; a nil slice is null, as encoding/json writes it. Each element is
// passed by its address, which encodes as the element does: a copy of it
// in an interface would be an allocation an element (100,000 for a deep
// audit).
func writeSlice[T any](st *streamer, s []T) error {
	return writeSliceWith(st, s, func(e *T) error { return st.value(e) })
}

// writeSliceWith writes s as a JSON array, each element with write; a nil
// slice is null.
func writeSliceWith[T any](st *streamer, s []T, write func(*T) error) error {
	if s == nil {
		return st.raw("null")
	}
	if err := st.bw.WriteByte('['); err != nil {
		return err
	}
	for i := range s {
		if i > 0 {
			if err := st.bw.WriteByte(','); err != nil {
				return err
			}
		}
		if err := write(&s[i]); err != nil {
			return err
		}
	}
	return st.bw.WriteByte(']')
}
