package hashing

import (
	"fmt"
	"math"
	"strconv"
)

// FormatNumber renders f exactly as ECMAScript's Number.prototype.toString
// does, which is the number form of RFC 8785: the shortest digits that
// round-trip, plain notation for 1e-6 <= |f| < 1e21 and exponent notation
// ("1e+21", "1.5e-7") outside it. Negative zero is "0". NaN and ±Inf have
// no JSON form: the error wraps [ErrNonFinite].
func FormatNumber(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("%w: %v has no JSON form", ErrNonFinite, f)
	}
	var buf [32]byte
	return string(appendNumber(buf[:0], f)), nil
}

// appendNumber appends the ECMAScript form of the finite number f to dst.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 { // +0 and -0
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits in scientific form: "d.ddddde±XX" or "de±XX".
	var sci [32]byte
	s := strconv.AppendFloat(sci[:0], f, 'e', -1, 64)

	// Split into the digit string d1..dk and the exponent n of ECMAScript's
	// algorithm, where the value is 0.d1..dk × 10^n (so n = e + 1).
	var digits [24]byte
	k := 0
	i := 0
	for ; s[i] != 'e'; i++ {
		if s[i] != '.' {
			digits[k] = s[i]
			k++
		}
	}
	i++ // skip 'e'
	neg := s[i] == '-'
	i++ // skip sign, always present
	e := 0
	for ; i < len(s); i++ {
		e = e*10 + int(s[i]-'0')
	}
	if neg {
		e = -e
	}
	n := e + 1
	d := digits[:k]

	switch {
	case k <= n && n <= 21:
		// Integer: the digits then n-k zeros.
		dst = append(dst, d...)
		for j := 0; j < n-k; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		// Point inside the digits.
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		// Small: "0." then -n zeros then the digits.
		dst = append(dst, '0', '.')
		for j := 0; j < -n; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		// Exponent form: d1[.d2..dk]e±(n-1).
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		}
	}
	return dst
}
