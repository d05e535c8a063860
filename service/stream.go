package service

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/graph"
)

// streamBuffer is the size of the buffer WriteAuditJSON writes through.
const streamBuffer = 64 << 10

// WriteAuditJSON writes rep to w as the bytes Marshal(rep) returns, one
// artifact, edge and source at a time: the audit of a deep answer is tens
// of megabytes of JSON (26 MB for a 100k-deep chain), and Marshal builds
// it whole, twice over while its buffers grow, which the server's
// collector then has to catch up with while commits wait. On an error
// part of the report may have been written.
func WriteAuditJSON(w io.Writer, rep *graph.AuditReport) error {
	bw := bufio.NewWriterSize(w, streamBuffer)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// value writes v as Marshal would inside the report (without the
	// newline Encode ends a value with).
	value := func(v any) error {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		_, err := bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
		return err
	}
	raw := func(s string) error {
		_, err := bw.WriteString(s)
		return err
	}
	// The embedded AuditMeta's members come first, inline.
	buf.Reset()
	if err := enc.Encode(rep.AuditMeta); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	meta := bytes.TrimSuffix(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), []byte{'}'})
	if _, err := bw.Write(meta); err != nil {
		return err
	}
	if len(meta) > 1 {
		if err := raw(","); err != nil {
			return err
		}
	}
	members := []struct {
		key   string
		write func() error
	}{
		{`"answer":`, func() error { return value(rep.Answer) }},
		{`,"trust":`, func() error { return value(rep.Trust) }},
		{`,"artifacts":`, func() error { return writeSlice(bw, rep.Artifacts, value) }},
		{`,"edges":`, func() error { return writeSlice(bw, rep.Edges, value) }},
		{`,"sources":`, func() error { return writeSlice(bw, rep.Sources, value) }},
		{`,"summary":`, func() error { return value(rep.Summary) }},
	}
	for _, m := range members {
		if err := raw(m.key); err != nil {
			return err
		}
		if err := m.write(); err != nil {
			return err
		}
	}
	if err := raw("}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// writeSlice writes s as a JSON array, each element with value; a nil
// slice is null, as encoding/json writes it. Each element is passed by
// its address, which encodes as the element does: a copy of it in an
// interface would be an allocation an element (100,000 for a deep audit).
func writeSlice[T any](bw *bufio.Writer, s []T, value func(any) error) error {
	if s == nil {
		_, err := bw.WriteString("null")
		return err
	}
	if err := bw.WriteByte('['); err != nil {
		return err
	}
	for i := range s {
		if i > 0 {
			if err := bw.WriteByte(','); err != nil {
				return err
			}
		}
		if err := value(&s[i]); err != nil {
			return err
		}
	}
	return bw.WriteByte(']')
}
