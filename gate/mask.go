package gate

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Secret masking.
//
// Secrets are recognised by shape, never by guessing at entropy, so ordinary
// words ("token: CPU") and long runs of one letter stay as they are:
//   - private key blocks (-----BEGIN … PRIVATE KEY----- to its END line, or to
//     the end of the text when the END line is missing) become
//     RedactedPrivateKey;
//   - the password in a URL's user info (scheme://user:password@host, and
//     scheme-less //user:password@host) becomes "***"; a user info without a
//     password that looks like a token (scheme://<token>@host: 16 or more
//     characters with a digit, or 32 or more) is masked as a token;
//   - the credential after "Authorization:" (keeping its scheme word such as
//     "Bearer"), after a free-standing "Bearer", and the value of a secret-named
//     field (api_key=…, "client_secret": "…", X-Api-Key: …, GITHUB_TOKEN=…,
//     password: …) is masked, also as Go prints a header map
//     (map[Authorization:[Basic …]], http.Header{"X-Api-Key":[]string{"…"}},
//     each of several values) and in a JSON object quoted inside a JSON
//     string ({\"Authorization\": \"…\"}); a JSON array
//     ("authorization":["…"]) is not a header's print;
//   - the cookie values of a Cookie header, and the first (the cookie's own)
//     of a Set-Cookie header, are masked (a session is a credential), a
//     quoted one (sid="…") to its closing quote; names and a Set-Cookie's
//     attributes stay (a secret-named field among them is masked as a
//     field);
//   - tokens with a known issuer prefix are masked wherever they stand:
//     OpenAI/Anthropic sk-…, GitHub ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_,
//     GitLab glpat-, Slack xox?-, Stripe sk_/rk_live_/test_, Hugging Face hf_,
//     npm npm_, Google AIza…, AWS access key ids (AKIA…, ASIA…), SendGrid
//     SG.…, and JSON Web Tokens and other base64 JSON (eyJ… of 16 or more
//     characters, with or without dots);
//   - Telegram bot tokens (<6–12 digits>:<30 or more token characters>, also
//     after "bot" as in /bot<digits>:<token>/) and the token part of Discord
//     webhook URLs (discord.com/api/webhooks/<id>/<token>).
//
// Whitespace between a keyword and its credential may be any Unicode space
// (NBSP, VT, NEL, EN/EM space, line and paragraph separators, zero-width
// space): "Bearer\u00a0<token>" is masked like "Bearer <token>".
//
// A masked token of MaskKeepMinChars or more characters keeps its first
// MaskKeepHead and last MaskKeepTail characters around "..." (enough to tell
// two keys apart in a log, useless to an attacker); a shorter one becomes
// "***" (or as many "*" as it had characters, when it had fewer than three).
// Values of password-named fields and URL passwords always become "***".
// Masking never makes a text longer and never introduces '<' or '>', and
// masking masked text changes nothing.
const (
	MaskKeepMinChars = 18 // tokens this long keep a head and a tail
	MaskKeepHead     = 6  // characters kept at the start
	MaskKeepTail     = 4  // characters kept at the end
)

// RedactedPrivateKey replaces a private key block.
const RedactedPrivateKey = "[REDACTED PRIVATE KEY]"

