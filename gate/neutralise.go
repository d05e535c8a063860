package gate

import (
	"bytes"
	"strings"
)

// Neutralising structural markers in untrusted text shown to a model.
//
// Removed, keeping the words between them:
//   - role and turn tags, any case, with or without attributes, opening,
//     closing or self-closing: <system>, </System>, <user role="x">,
//     <tool_call/> … (the names are in roleTags);
//   - chat-template tokens: <|im_start|>, <|eot_id|>, <｜User｜> (a '<', a
//     bar, up to 60 bytes without whitespace, a bar, a '>');
//   - bracketed template tokens, any case: [INST], [/INST], [SYSTEM_PROMPT],
//     [TOOL_CALLS], [AVAILABLE_TOOLS], [TOOL_RESULTS] … (bracketTokens), and
//     Llama's <<SYS>> and <</SYS>>; the sequence tokens <s>, </s>, <bos>,
//     <eos> are role tags here;
//   - CDATA markers "<![CDATA[" and "]]>", each on its own, so an unclosed
//     CDATA section loses its opener too.
//
// Removal runs as one left-to-right pass over a stack, so markers that only
// form once an inner marker is gone ("<sys<system>tem>") are removed too: the
// result never contains a complete marker. A role tag left unclosed ("<system
// role=x" with no '>') loses its '<' (and '/').
//
// Other markup ("<ParseError>line 5</ParseError>") stays.

// roleTags are the tag names (lower case) removed from model views.
var roleTags = map[string]bool{
	"system": true, "developer": true, "assistant": true, "user": true, "human": true,
	"tool": true, "tools": true, "tool_call": true, "tool_calls": true, "tool_result": true,
	"tool_results": true, "tool_response": true, "tool_use": true, "function": true,
	"function_call": true, "function_calls": true, "function_result": true,
	"function_results": true, "function_response": true, "result": true, "response": true,
	"output": true, "input": true, "instruction": true, "instructions": true, "prompt": true,
	"im_start": true, "im_end": true, "start_of_turn": true, "end_of_turn": true,
	"tool_error": true, "tool_output": true,
	"s": true, "bos": true, "eos": true, "eot": true, "start_of_text": true, "end_of_text": true,
}

// seqTags are the role tags that are sequence tokens: removed when complete
// (<s>, </s>), but an unclosed "<s" keeps its '<' (i<s in code is no token).
var seqTags = map[string]bool{"s": true, "bos": true, "eos": true, "eot": true}

// bracketTokens are the names (lower case) of bracketed template tokens,
// removed with or without a leading '/': [INST], [/INST], ….
var bracketTokens = map[string]bool{
	"inst": true, "system_prompt": true, "tool_calls": true, "available_tools": true,
	"tool_results": true, "tool_content": true, "sys": true, "system": true, "think": true,
}

// maxBracketToken is the longest name in bracketTokens.
const maxBracketToken = 16

// maxRoleTagName is the longest name in roleTags, rounded up.
const maxRoleTagName = 32

// maxChatToken bounds the name inside a chat-template token, in bytes.
const maxChatToken = 60

var (
	cdataOpen = []byte("<![cdata[")
	fullBar   = "｜" // U+FF5C, used by some chat templates
)

// neutralise removes structural markers (see above). It never lengthens s.
// Defanging an unclosed tag can close an earlier one ("</s 0</output!>"
// loses the second "</" and becomes the sequence tag "</s 0output!>"), so
// the two steps alternate until neither changes the text, and the last
// step is always a marker removal: the result never holds a complete
// marker.
func neutralise(s string) string {
	for range maxNeutralisePasses {
		t := defangUnclosed(stripMarkers(s))
		if t == s {
			return s
		}
		s = t
	}
	return stripMarkers(s)
}

