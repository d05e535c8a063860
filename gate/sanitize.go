package gate

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tool-result sanitising defaults (DESIGN.md, "The gate"; testdata/sanitize).
const (
	// DefaultMaxErrorChars caps the body of a tool error's model view.
	DefaultMaxErrorChars = 2048
	// DefaultMaxOutputChars caps the whole model view of a tool output,
	// omission notice included.
	DefaultMaxOutputChars = 2000
	// DefaultOutputHeadPercent is the share of a long output's shown
	// characters taken from its head; the rest comes from its tail.
	DefaultOutputHeadPercent = 40
)

// ErrorPrefix starts every tool error's model view.
const ErrorPrefix = "[TOOL_ERROR] "

// TruncationMarker follows a tool error's model view when it was cut.
const TruncationMarker = "… [truncated]"

// OutputNoticeTag opens the notice line of a shortened tool output.
const OutputNoticeTag = "[OUTPUT TRUNCATED: "

// maxBlobRefChars bounds the blob reference quoted in an omission notice.
const maxBlobRefChars = 200

// SanitizeOptions tune tool-result sanitising. The zero value means the
// defaults (DefaultSanitizeOptions): a zero or negative number is replaced by
// its default, and secrets are masked unless KeepSecrets is set.
type SanitizeOptions struct {
	// MaxErrorChars caps the error text in an error's model view, in
	// characters (runes), not bytes; ErrorPrefix and TruncationMarker come on
	// top.
	MaxErrorChars int
	// MaxOutputChars caps an output's whole model view, in characters.
	MaxOutputChars int
	// OutputHeadPercent (1–100) is the share of a shortened output's shown
	// characters taken from its head.
	OutputHeadPercent int
	// KeepSecrets turns shape-based secret masking ([MaskSecrets]) off (for
	// trusted local tools and tests). The default, false, masks: masking is
	// what a zero value must do, so the switch is the exception rather than
	// the rule. Declared Secrets are masked even with KeepSecrets.
	KeepSecrets bool
	// Secrets are the values the operator declared secret, masked by value
	// (before the shapes) in the model view and in the full text to store.
	Secrets Secrets
}

// DefaultSanitizeOptions returns the options the fixtures and DESIGN.md
// define: errors capped at 2,048 characters, outputs at 2,000 with 40 % head,
// secrets masked.
func DefaultSanitizeOptions() SanitizeOptions {
	return SanitizeOptions{
		MaxErrorChars:     DefaultMaxErrorChars,
		MaxOutputChars:    DefaultMaxOutputChars,
		OutputHeadPercent: DefaultOutputHeadPercent,
	}
}

func (o SanitizeOptions) norm() SanitizeOptions {
	if o.MaxErrorChars <= 0 {
		o.MaxErrorChars = DefaultMaxErrorChars
	}
	if o.MaxOutputChars <= 0 {
		o.MaxOutputChars = DefaultMaxOutputChars
	}
	if o.OutputHeadPercent <= 0 || o.OutputHeadPercent > 100 {
		o.OutputHeadPercent = DefaultOutputHeadPercent
	}
	return o
}

func (o SanitizeOptions) mask(s string) string {
	s = o.Secrets.Mask(s)
	if o.KeepSecrets {
		return s
	}
	return MaskSecrets(s)
}

// Mask masks text as the sanitiser does: the declared Secrets, then, unless
// KeepSecrets, every shape [MaskSecrets] knows. Use it for tool text stored
// or shown outside a model view (an effect's error, a tool name).
func (o SanitizeOptions) Mask(text string) string { return o.mask(text) }

// ErrorView is a tool error made safe to show: the model's view and the full
// masked text to keep for people.
type ErrorView struct {
	// ModelView is ErrorPrefix, then the masked error with role tags,
	// chat-template tokens, CDATA markers and code-fence lines removed, cut
	// to MaxErrorChars characters with TruncationMarker appended when cut
	// (a JSON object error is cut inside its error text instead: see
	// Structured).
	// It is still untrusted data, never an instruction.
	ModelView string `json:"model_view"`
	// Masked is the whole error, secret-masked but otherwise unchanged: the
	// text to store as a blob.
	Masked string `json:"-"`
	// TotalChars is the length of Masked in characters.
	TotalChars int `json:"total_chars"`
	// Truncated reports whether ModelView was cut.
	Truncated bool `json:"truncated"`
	// Structured reports that the error was a JSON object too long for
	// the cap: the model view after ErrorPrefix is then still one valid
	// JSON object, with the "error" string (or the "message" of an "error"
	// object) cut and ending in TruncationMarker, and the other members
	// kept (strings of theirs longer than 64 characters cut too when they
	// alone leave the error less than 64 characters). It is only set on a
	// truncated view.
	Structured bool `json:"structured,omitempty"`
	// Spilled reports whether the model view does not carry the whole error,
	// so the blob holding Masked is its only complete copy and must be
	// stored. It is true exactly when Truncated (testdata/sanitize names it
	// "spilled"); storing Masked is advisable in every case.
	Spilled bool `json:"spilled"`
}

