package fetch

import (
	"errors"
	"fmt"
	"net/netip"
)

// Policy says which classes of address a fetch may connect to. The zero
// Policy is the production default: only global unicast addresses.
// Link-local, metadata, unspecified, multicast, "this network", and
// reserved or documentation addresses are refused whatever the policy.
type Policy struct {
	// AllowLoopback admits 127.0.0.0/8 and ::1: for tests and local
	// development only (serve --allow-private-fetch).
	AllowLoopback bool
	// AllowPrivate admits the private ranges 10/8, 172.16/12, 192.168/16,
	// the shared range 100.64/10 and unique local fc00::/7: for local
	// development only (serve --allow-private-fetch).
	AllowPrivate bool
}

// Class is the kind of an IP address as the policy sees it.
type Class string

// Address classes, from the most to the least ordinary.
const (
	ClassGlobal      Class = "global"       // global unicast: allowed
	ClassLoopback    Class = "loopback"     // 127/8, ::1: Policy.AllowLoopback
	ClassPrivate     Class = "private"      // 10/8, 172.16/12, 192.168/16, fc00::/7: Policy.AllowPrivate
	ClassShared      Class = "shared"       // 100.64/10 (carrier-grade NAT): Policy.AllowPrivate
	ClassLinkLocal   Class = "link-local"   // 169.254/16, fe80::/10: never
	ClassMetadata    Class = "metadata"     // 169.254.169.254, fd00:ec2::254: never
	ClassUnspecified Class = "unspecified"  // 0.0.0.0, ::: never
	ClassThisNetwork Class = "this-network" // 0/8: never
	ClassMulticast   Class = "multicast"    // 224/4, ff00::/8: never
	ClassReserved    Class = "reserved"     // documentation, benchmarking, 240/4, broadcast, IETF blocks, Teredo…: never
	ClassInvalid     Class = "invalid"      // the zero netip.Addr: never
)

// ErrBlocked marks every refusal by the address policy (errors.Is).
var ErrBlocked = errors.New("address refused by the fetch policy")

// BlockedError is a refusal by the address policy: which address, of which
// class, in which range. It wraps ErrBlocked.
type BlockedError struct {
	// Host is the host name the address was resolved from; empty when the
	// URL named the address itself.
	Host string
	// Addr is the refused address.
	Addr netip.Addr
	// Class and Range say why.
	Class Class
	Range netip.Prefix
	// Embedded is the IPv4 address a NAT64 or 6to4 address carries, when
	// the refusal is about it.
	Embedded netip.Addr
}

func (e *BlockedError) Error() string {
	what := e.Addr.String()
	if e.Host != "" {
		what = fmt.Sprintf("%s (address of %s)", what, e.Host)
	}
	why := "is " + string(e.Class)
	if e.Range.IsValid() {
		why = fmt.Sprintf("is in the %s range %s", e.Class, e.Range)
	}
	if e.Embedded.IsValid() {
		why = fmt.Sprintf("embeds %s, which %s", e.Embedded, why)
	}
	return fmt.Sprintf("%s %s: %v", what, why, ErrBlocked)
}

// Unwrap returns ErrBlocked.
func (e *BlockedError) Unwrap() error { return ErrBlocked }

type rangeClass struct {
	prefix netip.Prefix
	class  Class
}

func rc(p string, c Class) rangeClass { return rangeClass{netip.MustParsePrefix(p), c} }