// stripMarkers removes complete role tags, chat tokens and CDATA markers in
// one pass, re-checking whatever a removal brings together.
func stripMarkers(s string) string {
	if !strings.ContainsAny(s, "<>]") {
		return s
	}
	buf := make([]byte, 0, len(s))
	var lts, gts, lbs []int // positions in buf of '<', of kept '>' and of '['
	for i := 0; i < len(s); i++ {
		c := s[i]
		buf = append(buf, c)
		switch c {
		case '<':
			lts = append(lts, len(buf)-1)
		case '[':
			lbs = append(lbs, len(buf)-1)
			if n := len(buf); n >= len(cdataOpen) && bytes.EqualFold(buf[n-len(cdataOpen):], cdataOpen) {
				buf = buf[:n-len(cdataOpen)]
				lts, lbs = dropFrom(lts, len(buf)), dropFrom(lbs, len(buf))
			}
		case ']':
			if k := len(lbs); k > 0 && isBracketToken(buf[lbs[k-1]:]) {
				buf = buf[:lbs[k-1]]
				lbs = lbs[:k-1]
				lts, gts = dropFrom(lts, len(buf)), dropFrom(gts, len(buf))
			}
		case '>':
			n := len(buf)
			if n >= 7 && buf[n-2] == '>' && (hasSuffixFold(buf, "<<sys>>") || hasSuffixFold(buf, "<</sys>>")) {
				cut := n - 7
				if hasSuffixFold(buf, "<</sys>>") {
					cut = n - 8
				}
				buf = buf[:cut]
				lts, gts, lbs = dropFrom(lts, cut), dropFrom(gts, cut), dropFrom(lbs, cut)
				continue
			}
			if k := len(lts); k > 0 && (len(gts) == 0 || lts[k-1] > gts[len(gts)-1]) && isMarkerTag(buf[lts[k-1]:]) {
				buf = buf[:lts[k-1]]
				lts = lts[:k-1]
				continue
			}
			if n >= 3 && buf[n-3] == ']' && buf[n-2] == ']' {
				buf = buf[:n-3]
				continue
			}
			gts = append(gts, n-1)
		}
	}
	if len(buf) == len(s) {
		return s
	}
	return string(buf)
}