// safeAgain makes a capped structured error safe again: capStructured
// decodes the object's strings and keys and writes them out again, so an
// escape the first pass read past (a secret or a role tag written with
// \u0026 or \u003c) is now plain text. The view is masked and
// neutralised once more; false when that leaves it invalid JSON or over
// the limit (the caller then cuts it as plain text).
func safeAgain(capped *string, opt SanitizeOptions) bool {
	again := modelSafe(*capped, cleanError, opt)
	if again == *capped {
		return true
	}
	if !json.Valid([]byte(again)) || utf8.RuneCountInString(again) > opt.MaxErrorChars {
		return false
	}
	*capped = again
	return true
}

// SanitizeError frames a tool error for a model. It is pure and
// deterministic; invalid UTF-8 in msg becomes U+FFFD. The model view holds
// no complete role tag, chat-template token or CDATA marker, whatever msg
// holds.
func SanitizeError(msg string, opt SanitizeOptions) ErrorView {
	opt = opt.norm()
	masked := opt.mask(strings.ToValidUTF8(msg, "\uFFFD"))
	body := modelSafe(masked, cleanError, opt)
	v := ErrorView{Masked: masked, TotalChars: utf8.RuneCountInString(masked)}
	if utf8.RuneCountInString(body) > opt.MaxErrorChars {
		if capped, ok := capStructured(body, opt.MaxErrorChars); ok && safeAgain(&capped, opt) {
			// A JSON object error stays one valid JSON object: its error
			// text is cut (with TruncationMarker inside the string), its
			// side fields are kept.
			body = capped
			v.Structured = true
		} else {
			// The cut can leave a role tag's opening "<name" at the end.
			body = neutralise(truncateRunes(body, opt.MaxErrorChars)) + TruncationMarker
		}
		v.Truncated, v.Spilled = true, true
	}
	v.ModelView = ErrorPrefix + body
	return v
}

// PrepareOutput is step one of sanitising a tool output: it returns the full
// output, secret-masked (unless opt.KeepSecrets) and as valid UTF-8. Store
// the result as a blob, then pass it and the blob's reference to
// [SanitizeOutput]:
//
//	full := gate.PrepareOutput(out, opt)
//	ref := blobs.Put([]byte(full))           // e.g. "sha256:…"
//	view := gate.SanitizeOutput(full, ref, opt)
//
// The model sees view.ModelView; a person follows ref to the whole output.
func PrepareOutput(out string, opt SanitizeOptions) string {
	return opt.norm().mask(strings.ToValidUTF8(out, "\uFFFD"))
}

// OutputView is a tool output made safe and small enough to show a model.
type OutputView struct {
	// ModelView is the output itself when it fits in MaxOutputChars;
	// otherwise its head (OutputHeadPercent of the room, cut back to a line
	// end in its second half if there is one), a notice line and its tail
	// (likewise starting at a line start where one is near). The notice reads
	// "[OUTPUT TRUNCATED: <omitted> of <total> characters omitted; full output
	// in blob <ref>]". Role tags, chat-template tokens and CDATA markers are
	// removed; code fences are kept (outputs are often code). ModelView is at
	// most MaxOutputChars characters.
	ModelView string `json:"model_view"`
	// BlobRef is the reference the notice names ("" when none was given).
	BlobRef string `json:"blob_ref,omitempty"`
	// TotalChars is the length of the full (prepared) output in characters.
	TotalChars int `json:"total_chars"`
	// OmittedChars is how many of its characters the view leaves out.
	OmittedChars int `json:"omitted_chars"`
	// Truncated reports whether the view is shortened.
	Truncated bool `json:"truncated"`
}

