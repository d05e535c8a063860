package gate

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Secret masking.
//
// Secrets are recognised by shape, never by guessing at entropy, so ordinary
// words ("token: CPU") and long runs of one letter stay as they are:
//   - private key blocks (-----BEGIN … PRIVATE KEY----- to its END line, or to
//     the end of the text when the END line is missing) become
//     RedactedPrivateKey;
//   - the password in a URL's user info (scheme://user:password@host) becomes
//     "***";
//   - the credential after "Authorization:" (keeping its scheme word such as
//     "Bearer"), after a free-standing "Bearer", and the value of a secret-named
//     field (api_key=…, "client_secret": "…", X-Api-Key: …, GITHUB_TOKEN=…,
//     password: …) is masked;
//   - tokens with a known issuer prefix are masked wherever they stand:
//     OpenAI/Anthropic sk-…, GitHub ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_,
//     GitLab glpat-, Slack xox?-, Stripe sk_/rk_live_/test_, Hugging Face hf_,
//     npm npm_, Google AIza…, AWS access key ids (AKIA…, ASIA…), SendGrid
//     SG.…, and JSON Web Tokens (eyJ….eyJ….…).
//
// A masked token of MaskKeepMinChars or more characters keeps its first
// MaskKeepHead and last MaskKeepTail characters around "..." (enough to tell
// two keys apart in a log, useless to an attacker); a shorter one becomes
// "***" (or as many "*" as it had characters, when it had fewer than three).
// Values of password-named fields and URL passwords always become "***".
// Masking never makes a text longer and never introduces '<' or '>', and
// masking masked text changes nothing.
const (
	MaskKeepMinChars = 18
	MaskKeepHead     = 6
	MaskKeepTail     = 4
)

// RedactedPrivateKey replaces a private key block.
const RedactedPrivateKey = "[REDACTED PRIVATE KEY]"

// valueChars is the character class of a secret value after a field name.
const valueChars = `[^\s<>"'\[\],;&]+`

var (
	rePrivateKey = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`)

	reURLPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@<>"'\[\]]*:)([^\s/@<>"'\[\]]+)@`)

	reAuthorization = regexp.MustCompile(`(?i)(\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|bot|digest|apikey|sso-key)\s+)?)([^\s<>"'\[\],;]+)`)

	reBearer = regexp.MustCompile(`(?i)(\bbearer\s+)([A-Za-z0-9\-._~+/]{16,}=*)`)

	// Field names that are secret whatever separator follows (":" or "=").
	reSecretField = regexp.MustCompile(`(?i)(\b[a-z0-9_\-]*(?:api[-_]?key|apikey|api[-_]?secret|api[-_]?token|access[-_]?token|refresh[-_]?token|auth[-_]?token|id[-_]?token|session[-_]?token|bearer[-_]?token|client[-_]?secret|app[-_]?secret|secret[-_]?key|secret[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|private[-_]?key|password|passwd|passphrase)["']?\s*[:=]\s*["']?)(` + valueChars + `)`)

	// Generic names are secret only in an assignment ("token=…"), so prose
	// such as "token: CPU" stays.
	reSecretAssign = regexp.MustCompile(`(?i)(\b[a-z0-9_\-]*(?:secret|token|credentials?)=["']?)(` + valueChars + `)`)

	// Quoted keys in JSON or Python dicts: {"token": "…"}.
	reSecretQuoted = regexp.MustCompile(`(?i)(["'][a-z0-9_\-]*(?:api[-_]?key|apikey|token|secret|password|passwd|passphrase|credentials?|private[-_]?key|access[-_]?key|authorization)["']\s*:\s*["'])([^"'\\<>\[\]\s]+)`)

	reKnownToken = regexp.MustCompile(`\b(?:` +
		`sk-[A-Za-z0-9_\-]{20,}` +
		`|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}` +
		`|gh[pousr]_[A-Za-z0-9]{30,}` +
		`|github_pat_[A-Za-z0-9_]{30,}` +
		`|glpat-[A-Za-z0-9_\-]{20,}` +
		`|xox[abposr]-[A-Za-z0-9\-]{10,}` +
		`|hf_[A-Za-z0-9]{30,}` +
		`|npm_[A-Za-z0-9]{30,}` +
		`|AIza[0-9A-Za-z_\-]{35}` +
		`|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b` +
		`|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}` +
		`|eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*` +
		`)`)
)

// MaskSecrets returns s with every secret it recognises masked (see the
// rules above). It is deterministic and idempotent, never lengthens s, and
// is safe for concurrent use. Invalid UTF-8 is kept as it is.
func MaskSecrets(s string) string {
	if s == "" {
		return s
	}
	s = replaceAll(rePrivateKey, s, func(string, []int) string { return RedactedPrivateKey })
	s = replaceAll(reURLPassword, s, func(s string, m []int) string {
		return s[m[2]:m[3]] + maskPassword(s[m[4]:m[5]]) + "@"
	})
	s = replaceAll(reAuthorization, s, keepPrefixMaskValue)
	s = replaceAll(reBearer, s, keepPrefixMaskValue)
	s = replaceAll(reSecretField, s, keepPrefixMaskValue)
	s = replaceAll(reSecretAssign, s, keepPrefixMaskValue)
	s = replaceAll(reSecretQuoted, s, keepPrefixMaskValue)
	s = replaceAll(reKnownToken, s, func(s string, m []int) string { return maskToken(s[m[0]:m[1]]) })
	return s
}

// keepPrefixMaskValue keeps group 1 (the field name and separator) and masks
// group 2 (the value); password-named fields get maskPassword.
func keepPrefixMaskValue(s string, m []int) string {
	prefix, value := s[m[2]:m[3]], s[m[4]:m[5]]
	low := strings.ToLower(prefix)
	if strings.Contains(low, "pass") {
		return prefix + maskPassword(value) + s[m[5]:m[1]]
	}
	return prefix + maskToken(value) + s[m[5]:m[1]]
}

// replaceAll replaces every match of re in s by f(s, submatch indexes).
func replaceAll(re *regexp.Regexp, s string, f func(s string, m []int) string) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, m := range idx {
		b.WriteString(s[last:m[0]])
		b.WriteString(f(s, m))
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskToken masks a token: MaskKeepMinChars or more characters keep their
// first MaskKeepHead and last MaskKeepTail around "..."; three or more become
// "***"; shorter ones become as many "*". Already masked text is returned as
// it is.
func maskToken(v string) string {
	if isMasked(v) {
		return v
	}
	n := utf8.RuneCountInString(v)
	switch {
	case n >= MaskKeepMinChars:
		head := truncateRunes(v, MaskKeepHead)
		tail := v[runeOffset(v, n-MaskKeepTail):]
		return head + "..." + tail
	case n >= 3:
		return "***"
	}
	return strings.Repeat("*", n)
}

// maskPassword masks a password entirely.
func maskPassword(v string) string {
	if isMasked(v) {
		return v
	}
	n := utf8.RuneCountInString(v)
	if n >= 3 {
		return "***"
	}
	return strings.Repeat("*", n)
}

// isMasked reports whether v already has a masked form: one to three "*",
// or 6 characters, "...", 4 characters.
func isMasked(v string) bool {
	if v != "" && len(v) <= 3 && strings.Trim(v, "*") == "" {
		return true
	}
	n := utf8.RuneCountInString(v)
	if n != MaskKeepHead+3+MaskKeepTail {
		return false
	}
	i := runeOffset(v, MaskKeepHead)
	return strings.HasPrefix(v[i:], "...")
}