var (
	// rePrivateKey starts with a literal, so the regexp engine skips ahead
	// with a substring search.
	rePrivateKey = regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`)

	// The remaining patterns are anchored: they are tried only at candidate
	// positions found by a cheap scan, so masking stays linear and fast on
	// megabytes of output.
	//
	// reAuthorization reads Go's print of a header's values (":[" of
	// map[Authorization:[…]] after the bare name, "\":[]string{" of
	// http.Header{…} after the quoted one), or the name's closing quote,
	// escaped or not (a JSON object quoted inside a JSON string), the
	// separator and spaces; then an opening quote (escaped or not), an
	// optional scheme word, and the credential (see authCredential). A JSON
	// array ("authorization":["…"]) is not a header's print.
	reAuthorization = regexp.MustCompile(`^(?i)(authorization(:\[|":\[\]string\{|(?:\\?["'])?` + anySpace + `*[:=]` + anySpace + "*)(?:\\\\?[\"'`])?" + authScheme + ")" + authCredential)
	// reAuthNext reads a value after the first of Go's print of an
	// Authorization header: an optional scheme word and the credential.
	reAuthNext    = regexp.MustCompile(`^(?i)(` + authScheme + ")" + authCredential)
	reBearer      = regexp.MustCompile(`^(?i)(bearer` + anySpace + `+)([A-Za-z0-9\-._~+/]{16,}=*)`)
	reDiscordHook = regexp.MustCompile(`^(?i)https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api(?:/v[0-9]+)?/webhooks/[0-9]+/([A-Za-z0-9_\-]+)`)
	reKnownToken  = regexp.MustCompile(`^(?:` +
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
		`|eyJ[A-Za-z0-9_\-+/]{13,}={0,2}(?:\.[A-Za-z0-9_\-+/=]+)*` +
		`)`)
)

// authScheme and authCredential are the parts of an Authorization value: an
// optional scheme word, and the credential, which ends at a space, a quote,
// a backslash, a bracket, ',' or ';'.
const (
	authScheme     = "(?:(?:bearer|basic|token|bot|digest|apikey|sso-key)" + anySpace + "+)?"
	authCredential = "([^\\s\\v\\p{Z}\\x{85}\\x{200B}\\x{FEFF}<>\"'`\\[\\],;\\\\]+)"
)

// anySpace is a regexp class of every space a credential may follow: ASCII
// whitespace with VT, the Unicode separators (NBSP, EN/EM space, line and
// paragraph separators, …), NEL, zero-width space and the BOM.
const anySpace = `[\s\v\p{Z}\x{85}\x{200B}\x{FEFF}]`

// knownTokenPrefixes are the literal openings of reKnownToken's
// alternatives; the regexp is only tried where one of them starts a word.
var knownTokenPrefixes = []string{
	"sk-", "sk_live_", "sk_test_", "rk_live_", "rk_test_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
	"github_pat_", "glpat-", "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "hf_", "npm_",
	"AIza", "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "SG.", "eyJ",
}

// Field names, compared with '-' and '_' removed and in lower case.
var (
	// secretFieldSuffixes: a field whose name ends so is secret whatever
	// separator follows (":" or "=").
	secretFieldSuffixes = []string{
		"apikey", "apisecret", "apitoken", "accesstoken", "refreshtoken", "authtoken", "idtoken",
		"sessiontoken", "bearertoken", "clientsecret", "appsecret", "secretkey", "accesskey",
		"accesskeyid", "privatekey", "password", "passwd", "passphrase",
	}
	// secretAssignSuffixes: generic names, secret only in an assignment
	// ("token=…"), so prose such as "token: CPU" stays.
	secretAssignSuffixes = []string{"secret", "token", "credential", "credentials"}
	// secretQuotedWords: a quoted key ({"…": "…"}) ending in one of these
	// is secret ("api_token", "client_secret"; not "token_ttl" or
	// "secrets_file").
	secretQuotedWords = []string{
		"apikey", "token", "secret", "password", "passwd", "passphrase", "credential",
		"privatekey", "accesskey", "tokens", "secrets", "passwords", "credentials", "apikeys",
	}
)

// maxFieldName bounds the field name looked at before a separator.
const maxFieldName = 64

// MaskSecrets returns s with every secret it recognises masked (see the
// rules above). It is deterministic and idempotent, runs in time linear in
// len(s), never lengthens s, and is safe for concurrent use. Invalid UTF-8
// is kept as it is.
func MaskSecrets(s string) string {
	if s == "" {
		return s
	}
	s = rePrivateKey.ReplaceAllLiteralString(s, RedactedPrivateKey)
	s = applyEdits(s, urlPasswordEdits(s))
	s = applyEdits(s, discordEdits(s))
	s = applyEdits(s, credentialEdits(s))
	s = applyEdits(s, telegramEdits(s))
	s = applyEdits(s, fieldEdits(s))
	s = applyEdits(s, knownTokenEdits(s))
	return s
}

// edit replaces s[start:end] by repl.
type edit struct {
	start, end int
	repl       string
}

// applyEdits applies non-overlapping edits given in ascending order.
func applyEdits(s string, edits []edit) string {
	if len(edits) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, e := range edits {
		b.WriteString(s[last:e.start])
		b.WriteString(e.repl)
		last = e.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// urlPasswordEdits masks the password of scheme://user:password@host and of
// a scheme-less //user:password@host, and a token-like user info without a
// password (scheme://<token>@host).
func urlPasswordEdits(s string) []edit {
	var edits []edit
	for off := 0; ; {
		i := strings.Index(s[off:], "//")
		if i < 0 {
			return edits
		}
		i += off
		off = i + 2
		if !urlAuthorityStart(s, i) {
			continue
		}
		// The user info: up to the authority's last '@' (as URL parsers
		// read it: a password may hold an unescaped '@'), without a stop
		// byte; a ':' in it starts the password.
		k := off
		for k < len(s) && !isURLStop(s[k]) {
			k++
		}
		if k == len(s) || s[k] != '@' || k == off {
			continue
		}
		for j := k + 1; j < len(s) && (s[j] == '@' || !isURLStop(s[j])); j++ {
			if s[j] == '@' {
				k = j
			}
		}
		colon := strings.IndexByte(s[off:k], ':')
		if colon >= 0 {
			colon += off
		}
		switch {
		case colon >= 0 && colon+1 < k:
			edits = append(edits, edit{colon + 1, k, maskPassword(s[colon+1 : k])})
		case colon < 0 && tokenLikeUser(s[off:k]):
			edits = append(edits, edit{off, k, maskToken(s[off:k])})
		}
		off = k + 1
	}
}

// urlAuthorityStart reports whether the "//" at s[i:] starts a URL
// authority: after "scheme:" (a letter, then letters, digits, '+', '.',
// '-'), or scheme-less after the start of the text, whitespace, a quote, a
// bracket or '='.
func urlAuthorityStart(s string, i int) bool {
	if i == 0 {
		return true
	}
	switch c := s[i-1]; c {
	case ':':
		j := i - 1
		for j > 0 && isSchemeByte(s[j-1]) {
			j--
		}
		for j < i-1 && !isASCIILetter(s[j]) {
			j++
		}
		return j < i-1
	case ' ', '\t', '\n', '\r', '\f', '\v', '"', '\'', '(', '[', '{', '<', '=', ',':
		return true
	}
	return false
}

// tokenLikeUser reports whether a password-less URL user info looks like a
// credential rather than a user name: 16 or more characters with a digit,
// or 32 or more.
func tokenLikeUser(u string) bool {
	if len(u) >= 32 {
		return true
	}
	return len(u) >= 16 && strings.ContainsAny(u, "0123456789")
}

func isSchemeByte(c byte) bool {
	return isASCIILetter(c) || '0' <= c && c <= '9' || c == '+' || c == '.' || c == '-'
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isURLStop reports the bytes that end a URL's user info: whitespace, '/',
// '@' and quoting or bracket characters.
func isURLStop(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v', '/', '@', '<', '>', '"', '\'', '[', ']':
		return true
	}
	return false
}

func isWordByte(c byte) bool {
	return isASCIILetter(c) || '0' <= c && c <= '9' || c == '_'
}

// credentialEdits masks the credential after "Authorization:" and after a
// free-standing "Bearer". Each regexp is tried, anchored, at every
// occurrence of its keyword (ASCII case-insensitive) that starts a word; a
// "Bearer" inside an Authorization match was handled with it.
func credentialEdits(s string) []edit {
	lower := asciiLower(s)
	var edits []edit
	var covered [][2]int // Authorization matches
	for off := 0; ; {
		i := strings.Index(lower[off:], "authorization")
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		if i > 0 && isWordByte(s[i-1]) {
			continue
		}
		if m := reAuthorization.FindStringSubmatchIndex(s[i:]); m != nil {
			// Past the match either way: a placeholder credential
			// (${TOKEN}) read again at every later keyword inside it made
			// the pass quadratic.
			off = i + m[1]
			if !placeholder(s[i+m[6] : i+m[7]]) {
				edits = append(edits, edit{i + m[6], i + m[7], maskToken(s[i+m[6] : i+m[7]])})
			}
			// Go's print of the header with several values: the values
			// after the first, a space apart in %v, ", " in %#v.
			var form byte
			switch s[i+m[4] : i+m[5]] {
			case ":[":
				form = '['
			case `":[]string{`:
				form = '{'
			}
			for {
				p := nextPrintValue(s, off, form)
				if p < 0 {
					break
				}
				n := reAuthNext.FindStringSubmatchIndex(s[p:])
				if n == nil {
					break
				}
				if !placeholder(s[p+n[4] : p+n[5]]) {
					edits = append(edits, edit{p + n[4], p + n[5], maskToken(s[p+n[4] : p+n[5]])})
				}
				off = p + n[1]
			}
			covered = append(covered, [2]int{i, off})
		}
	}
	auth := edits
	edits = nil
	c := 0
	for off := 0; ; {
		i := strings.Index(lower[off:], "bearer")
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		for c < len(covered) && covered[c][1] <= i {
			c++
		}
		if c < len(covered) && covered[c][0] <= i {
			off = covered[c][1]
			continue
		}
		if i > 0 && isWordByte(s[i-1]) {
			continue
		}
		if m := reBearer.FindStringSubmatchIndex(s[i:]); m != nil {
			edits = append(edits, edit{i + m[4], i + m[5], maskToken(s[i+m[4] : i+m[5]])})
			off = i + m[1]
		}
	}
	return mergeEdits(auth, edits)
}

// cookieValueEdits masks the cookie values of a Cookie or Set-Cookie header
// (a session is a credential): "Cookie: a=1; b=2", the header name quoted
// as in JSON or a Python dict (escaped or not) and its value quoted, and
// Go's prints of a header map ("Cookie:[…]", "\"Cookie\":[]string{\"…\"}")
// with every value of them (a space apart in %v, ", " in %#v). A Cookie
// header's every value is masked, a Set-Cookie's (set true) first only (the
// rest are its attributes: Path=/, Max-Age=3600); names stay. A value
// quoted (sid="…", RFC 6265's DQUOTE) ends at its closing quote. A value of
// one or two characters or a template reference (see placeholder) stays.
// It reads from s[j:], right after the ':' that follows the header name:
// the opening of the value and its name=value pairs, and returns the edits
// and the offset it read to.
func cookieValueEdits(s string, j int, set bool) ([]edit, int) {
	// form: 0 a header's text, '[' Go's %v, '{' Go's %#v.
	var form byte
	switch {
	case strings.HasPrefix(s[j:], "[]string{"):
		j += len("[]string{")
		form = '{'
	case j < len(s) && s[j] == '[':
		j++
		form = '['
	default:
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
	}
	// The quote the header's value opened with (hq), escaped or not: a
	// cookie value's own quotes are the other kind, or escaped.
	var hq byte
	hesc := false
	if j+1 < len(s) && s[j] == '\\' && (s[j+1] == '"' || s[j+1] == '\'') {
		hq, hesc = s[j+1], true
		j += 2
	} else if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		hq = s[j]
		j++
	}
	var edits []edit
	for {
		n := cookieNameEnd(s, j)
		if n == j || n == len(s) || s[n] != '=' {
			return edits, n
		}
		v := n + 1
		// A quoted value: '"' where the header's value is not quoted with
		// '"', \" where it is (JSON).
		var closing string
		switch {
		case v < len(s) && (s[v] == '"' || s[v] == '\'') && s[v] != hq:
			closing = s[v : v+1]
		case v+1 < len(s) && s[v] == '\\' && (s[v+1] == '"' || s[v+1] == '\'') && s[v+1] == hq && !hesc:
			closing = s[v : v+2]
		}
		v += len(closing)
		e := v
		for e < len(s) && !isCookieValueStop(s[e]) {
			e++
		}
		if e == v || (closing != "" && !strings.HasPrefix(s[e:], closing)) {
			// No value read, or a quoted one that does not end at its
			// quote: the field pass reads this pair as it reads any field
			// (a secret-named one, api_key="…", is masked there).
			return edits, n
		}
		if !placeholder(s[v:e]) {
			edits = append(edits, edit{v, e, maskToken(s[v:e])})
		}
		e += len(closing)
		if !set && e < len(s) && s[e] == ';' {
			j = e + 1
			for j < len(s) && s[j] == ' ' {
				j++
			}
			continue
		}
		// The end of one value: in Go's prints, the next value follows.
		if set {
			if form == 0 {
				// A Set-Cookie's attributes are read by the field pass,
				// as any text is (a secret-named one is masked there).
				return edits, e
			}
			// In a print, up to the next value; the field pass reads
			// the attributes alone.
			end := setCookieAttrsEnd(s, e, form)
			for _, f := range fieldEditsIn(s[e:end], false) {
				edits = append(edits, edit{e + f.start, e + f.end, f.repl})
			}
			e = end
		}
		if j = nextPrintValue(s, e, form); j < 0 {
			return edits, e
		}
	}
}

// nextPrintValue returns where the next value starts after a value that
// ends at s[e] in Go's print of a header's values: past the space in its %v
// print (form '['), past `", "` in its %#v print (form '{'); -1 when no value
// follows there (or form is neither).
func nextPrintValue(s string, e int, form byte) int {
	switch {
	case form == '[' && e+1 < len(s) && s[e] == ' ':
		return e + 1
	case form == '{' && strings.HasPrefix(s[e:], `", "`):
		return e + 4
	}
	return -1
}

// setCookieAttrsEnd returns the end of a Set-Cookie value's attributes
// (; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT) that start at s[e]: in
// Go's %#v print (form '{') the quote that closes the value's string (before
// ", " or '}'); in its
// %v print (form '[') the ']' or the space before the next value (a space
// not after ';' or ',', before a name and '='); otherwise e.
func setCookieAttrsEnd(s string, e int, form byte) int {
	switch form {
	case '{':
		for ; e < len(s) && s[e] != '\n' && s[e] != '\r'; e++ {
			switch {
			case s[e] == '\\':
				e++
			case s[e] == '"' && (strings.HasPrefix(s[e:], `", "`) || strings.HasPrefix(s[e:], `"}`)):
				return e
			}
		}
		return min(e, len(s))
	case '[':
		for ; e < len(s) && s[e] != ']' && s[e] != '\n' && s[e] != '\r'; e++ {
			if s[e] == ' ' && e > 0 && s[e-1] != ';' && s[e-1] != ',' {
				n := cookieNameEnd(s, e+1)
				if n > e+1 && n < len(s) && s[n] == '=' {
					return e
				}
			}
		}
	}
	return e
}

// cookieNameEnd returns the end of the cookie name that starts at s[j]
// (letters, digits, '_', '-', '.' and '$'): j when none starts there.
func cookieNameEnd(s string, j int) int {
	for j < len(s) && (isTagNameChar(s[j]) || s[j] == '.' || s[j] == '$') {
		j++
	}
	return j
}

// isCookieValueStop ends a cookie value: ';' and ',', whitespace, quotes, a
// backslash, closing brackets and '<' '>'.
func isCookieValueStop(c byte) bool {
	switch c {
	case ';', ',', ' ', '\t', '\n', '\r', '\f', '\v', '"', '\'', '\\', ']', '}', ')', '<', '>':
		return true
	}
	return false
}

// mergeEdits merges two ascending lists of non-overlapping edits.
func mergeEdits(a, b []edit) []edit {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]edit, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].start < b[0].start {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// asciiLower lower-cases ASCII letters only, so byte offsets are kept.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// fieldEdits masks the values of secret-named fields. At every ':' or '=' it
// reads back over spaces, an optional quote and a name of letters, digits,
// '_' and '-', and forward over spaces, an optional quote and the value:
//   - a name ending in a secretFieldSuffixes entry, either separator;
//   - a name ending in a secretAssignSuffixes entry, '=' only;
//   - a quoted name ending in a secretQuotedWords entry, ':' and a quoted
//     value (JSON, Python dicts);
//   - Cookie and Set-Cookie headers, whose cookie values are masked (see
//     cookieValueEdits).
//
// Password-named fields get maskPassword, the others maskToken.
func fieldEdits(s string) []edit { return fieldEditsIn(s, true) }

// fieldEditsIn is fieldEdits; with cookies false, Cookie and Set-Cookie
// headers are read as any field (inside a Set-Cookie's attributes, so that a
// header named in them is not read again from there on).
func fieldEditsIn(s string, cookies bool) []edit {
	var edits []edit
	next := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c != ':' && c != '=') || i < next {
			continue
		}
		j := i
		for j > 0 && isSpaceByte(s[j-1]) {
			j--
		}
		var quote byte
		if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
			quote = s[j-1]
			j--
			if j > 0 && s[j-1] == '\\' {
				j-- // an escaped quote: a name quoted inside a JSON string
			}
		}
		k := j
		for k > 0 && j-k < maxFieldName && isTagNameChar(s[k-1]) {
			k--
		}
		if k == j || (k > 0 && isTagNameChar(s[k-1])) {
			continue
		}
		var nb [maxFieldName]byte
		name := normFieldName(nb[:0], s[k:j])
		if cookies && c == ':' && (string(name) == "cookie" || string(name) == "setcookie") {
			// A Cookie or Set-Cookie header: its values are masked, and
			// the fields inside them (sid=…) are not read again. A line
			// break between the name and ':' is no header.
			if !strings.ContainsAny(s[j:i], "\n\r\f") {
				var found []edit
				found, next = cookieValueEdits(s, i+1, string(name) == "setcookie")
				edits = append(edits, found...)
			}
			continue
		}
		quoted := quote != 0 && c == ':' && k > 0 && s[k-1] == quote
		if c == '=' && ((i+1 < len(s) && s[i+1] == '=') || (i > 0 && strings.IndexByte("=!<>", s[i-1]) >= 0)) {
			continue // a comparison (==, !=, <=, >=), not an assignment
		}
		secret := hasAnySuffix(name, secretFieldSuffixes) ||
			(c == '=' && hasAnySuffix(name, secretAssignSuffixes)) ||
			(quoted && hasAnySuffix(name, secretQuotedWords))
		keyName := !secret && c == '=' && compoundKeyName(s[k:j])
		if !secret && !keyName {
			continue
		}
		v := i + 1
		for v < len(s) {
			w := spaceWidth(s, v)
			if w == 0 {
				break
			}
			v += w
		}
		// Go's print of a header's values: map[X-Api-Key:[…]] (%v) and
		// http.Header{"X-Api-Key":[]string{"…"}} (%#v), right after ':'.
		var form byte // '[' in Go's %v, '{' in its %#v
		if c == ':' && v == i+1 {
			switch {
			case quoted && strings.HasPrefix(s[v:], "[]string{"):
				v += len("[]string{")
				form = '{'
			case !quoted && v < len(s) && s[v] == '[':
				v++
				form = '['
			}
		}
		var open byte // the quote a quoted value opens with
		escaped := false
		if quoted {
			// A quoted value, or one quoted with escapes inside a JSON
			// string ({\"password\": \"…\"} quoted in an error).
			if v+1 < len(s) && s[v] == '\\' && s[v+1] == quote {
				v++
				escaped = true
			}
			if v == len(s) || (s[v] != '"' && s[v] != '\'') {
				continue
			}
			open = s[v]
			v++
		} else if v < len(s) && (s[v] == '"' || s[v] == '\'') {
			open = s[v]
			v++
		}
		e := v
		if open != 0 {
			// A quoted value runs to its closing quote, spaces and all
			// ("correct horse battery staple").
			e = quotedValueEnd(s, v, open, escaped)
		} else {
			for e < len(s) && !isValueStop(s[e]) && (s[e] < utf8.RuneSelf || spaceWidth(s, e) == 0) {
				e++
			}
		}
		// A value read and refused is not read again from a separator
		// inside it (a_key=a_key=… read the rest of the text at every
		// '='): the pass stays linear, at the cost of a field written
		// inside another's refused value (x_key=a=password=…).
		next = e
		if e == v || !strings.ContainsFunc(s[v:e], isAlnumRune) || (keyName && !tokenLike(s[v:e])) {
			continue
		}
		if !quoted && (s[v-1] != '"' && s[v-1] != '\'') && codeValue(s, v, e) {
			continue // code or a literal (password = getpass(...), token: null), not a value
		}
		if open == 0 && s[e-1] == ':' && strings.ContainsAny(s[i:v], "\n\r") {
			// A field with nothing after it on its line, then a line that
			// starts with a key (YAML's "password:" over a nested
			// "host: db"): the key is not the value. A value on the next
			// line (YAML's indented scalar) is still masked.
			continue
		}
		words := false
		if open == 0 && form == 0 && secret && fieldLine(s, k, i, v) && !tokenLike(s[v:e]) && !isMasked(s[v:e]) {
			// An unquoted value that is not one generated credential, of a
			// field that begins its line (a .env file, YAML), may be words
			// (a passphrase): as those formats read it, it runs on over the
			// words of its line up to the next field (user=app, host: db),
			// a comment or a stop, and is masked whole. A field in the
			// middle of a line (a log line, a traceback) keeps the words
			// after its value's first, and a token masked to its head and
			// tail ends at its space as the token did, so that masking
			// masked text changes nothing.
			if w := wordsEnd(s, e); w > e {
				e, next, words = w, w, true
			}
		}
		mask := maskToken
		if words || containsAny(name, []string{"pass"}) {
			mask = maskPassword
		}
		edits = append(edits, edit{v, e, mask(s[v:e])})
		// Go's print of a header with several values: the values after
		// the first, a space apart in %v, ", " in %#v.
		for {
			if v = nextPrintValue(s, e, form); v < 0 {
				break
			}
			if form == '{' {
				e = quotedValueEnd(s, v, '"', false)
			} else {
				e = v
				for e < len(s) && !isValueStop(s[e]) {
					e++
				}
			}
			if e == v {
				break
			}
			if !placeholder(s[v:e]) {
				edits = append(edits, edit{v, e, mask(s[v:e])})
			}
		}
		next = e
	}
	return edits
}

func isAlnumRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// placeholder reports a credential that is a template reference or too
// short to be one: ${TOKEN}, {token}, %s, or one or two characters (the f of
// a Python f"Bearer {token}").
func placeholder(v string) bool {
	return len(v) <= 2 || strings.IndexByte("${%<", v[0]) >= 0
}

// codeLiterals are unquoted values that are code or configuration words, not
// secrets: password = None, token: null, (using password: YES).
var codeLiterals = map[string]bool{
	"null": true, "nil": true, "none": true, "true": true, "false": true, "undefined": true,
	"yes": true, "no": true, "await": true, "new": true, "self": true, "this": true,
	"required": true, "optional": true, "string": true, "str": true,
}

// codeValue reports whether the unquoted value s[v:e] is code rather than a
// secret: a literal of codeLiterals, a template reference, or an expression
// (followed by '(' or '[', or a dotted name followed by them, as in
// os.environ["KEY"]).
func codeValue(s string, v, e int) bool {
	val := s[v:e]
	if codeLiterals[strings.ToLower(strings.TrimRight(val, ");,"))] || strings.IndexByte("${%", val[0]) >= 0 {
		return true
	}
	if i := strings.IndexAny(val, "(["); i > 0 {
		return true
	}
	return e < len(s) && (s[e] == '[' || s[e] == '(')
}