// isBracketToken reports whether t ("[…]") is a bracketed template token.
func isBracketToken(t []byte) bool {
	inner := t[1 : len(t)-1]
	if len(inner) > 0 && inner[0] == '/' {
		inner = inner[1:]
	}
	if len(inner) == 0 || len(inner) > maxBracketToken {
		return false
	}
	var low [maxBracketToken]byte
	for i, c := range inner {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	return bracketTokens[string(low[:len(inner)])]
}

func hasSuffixFold(b []byte, suffix string) bool {
	return len(b) >= len(suffix) && bytes.EqualFold(b[len(b)-len(suffix):], []byte(suffix))
}

// dropFrom removes the trailing positions >= n.
func dropFrom(pos []int, n int) []int {
	for len(pos) > 0 && pos[len(pos)-1] >= n {
		pos = pos[:len(pos)-1]
	}
	return pos
}

// isMarkerTag reports whether t ("<…>", nothing but the ends being angle
// brackets) is a role tag or a chat-template token.
func isMarkerTag(t []byte) bool {
	inner := t[1 : len(t)-1]
	if isChatToken(inner) {
		return true
	}
	if len(inner) > 0 && inner[0] == '/' {
		inner = inner[1:]
	}
	n := 0
	for n < len(inner) && isTagNameChar(inner[n]) {
		n++
	}
	if n == 0 || n > maxRoleTagName || !isRoleName(inner[:n]) {
		return false
	}
	rest := inner[n:]
	return len(rest) == 0 || rest[0] == '/' || isSpaceByte(rest[0])
}

// isChatToken reports a bar (| or ｜), 1 to maxChatToken bytes without
// whitespace, and a bar.
func isChatToken(inner []byte) bool {
	if len(inner) > maxChatToken+2*len(fullBar) {
		return false
	}
	var rest []byte
	switch {
	case bytes.HasPrefix(inner, []byte("|")):
		rest = inner[1:]
	case bytes.HasPrefix(inner, []byte(fullBar)):
		rest = inner[len(fullBar):]
	default:
		return false
	}
	var body []byte
	switch {
	case bytes.HasSuffix(rest, []byte("|")):
		body = rest[:len(rest)-1]
	case bytes.HasSuffix(rest, []byte(fullBar)):
		body = rest[:len(rest)-len(fullBar)]
	default:
		return false
	}
	return len(body) > 0 && len(body) <= maxChatToken && !bytes.ContainsAny(body, " \t\r\n\f")
}

func isTagNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// isRoleName reports whether name (any case) is in roleTags.
func isRoleName(name []byte) bool {
	var low [maxRoleTagName]byte
	if len(name) > len(low) {
		return false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	return roleTags[string(low[:len(name)])]
}

// defangUnclosed removes the '<' (and a following '/') of every role tag
// that has no closing '>'. It scans right to left so a removal that makes an
// earlier '<' start a role name ("<tool_<result") is handled in the same
// pass. Removing a '<' can join an earlier '<' to a later '>' into a
// complete marker; neutralise removes those.
func defangUnclosed(s string) string {
	if strings.IndexByte(s, '<') < 0 {
		return s
	}
	rev := make([]byte, 0, len(s)) // the processed suffix, reversed
	changed := false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c == '<' {
			if drop, ok := opensRoleTag(rev); ok {
				rev = rev[:len(rev)-drop]
				changed = true
				continue
			}
		}
		rev = append(rev, c)
	}
	if !changed {
		return s
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return string(rev)
}

// opensRoleTag reports whether the text after a '<' (given reversed: its
// first byte is rev's last) is an optional '/' and a role name ending at a
// non-name character or the end; drop is 1 when the '/' must go too.
func opensRoleTag(rev []byte) (drop int, ok bool) {
	j := len(rev) - 1
	if j >= 0 && rev[j] == '/' {
		j--
		drop = 1
	}
	var name [maxRoleTagName]byte
	n := 0
	for ; j >= 0 && isTagNameChar(rev[j]); j-- {
		if n == len(name) {
			return 0, false
		}
		name[n] = rev[j]
		n++
	}
	if n == 0 || !isRoleName(name[:n]) || seqTags[strings.ToLower(string(name[:n]))] {
		return 0, false
	}
	return drop, true
}

// removeFenceLines drops lines that open or close a Markdown code fence
// (``` or ~~~, optionally indented, with an info string), so an error cannot
// close a fence the caller wrapped it in. Lines are split and joined on "\n".
func removeFenceLines(s string) string {
	if !strings.Contains(s, "```") && !strings.Contains(s, "~~~") {
		return s
	}
	lines := strings.Split(s, "\n")
	kept := lines[:0]
	for _, ln := range lines {
		if !isFenceLine(ln) {
			kept = append(kept, ln)
		}
	}
	return strings.Join(kept, "\n")
}

func isFenceLine(ln string) bool {
	ln = strings.TrimLeft(ln, " \t")
	ln = strings.TrimSuffix(ln, "\r")
	switch {
	case strings.HasPrefix(ln, "```"):
		return !strings.Contains(strings.TrimLeft(ln, "`"), "`")
	case strings.HasPrefix(ln, "~~~"):
		return true
	}
	return false
}

// maxNeutralisePasses bounds how often fence removal and marker removal are
// alternated for an error (each can expose the other); the last step is
// always a marker removal, so the result never holds a marker.
const maxNeutralisePasses = 4

// neutraliseError removes fence lines and structural markers until neither
// changes the text (at most maxNeutralisePasses rounds).
func neutraliseError(s string) string {
	for i := 0; i < maxNeutralisePasses; i++ {
		t := neutralise(removeFenceLines(s))
		if t == s {
			return s
		}
		s = t
	}
	return neutralise(s)
}