// ranges4 and ranges6 classify special-purpose addresses (IANA IPv4 and
// IPv6 special-purpose registries, RFC 6890 and its updates). The first
// match wins, so single addresses come before the ranges that hold them.
// Anything else is global.
var ranges4 = []rangeClass{
	rc("169.254.169.254/32", ClassMetadata), // AWS, GCP, Azure, OpenStack…
	rc("0.0.0.0/32", ClassUnspecified),
	rc("0.0.0.0/8", ClassThisNetwork),
	rc("10.0.0.0/8", ClassPrivate),
	rc("100.64.0.0/10", ClassShared), // includes Alibaba's metadata 100.100.100.200
	rc("127.0.0.0/8", ClassLoopback),
	rc("169.254.0.0/16", ClassLinkLocal),
	rc("172.16.0.0/12", ClassPrivate),
	rc("192.0.0.0/24", ClassReserved), // IETF protocol assignments (and Oracle's metadata 192.0.0.192)
	rc("192.0.2.0/24", ClassReserved), // TEST-NET-1
	rc("192.88.99.0/24", ClassReserved),
	rc("192.168.0.0/16", ClassPrivate),
	rc("198.18.0.0/15", ClassReserved), // benchmarking
	rc("198.51.100.0/24", ClassReserved),
	rc("203.0.113.0/24", ClassReserved),
	rc("224.0.0.0/4", ClassMulticast),
	rc("240.0.0.0/4", ClassReserved), // includes the broadcast 255.255.255.255
}

var ranges6 = []rangeClass{
	rc("::/128", ClassUnspecified),
	rc("::1/128", ClassLoopback),
	rc("fd00:ec2::254/128", ClassMetadata), // AWS IMDS over IPv6
	rc("::ffff:0:0:0/96", ClassReserved),   // IPv4-translated (SIIT)
	rc("::/96", ClassReserved),             // IPv4-compatible (deprecated)
	rc("64:ff9b:1::/48", ClassReserved),    // local-use NAT64
	rc("100::/64", ClassReserved),          // discard-only
	rc("2001::/23", ClassReserved),         // IETF protocol assignments, Teredo
	rc("2001:db8::/32", ClassReserved),     // documentation
	rc("3fff::/20", ClassReserved),         // documentation
	rc("5f00::/16", ClassReserved),         // segment routing SIDs
	rc("fc00::/7", ClassPrivate),           // unique local
	rc("fe80::/10", ClassLinkLocal),
	rc("fec0::/10", ClassReserved), // site-local (deprecated)
	rc("ff00::/8", ClassMulticast),
}

// Prefixes that carry an IPv4 address, judged by that address.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // the IPv4 address is the last 32 bits
	sixToFour = netip.MustParsePrefix("2002::/16")    // the IPv4 address is bits 16–47
)

// ClassOf returns the class of ip and the range that gave it (the zero
// Prefix for a global address). An IPv4-mapped IPv6 address is judged as
// its IPv4 address; a zone is ignored. For a NAT64 or 6to4 address the
// class is the one of the IPv4 address it carries, and embedded is that
// address.
func ClassOf(ip netip.Addr) (class Class, r netip.Prefix, embedded netip.Addr) {
	if !ip.IsValid() {
		return ClassInvalid, netip.Prefix{}, netip.Addr{}
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() {
		c, p := lookup(ranges4, ip)
		return c, p, netip.Addr{}
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		c, p := lookup(ranges4, v4)
		return c, p, v4
	case sixToFour.Contains(ip):
		v4 := netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		c, p := lookup(ranges4, v4)
		return c, p, v4
	}
	c, p := lookup(ranges6, ip)
	return c, p, netip.Addr{}
}

func lookup(table []rangeClass, ip netip.Addr) (Class, netip.Prefix) {
	for _, r := range table {
		if r.prefix.Contains(ip) {
			return r.class, r.prefix
		}
	}
	return ClassGlobal, netip.Prefix{}
}

// Allowed reports whether the policy lets a fetch connect to ip: nil, or a
// *BlockedError (errors.Is(err, ErrBlocked)) naming the class and range
// that refuse it. It is a pure function, safe for concurrent use.
func Allowed(ip netip.Addr, p Policy) error {
	class, r, embedded := ClassOf(ip)
	switch class {
	case ClassGlobal:
		return nil
	case ClassLoopback:
		if p.AllowLoopback {
			return nil
		}
	case ClassPrivate, ClassShared:
		if p.AllowPrivate {
			return nil
		}
	}
	return &BlockedError{Addr: ip, Class: class, Range: r, Embedded: embedded}
}