// compoundKeyName reports a field name of two or more parts whose last part
// is "key": openai_key, STRIPE-KEY, appKey (but not key, monkey or turkey).
// Such a name in an assignment is secret when its value looks like a token
// (tokenLike), so sort_key=created_at stays.
func compoundKeyName(name string) bool {
	n := len(name)
	if n < 4 {
		return false
	}
	last := name[n-3:]
	switch {
	case last == "key" || last == "KEY":
		c := name[n-4]
		return c == '_' || c == '-' || (last == "KEY" && 'a' <= c && c <= 'z')
	case last == "Key":
		c := name[n-4]
		return c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')
	}
	return false
}

// tokenLike reports whether a value looks like a generated credential
// rather than a word: 12 or more characters mixing at least two of lower
// case, upper case and digits.
func tokenLike(v string) bool {
	if len(v) < 12 {
		return false
	}
	var lower, upper, digit int
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z':
			lower = 1
		case 'A' <= c && c <= 'Z':
			upper = 1
		case '0' <= c && c <= '9':
			digit = 1
		}
	}
	return lower+upper+digit >= 2
}

// spaceWidth returns the byte length of the space character at s[i:], or 0:
// ASCII whitespace with VT, every Unicode space (unicode.IsSpace: NBSP, NEL,
// EN/EM space, line and paragraph separators, …), zero-width space and the
// BOM.
func spaceWidth(s string, i int) int {
	c := s[i]
	if c < utf8.RuneSelf {
		if c == ' ' || ('\t' <= c && c <= '\r') {
			return 1
		}
		return 0
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if unicode.IsSpace(r) || r == '\u200b' || r == '\ufeff' {
		return n
	}
	return 0
}

// normFieldName lower-cases name and drops '-' and '_'.
func normFieldName(dst []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-' || c == '_':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func hasAnySuffix(name []byte, list []string) bool {
	for _, w := range list {
		if len(name) >= len(w) && string(name[len(name)-len(w):]) == w {
			return true
		}
	}
	return false
}

func containsAny(name []byte, list []string) bool {
	for _, w := range list {
		if strings.Contains(string(name), w) {
			return true
		}
	}
	return false
}

// fieldLine reports whether the field whose name starts at s[k], with its
// separator at s[i] and its value at s[v], is a line of a configuration
// file: the name begins its line (after spaces, tabs or "export ") and the
// value is on the same line.
func fieldLine(s string, k, i, v int) bool {
	if strings.ContainsAny(s[i:v], "\n\r") {
		return false
	}
	b := k
	for b > 0 && (s[b-1] == ' ' || s[b-1] == '\t') {
		b--
	}
	if strings.HasSuffix(s[:b], "export") && b < k {
		b -= len("export")
		for b > 0 && (s[b-1] == ' ' || s[b-1] == '\t') {
			b--
		}
	}
	return b == 0 || s[b-1] == '\n' || s[b-1] == '\r'
}

// wordsEnd returns the end of the unquoted secret value whose first word
// ends at e: the words after it on the same line, separated by spaces or
// tabs, up to a word that names another field (it holds '=' or ':', or one
// follows it), a comment (a word starting with '#') or a value stop:
// "correct horse battery staple" lost only its first word before, and
// "password=abc user=app" keeps its user, "password: abc # prod" its comment.
func wordsEnd(s string, e int) int {
	for e < len(s) && (s[e] == ' ' || s[e] == '\t') {
		w := e
		for w < len(s) && (s[w] == ' ' || s[w] == '\t') {
			w++
		}
		if w < len(s) && s[w] == '#' {
			return e // a comment (YAML, .env, shell): not a word of the value
		}
		we := w
		for we < len(s) && !isValueStop(s[we]) && s[we] != '=' && s[we] != ':' && (s[we] < utf8.RuneSelf || spaceWidth(s, we) == 0) {
			we++
		}
		if we == w {
			return e
		}
		after := we
		for after < len(s) && (s[after] == ' ' || s[after] == '\t') {
			after++
		}
		if after < len(s) && (s[after] == '=' || s[after] == ':') {
			return e // the word names the next field
		}
		e = we
	}
	return e
}

// isValueStop ends an unquoted secret value.
func isValueStop(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v', '<', '>', '"', '\'', '[', ']', ',', ';', '&':
		return true
	}
	return false
}

