package fetch

import (
	"errors"
	"net/netip"
	"testing"
)

// TestAllowed is the address policy as a table: each address with its
// class and whether the default, loopback and private policies admit it.
func TestAllowed(t *testing.T) {
	loop := Policy{AllowLoopback: true}
	priv := Policy{AllowPrivate: true}
	dev := Policy{AllowLoopback: true, AllowPrivate: true}
	cases := []struct {
		addr  string
		class Class
		// allowed under: default, loopback, private, loopback+private
		def, lo, pr, dev bool
	}{
		{"8.8.8.8", ClassGlobal, true, true, true, true},
		{"93.184.215.14", ClassGlobal, true, true, true, true},
		{"2606:4700::6810:84e5", ClassGlobal, true, true, true, true},
		{"127.0.0.1", ClassLoopback, false, true, false, true},
		{"127.255.255.254", ClassLoopback, false, true, false, true},
		{"::1", ClassLoopback, false, true, false, true},
		{"::ffff:127.0.0.1", ClassLoopback, false, true, false, true},
		{"10.0.0.1", ClassPrivate, false, false, true, true},
		{"10.255.255.255", ClassPrivate, false, false, true, true},
		{"172.16.0.1", ClassPrivate, false, false, true, true},
		{"172.31.255.254", ClassPrivate, false, false, true, true},
		{"172.32.0.1", ClassGlobal, true, true, true, true},
		{"192.168.1.1", ClassPrivate, false, false, true, true},
		{"::ffff:192.168.1.1", ClassPrivate, false, false, true, true},
		{"100.64.0.1", ClassShared, false, false, true, true},
		{"100.100.100.200", ClassShared, false, false, true, true},
		{"100.128.0.1", ClassGlobal, true, true, true, true},
		{"fc00::1", ClassPrivate, false, false, true, true},
		{"fd12:3456::1", ClassPrivate, false, false, true, true},
		{"169.254.0.1", ClassLinkLocal, false, false, false, false},
		{"169.254.169.254", ClassMetadata, false, false, false, false},
		{"::ffff:169.254.169.254", ClassMetadata, false, false, false, false},
		{"fd00:ec2::254", ClassMetadata, false, false, false, false},
		{"fe80::1", ClassLinkLocal, false, false, false, false},
		{"fe80::1%eth0", ClassLinkLocal, false, false, false, false},
		{"0.0.0.0", ClassUnspecified, false, false, false, false},
		{"::", ClassUnspecified, false, false, false, false},
		{"0.1.2.3", ClassThisNetwork, false, false, false, false},
		{"224.0.0.1", ClassMulticast, false, false, false, false},
		{"239.255.255.250", ClassMulticast, false, false, false, false},
		{"ff02::1", ClassMulticast, false, false, false, false},
		{"255.255.255.255", ClassReserved, false, false, false, false},
		{"240.0.0.1", ClassReserved, false, false, false, false},
		{"192.0.2.1", ClassReserved, false, false, false, false},
		{"198.18.0.1", ClassReserved, false, false, false, false},
		{"192.0.0.192", ClassReserved, false, false, false, false},
		{"2001:db8::1", ClassReserved, false, false, false, false},
		{"2001::1", ClassReserved, false, false, false, false},
		{"::a00:1", ClassReserved, false, false, false, false},
		// NAT64 and 6to4 are judged by the IPv4 address they carry.
		{"64:ff9b::a00:1", ClassPrivate, false, false, true, true},
		{"64:ff9b::7f00:1", ClassLoopback, false, true, false, true},
		{"64:ff9b::a9fe:a9fe", ClassMetadata, false, false, false, false},
		{"64:ff9b::808:808", ClassGlobal, true, true, true, true},
		{"2002:a00:1::1", ClassPrivate, false, false, true, true},
		{"2002:808:808::1", ClassGlobal, true, true, true, true},
	}
	for _, c := range cases {
		ip := netip.MustParseAddr(c.addr)
		if got, _, _ := ClassOf(ip); got != c.class {
			t.Errorf("ClassOf(%s) = %s, want %s", c.addr, got, c.class)
		}
		for _, p := range []struct {
			name   string
			policy Policy
			want   bool
		}{{"default", Policy{}, c.def}, {"loopback", loop, c.lo}, {"private", priv, c.pr}, {"dev", dev, c.dev}} {
			err := Allowed(ip, p.policy)
			if (err == nil) != p.want {
				t.Errorf("Allowed(%s, %s) = %v, want allowed=%v", c.addr, p.name, err, p.want)
			}
			if err != nil {
				var be *BlockedError
				if !errors.Is(err, ErrBlocked) || !errors.As(err, &be) || be.Class != c.class || be.Addr != ip {
					t.Errorf("Allowed(%s, %s): error %#v", c.addr, p.name, err)
				}
			}
		}
	}
	if err := Allowed(netip.Addr{}, Policy{AllowLoopback: true, AllowPrivate: true}); err == nil {
		t.Error("the zero address is allowed")
	}
}

func TestBlockedErrorText(t *testing.T) {
	err := Allowed(netip.MustParseAddr("64:ff9b::a00:1"), Policy{})
	be := err.(*BlockedError)
	be.Host = "intranet.example"
	want := "64:ff9b::a00:1 (address of intranet.example) embeds 10.0.0.1, which is in the private range 10.0.0.0/8: address refused by the fetch policy"
	if be.Error() != want {
		t.Fatalf("got  %q\nwant %q", be.Error(), want)
	}
}
