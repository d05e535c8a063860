package hashing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Digest is a SHA-256 digest: a content hash, a leaf, a context hash or a
// commit id. The zero value is the all-zero digest, which [Digest.IsZero]
// reports and which no real input produces in practice. Digest is comparable
// with ==.
type Digest [32]byte

// digestPrefix is the algorithm tag every written digest starts with.
const digestPrefix = "sha256:"

// minPrefixLen is the fewest hex digits [HexPrefix] accepts.
const minPrefixLen = 8

// ErrInvalidDigest is returned (wrapped) by [ParseDigest], [HexPrefix] and
// [Digest.UnmarshalText] for text that is not a well-formed hash.
var ErrInvalidDigest = errors.New("invalid hash")

// Sum returns the SHA-256 digest of b.
func Sum(b []byte) Digest { return sha256.Sum256(b) }

// ParseDigest parses the written form of a digest: "sha256:" followed by
// exactly 64 lowercase hex digits. Anything else (upper case, bare hex,
// prefixes, surrounding space) is an error wrapping [ErrInvalidDigest]; use
// [HexPrefix] for hashes typed by a person.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != len(digestPrefix)+64 || s[:len(digestPrefix)] != digestPrefix {
		return d, fmt.Errorf("%w %s: want %q followed by 64 lowercase hex digits", ErrInvalidDigest, quoteShort(s), digestPrefix)
	}
	h := s[len(digestPrefix):]
	for i := 0; i < len(h); i++ {
		if !isLowerHex(h[i]) {
			return d, fmt.Errorf("%w %s: character %d is not a lowercase hex digit", ErrInvalidDigest, quoteShort(s), len(digestPrefix)+i)
		}
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		// Unreachable: every byte was checked above.
		return Digest{}, fmt.Errorf("%w %s: %v", ErrInvalidDigest, quoteShort(s), err)
	}
	return d, nil
}

// String returns the written form "sha256:" + 64 lowercase hex digits.
func (d Digest) String() string {
	var b [len(digestPrefix) + 64]byte
	copy(b[:], digestPrefix)
	hex.Encode(b[len(digestPrefix):], d[:])
	return string(b[:])
}

// Hex returns the 64 lowercase hex digits of d, without the "sha256:" tag.
func (d Digest) Hex() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits of d, for logs and UIs. It is not
// unique and must never be used as a key.
func (d Digest) Short() string { return hex.EncodeToString(d[:6]) }

// IsZero reports whether d is the all-zero digest (the zero value).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText implements encoding.TextMarshaler with the form of
// [Digest.String], so a Digest is a JSON string. It never fails.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly what
// [ParseDigest] accepts. On error d is left unchanged.
func (d *Digest) UnmarshalText(text []byte) error {
	v, err := ParseDigest(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// HexPrefix validates a hash typed by a person and returns its hex digits in
// lower case. It accepts "sha256:<hex>" or bare "<hex>", where <hex> is 8 to
// 64 hex digits of either case (a prefix of a full hash). The "sha256:" tag
// itself must be lower case. Errors wrap [ErrInvalidDigest].
//
// The result is a prefix only: the caller decides whether it must match one
// commit exactly or be the start of a replayed context hash (HASHING.md §6).
func HexPrefix(s string) (string, error) {
	h := s
	if len(h) >= len(digestPrefix) && h[:len(digestPrefix)] == digestPrefix {
		h = h[len(digestPrefix):]
	}
	if len(h) < minPrefixLen {
		return "", fmt.Errorf("%w %s: need at least %d hex digits", ErrInvalidDigest, quoteShort(s), minPrefixLen)
	}
	if len(h) > 64 {
		return "", fmt.Errorf("%w %s: more than 64 hex digits", ErrInvalidDigest, quoteShort(s))
	}
	out := make([]byte, len(h))
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case isLowerHex(c):
		case 'A' <= c && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", fmt.Errorf("%w %s: %q is not a hex digit", ErrInvalidDigest, quoteShort(s), rune(c))
		}
		out[i] = c
	}
	return string(out), nil
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// quoteShort quotes s for an error message, cutting very long input so an
// error never echoes a whole request body.
func quoteShort(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