// quotedValueEnd returns the end of a secret value that opened with the
// quote q just before s[v]: its closing quote, not one escaped with a
// backslash, or the end of the line when it has none. A value whose opening
// quote was escaped (\", inside a JSON string) ends at the next backslash.
func quotedValueEnd(s string, v int, q byte, escaped bool) int {
	for e := v; e < len(s); e++ {
		switch c := s[e]; {
		case c == '\n' || c == '\r' || c == q:
			return e
		case c == '\\' && escaped:
			return e
		case c == '\\' && e+1 < len(s) && s[e+1] != '\n' && s[e+1] != '\r':
			e++ // an escaped character is part of the value
		}
	}
	return len(s)
}

// tokenPrefixesByFirst indexes knownTokenPrefixes by their first byte.
var tokenPrefixesByFirst = func() (t [256][]string) {
	for _, p := range knownTokenPrefixes {
		t[p[0]] = append(t[p[0]], p)
	}
	return t
}()

// knownTokenEdits masks tokens with a known issuer prefix that start a word.
func knownTokenEdits(s string) []edit {
	var edits []edit
	for i := 0; i < len(s); i++ {
		prefixes := tokenPrefixesByFirst[s[i]]
		if prefixes == nil || (i > 0 && isWordByte(s[i-1])) {
			continue
		}
		found := false
		for _, p := range prefixes {
			if strings.HasPrefix(s[i:], p) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		m := reKnownToken.FindStringIndex(s[i:])
		if m == nil {
			continue
		}
		edits = append(edits, edit{i, i + m[1], maskToken(s[i : i+m[1]])})
		i += m[1] - 1
	}
	return edits
}

// discordEdits masks the token of Discord webhook URLs
// (https://discord.com/api/webhooks/<id>/<token>, also discordapp.com and
// the ptb and canary hosts).
func discordEdits(s string) []edit {
	var edits []edit
	for off := 0; ; {
		// "/webhooks/" in any case: find "ebhooks/" or "EBHOOKS/" without
		// lower-casing the whole text.
		i := strings.Index(s[off:], "ebhooks/")
		if j := strings.Index(s[off:], "EBHOOKS/"); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 {
			return edits
		}
		i += off - 2 // the '/' before "webhooks/"
		off = i + 10
		if i < 0 || s[i] != '/' || (s[i+1] != 'w' && s[i+1] != 'W') {
			continue
		}
		// Back to the scheme: at most "https://canary.discordapp.com/api/v10".
		from := i - 48
		if from < 0 {
			from = 0
		}
		j := strings.LastIndex(asciiLower(s[from:i]), "http")
		if j < 0 {
			continue
		}
		j += from
		m := reDiscordHook.FindStringSubmatchIndex(s[j:])
		if m == nil || j+m[2] < i || strings.HasPrefix(s[j+m[3]:], "...") {
			continue // not a webhook URL, or its token is masked already
		}
		edits = append(edits, edit{j + m[2], j + m[3], maskToken(s[j+m[2] : j+m[3]])})
		off = j + m[1]
	}
}

// telegramEdits masks Telegram bot tokens: 6 to 12 digits, ':', and 30 or
// more of [A-Za-z0-9_-], starting a word or right after "bot" (as in the
// Bot API's /bot<token>/ paths). The whole token is masked; "bot" stays.
func telegramEdits(s string) []edit {
	var edits []edit
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		d := i
		for d > 0 && i-d <= 12 && '0' <= s[d-1] && s[d-1] <= '9' {
			d--
		}
		if n := i - d; n < 6 || n > 12 {
			continue
		}
		start := d
		if d >= 3 && strings.EqualFold(s[d-3:d], "bot") {
			start = d - 3
		}
		if start > 0 && isWordByte(s[start-1]) {
			continue
		}
		e := i + 1
		for e < len(s) && (isWordByte(s[e]) || s[e] == '-') {
			e++
		}
		if e-(i+1) < 30 {
			continue
		}
		edits = append(edits, edit{d, e, maskToken(s[d:e])})
		i = e - 1
	}
	return edits
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
