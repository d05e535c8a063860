package hashing

import (
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{0.1, "0.1"},
		{-0.5, "-0.5"},
		{123.456, "123.456"},
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{123e18, "123000000000000000000"},
		{1.5e21, "1.5e+21"},
		{1e-6, "0.000001"},
		{1.5e-6, "0.0000015"},
		{1e-7, "1e-7"},
		{-1.25e-7, "-1.25e-7"},
		{1 << 53, "9007199254740992"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.SmallestNonzeroFloat64, "5e-324"},
		{-math.MaxFloat64, "-1.7976931348623157e+308"},
		{333333333.3333333, "333333333.3333333"},
		{1e100, "1e+100"},
		{2.2250738585072014e-308, "2.2250738585072014e-308"},
		{0.000001234, "0.000001234"},
		{12345678.9, "12345678.9"},
	}
	for _, tt := range tests {
		got, err := FormatNumber(tt.f)
		if err != nil || got != tt.want {
			t.Errorf("FormatNumber(%v) = %q, %v; want %q", tt.f, got, err, tt.want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got, err := FormatNumber(f); !errors.Is(err, ErrNonFinite) || got != "" {
			t.Errorf("FormatNumber(%v) = %q, %v; want ErrNonFinite", f, got, err)
		}
	}
}

var (
	plainNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)
	expNumber   = regexp.MustCompile(`^-?[1-9](\.[0-9]*[1-9])?e[+-][1-9][0-9]*$`)
)

// TestFormatNumberProperties checks random doubles: the text parses back to
// the same double, has the shortest digits, and uses exponent notation
// exactly outside [1e-6, 1e21).
func TestFormatNumberProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	for i := range 200000 {
		var f float64
		if i%2 == 0 {
			f = math.Float64frombits(rng.Uint64())
		} else {
			// Concentrate on the interesting range around the switchovers.
			f = (rng.Float64() + 0.5) * math.Pow(10, float64(rng.IntN(60)-30))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s, err := FormatNumber(f)
		if err != nil {
			t.Fatalf("FormatNumber(%v): %v", f, err)
		}
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f {
			t.Fatalf("FormatNumber(%v) = %q does not round-trip (%v, %v)", f, s, back, err)
		}
		a := math.Abs(f)
		useExp := a != 0 && (a < 1e-6 || a >= 1e21)
		if useExp && !expNumber.MatchString(s) || !useExp && !plainNumber.MatchString(s) {
			t.Fatalf("FormatNumber(%v) = %q: wrong notation (exponent expected: %v)", f, s, useExp)
		}
		// Significant digits are the shortest round-trip ones.
		sci := strconv.FormatFloat(a, 'e', -1, 64)
		wantDigits := strings.Replace(sci[:strings.IndexByte(sci, 'e')], ".", "", 1)
		if got := significantDigits(s); got != wantDigits {
			t.Fatalf("FormatNumber(%v) = %q: digits %q, want %q", f, s, got, wantDigits)
		}
	}
}

// significantDigits returns the digits of a formatted number without sign,
// point, exponent and leading or trailing zeros.
func significantDigits(s string) string {
	s = strings.TrimPrefix(s, "-")
	if i := strings.IndexByte(s, 'e'); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.TrimLeft(s, "0")
	s = strings.TrimRight(s, "0")
	if s == "" {
		return "0"
	}
	return s
}