// SanitizeOutput is step two of sanitising a tool output (see
// [PrepareOutput]): full is the prepared output and blobRef the reference of
// the blob holding it ("" if it was not stored). Passing unprepared text is
// safe too: it is masked (unless opt.KeepSecrets) and made valid UTF-8 again,
// which changes nothing in prepared text. Pure and deterministic.
func SanitizeOutput(full string, blobRef string, opt SanitizeOptions) OutputView {
	opt = opt.norm()
	full = opt.mask(strings.ToValidUTF8(full, "\uFFFD"))
	total := utf8.RuneCountInString(full)
	v := OutputView{BlobRef: blobRef, TotalChars: total}
	limit := opt.MaxOutputChars
	if total <= limit {
		v.ModelView = modelSafe(full, cleanOutput, opt)
		return v
	}

	// The notice is sized with the total as the omitted count: the real
	// count is no longer, so the view stays within the limit.
	ref := cleanRef(blobRef)
	noticeLen := utf8.RuneCountInString(outputNotice(total, total, ref)) + 2 // two "\n"
	room := limit - noticeLen
	if room < 0 {
		room = 0
	}
	headRoom := room * opt.OutputHeadPercent / 100
	tailRoom := room - headRoom

	// Cut at line ends when one is in the outer half of the head or tail, so
	// the model sees whole lines; otherwise cut mid-line.
	headEnd := runeOffset(full, headRoom)
	if nl := strings.LastIndexByte(full[:headEnd], '\n'); nl >= 0 && nl+1 >= headEnd-headEnd/2 {
		headEnd = nl + 1
	}
	tailStart := len(full) - tailBytes(full, tailRoom)
	if nl := strings.IndexByte(full[tailStart:], '\n'); nl >= 0 && nl < (len(full)-tailStart)/2 {
		tailStart += nl + 1
	}
	if tailStart < headEnd {
		tailStart = headEnd
	}
	head, tail := full[:headEnd], full[tailStart:]
	shown := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail)
	v.OmittedChars = total - shown
	v.Truncated = true

	// The head and the tail are made safe each on its own, and the notice
	// is written between them afterwards: cleaned together, a tag opened
	// in the head and closed in the tail took the notice with it, and the
	// notice's tag would be defanged as a tool's. A sequence tag left open
	// at the head's end ("<s ") loses its '<' so that it cannot close in
	// the tail.
	head = defangOpenAtEnd(modelSafe(head, cleanOutput, opt))
	tail = modelSafe(tail, cleanOutput, opt)
	var b strings.Builder
	b.WriteString(head)
	if !strings.HasSuffix(head, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(outputNotice(v.OmittedChars, total, ref))
	b.WriteByte('\n')
	b.WriteString(tail)
	view := b.String()
	if utf8.RuneCountInString(view) > limit { // only when the notice alone is over the limit
		view = truncateRunes(view, limit)
	}
	v.ModelView = view
	return v
}

// modelSafe alternates clean (marker removal) with secret masking until
// neither changes the text: removing a marker can join the halves of a
// secret, and a mask can complete a marker (RedactedPrivateKey ends in
// ']'). Both only ever shorten the text, so this settles quickly; after
// maxNeutralisePasses rounds it stops, always after a clean, so the result
// never holds a marker.
func modelSafe(s string, clean func(string) string, opt SanitizeOptions) string {
	s = clean(s)
	for i := 0; i < maxNeutralisePasses; i++ {
		m := opt.mask(s)
		if m == s {
			return s
		}
		s = clean(m)
	}
	return s
}

// cleanOutput removes the structural markers from an output's text, then
// defangs the gate's framing tags: removing a marker can join a tag's
// halves ("[OUTPUT TRUNC<|x|>ATED: "), so the tags are defanged last.
func cleanOutput(s string) string { return defangTags(neutralise(s)) }

// cleanError is cleanOutput for an error's text, whose code-fence lines go
// too (neutraliseError).
func cleanError(s string) string { return defangTags(neutraliseError(s)) }

// defangOpenAtEnd removes the '<' (and a following '/') of every role or
// sequence tag opened after the last '>' of s, which a '>' written after s
// could close.
func defangOpenAtEnd(s string) string {
	var b strings.Builder
	last := 0
	for i := strings.LastIndexByte(s, '>') + 1; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		j := i + 1
		if j < len(s) && s[j] == '/' {
			j++
		}
		k := j
		for k < len(s) && isTagNameChar(s[k]) {
			k++
		}
		if k == j || !isRoleName([]byte(s[j:k])) {
			continue
		}
		b.WriteString(s[last:i])
		last = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// defangTags turns the gate's own framing tags inside a tool's text
// (OutputNoticeTag, ErrorPrefix) into look-alikes with parentheses, so
// that only the gate's lines carry them; the length is kept.
func defangTags(s string) string {
	if !strings.Contains(s, OutputNoticeTag) && !strings.Contains(s, ErrorPrefix) {
		return s
	}
	return tagDefanger.Replace(s)
}

var tagDefanger = strings.NewReplacer(OutputNoticeTag, "(OUTPUT TRUNCATED: ", ErrorPrefix, "(TOOL_ERROR) ")

// outputNotice is the omission line of a shortened output.
func outputNotice(omitted, total int, ref string) string {
	where := "the full output was not stored"
	if ref != "" {
		where = "full output in blob " + ref
	}
	return OutputNoticeTag + strconv.Itoa(omitted) + " of " + strconv.Itoa(total) +
		" characters omitted; " + where + "]"
}

// cleanRef keeps a blob reference on one line and short, and without the
// brackets that make up structural markers (the notice is not cleaned).
func cleanRef(ref string) string {
	ref = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || strings.ContainsRune("<>[]", r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(ref, ""))
	return truncateRunes(ref, maxBlobRefChars)
}

// tailBytes returns the byte length of the last n runes of s.
func tailBytes(s string, n int) int {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return len(s) - i
}
