package gate

import (
	"strconv"
	"unicode/utf8"
)

// truncateRunes cuts s to at most n characters (runes).
func truncateRunes(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i]
}

// runeOffset returns the byte offset of the n-th rune of s (len(s) if s has
// fewer runes).
func runeOffset(s string, n int) int {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// quoteShort quotes s for a detail message, cut to 80 characters.
func quoteShort(s string) string {
	const max = 80
	if utf8.RuneCountInString(s) > max {
		return strconv.Quote(truncateRunes(s, max) + "…")
	}
	return strconv.Quote(s)
}
