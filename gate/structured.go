package gate

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Structured tool errors. Many tools report failure as a JSON object such
// as {"error": "...", "code": 502, "retry_after": 30}. Cutting its text at
// MaxErrorChars would leave the model a broken document; instead the
// "error" member is cut (its string, or the "message" string of an "error"
// object) and the rest is kept, so the model view is still one valid JSON
// object with its side fields.

// minErrorFieldChars is the least of the error string a structured view
// keeps before it also shortens the other long strings.
const minErrorFieldChars = 64

// sideFieldChars is what other long string members are cut to when the
// side fields alone do not leave minErrorFieldChars for the error.
const sideFieldChars = 64

// member is one member of a JSON object, in document order.
type member struct {
	key string
	raw json.RawMessage
}

// parseObject reads a JSON object's members in order; ok is false for any
// other text (an array, a scalar, invalid JSON, trailing data).
func parseObject(s string) ([]member, bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, isKey := tok.(string)
		if !isKey {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		out = append(out, member{key, raw})
	}
	return out, true
}

// encodeJSON marshals v without HTML escaping: the text was neutralised
// already and must read as the tool wrote it.
func encodeJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// joinObject writes members as one compact object.
func joinObject(ms []member) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeJSON(m.key))
		b.WriteByte(':')
		var c bytes.Buffer
		if err := json.Compact(&c, m.raw); err == nil {
			b.Write(c.Bytes())
		} else {
			b.Write(m.raw)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// cutString returns the string JSON value raw cut to n characters with
// TruncationMarker appended (and neutralised again: the cut can leave a
// role tag's opening at the end), or ok false when raw is not a string or
// is short enough.
func cutString(raw json.RawMessage, n int) (json.RawMessage, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || utf8.RuneCountInString(s) <= n {
		return raw, false
	}
	if n < 0 {
		n = 0
	}
	return encodeJSON(neutralise(truncateRunes(s, n)) + TruncationMarker), true
}

// errorSlot finds the error text of a structured error: the "error" member
// when it is a string, else the "message" string of an "error" object.
// It returns the member index and, for the nested form, the inner members.
func errorSlot(ms []member) (idx int, inner []member, ok bool) {
	for i, m := range ms {
		if m.key != "error" {
			continue
		}
		var s string
		if json.Unmarshal(m.raw, &s) == nil {
			return i, nil, true
		}
		if in, isObj := parseObject(string(m.raw)); isObj {
			for _, im := range in {
				if im.key == "message" && json.Unmarshal(im.raw, &s) == nil {
					return i, in, true
				}
			}
		}
		return 0, nil, false
	}
	return 0, nil, false
}

// capStructured shortens a JSON object tool error to at most max
// characters by cutting its error text (and, if the other members leave too
// little room, every other string longer than sideFieldChars). ok is false
// when body is not such an object or cannot be made to fit; the caller then
// cuts it as plain text.
func capStructured(body string, max int) (string, bool) {
	ms, ok := parseObject(body)
	if !ok {
		return "", false
	}
	idx, inner, ok := errorSlot(ms)
	if !ok {
		return "", false
	}
	errText := func() json.RawMessage {
		if inner == nil {
			return ms[idx].raw
		}
		for _, im := range inner {
			if im.key == "message" {
				return im.raw
			}
		}
		return nil
	}
	setErr := func(raw json.RawMessage) {
		if inner == nil {
			ms[idx].raw = raw
			return
		}
		for i := range inner {
			if inner[i].key == "message" {
				inner[i].raw = raw
			}
		}
		ms[idx].raw = json.RawMessage(joinObject(inner))
	}
	var errStr string
	if json.Unmarshal(errText(), &errStr) != nil {
		return "", false
	}
	// build returns the view with the error text cut to n characters.
	build := func(n int) string {
		cut, was := cutString(encodeJSON(errStr), n)
		if !was {
			cut = encodeJSON(errStr)
		}
		setErr(cut)
		return joinObject(ms)
	}
	for round := 0; round < 2; round++ {
		// The room the side fields leave: the view with the error cut to
		// nothing (TruncationMarker alone) is the least it can be.
		room := max - utf8.RuneCountInString(build(0))
		if room < minErrorFieldChars && round == 0 {
			// Too little room: cut the other long strings, once.
			cutSides(ms, idx)
			if inner != nil {
				cutSides(inner, -1)
			}
			continue
		}
		// JSON escapes make some characters longer: shrink until it fits.
		for try := 0; try < 8 && room >= 0; try++ {
			out := build(room)
			over := utf8.RuneCountInString(out) - max
			if over <= 0 {
				return out, json.Valid([]byte(out))
			}
			room -= over
		}
		return "", false
	}
	return "", false
}

// cutSides cuts every string member but the one at skip (and "message",
// the error text of a nested error object) to sideFieldChars.
func cutSides(ms []member, skip int) {
	for i := range ms {
		if i == skip || (skip < 0 && ms[i].key == "message") {
			continue
		}
		if c, cut := cutString(ms[i].raw, sideFieldChars); cut {
			ms[i].raw = c
		}
	}
}
