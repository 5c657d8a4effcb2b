package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// AddressPolicy decides which addresses webhooks may be sent to. Customers
// choose webhook URLs, so without it any firm could make the gateway call
// into its own network or a cloud metadata service.
//
// The policy is checked twice: at registration, on every address the host
// resolves to, for an early clear error; and at connect time, on the one
// address actually dialled, which is the check that counts (DNS can change
// between the two, on purpose or not).
type AddressPolicy struct {
	allow    []netip.Prefix
	blocked  []blockedRange
	metadata []netip.Addr
	resolver *net.Resolver
}

type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// NewAddressPolicy blocks every non-public address except those inside
// allow (PRACTICEGW_WEBHOOK_ALLOW_CIDRS, parsed by the caller).
func NewAddressPolicy(allow []netip.Prefix) *AddressPolicy {
	p := &AddressPolicy{allow: allow, resolver: net.DefaultResolver}
	for _, r := range []struct{ cidr, reason string }{
		{"0.0.0.0/8", "the \"this network\" range"},
		{"10.0.0.0/8", "a private network"},
		{"100.64.0.0/10", "carrier-grade NAT"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "a private network"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"192.168.0.0/16", "a private network"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"}, // includes 255.255.255.255, broadcast
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible (deprecated)"},
		{"100::/64", "discard-only"},
		// Teredo tunnels to an IPv4 host behind NAT through an IPv4 relay:
		// no webhook receiver lives there, and what it reaches cannot be
		// judged from the address alone.
		{"2001::/32", "Teredo tunnelling to an IPv4 host"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"2001:db8::/32", "documentation"},
		{"fc00::/7", "a private network"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	} {
		p.blocked = append(p.blocked, blockedRange{netip.MustParsePrefix(r.cidr), r.reason})
	}
	for _, a := range []string{"169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200"} {
		p.metadata = append(p.metadata, netip.MustParseAddr(a))
	}
	return p
}

// BlockedAddressError says which address was refused and why.
type BlockedAddressError struct {
	Addr   netip.Addr
	Reason string
	// Range is the blocked range the address is in, which
	// PRACTICEGW_WEBHOOK_ALLOW_CIDRS could allow; invalid for an address
	// no allow-list opens (a cloud metadata service).
	Range netip.Prefix
	// Host is the name that resolved to Addr, if one did.
	Host string
}

func (e *BlockedAddressError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("webhooks may not be sent to %s, which resolves to %s (%s)", e.Host, e.Addr.Unmap(), e.Reason)
	}
	return fmt.Sprintf("webhooks may not be sent to %s (%s)", e.Addr, e.Reason)
}

// Check refuses an address that is not public, unless the allow-list
// covers it. Cloud metadata addresses are refused even then: allowing a
// link-local test range must not hand out the host's cloud credentials.
func (p *AddressPolicy) Check(ip netip.Addr) error {
	ip = ip.WithZone("")
	orig := ip
	ip = ip.Unmap()
	for _, m := range p.metadata {
		if ip == m {
			return &BlockedAddressError{Addr: orig, Reason: "a cloud metadata service"}
		}
	}
	for _, a := range p.allow {
		if a.Contains(ip) || a.Contains(orig) {
			return nil
		}
	}
	// Addresses that carry an IPv4 address inside an IPv6 one reach that
	// IPv4 host through a translator: judge them by what they carry.
	if inner, ok := embeddedIPv4(ip); ok {
		var blocked *BlockedAddressError
		if errors.As(p.Check(inner), &blocked) {
			return &BlockedAddressError{Addr: orig, Reason: blocked.Reason + ", through an IPv6 translation prefix"}
		}
	}
	for _, r := range p.blocked {
		if r.prefix.Contains(ip) {
			return &BlockedAddressError{Addr: orig, Reason: r.reason, Range: r.prefix}
		}
	}
	if !ip.IsGlobalUnicast() {
		return &BlockedAddressError{Addr: orig, Reason: "not a public unicast address"}
	}
	return nil
}

// embeddedIPv4 extracts the IPv4 address that an IPv6 address carries and
// reaches through a translator or tunnel: NAT64 (64:ff9b::/96), 6to4
// (2002::/16), SIIT's IPv4-translated form (::ffff:0:a.b.c.d, that is
// ::ffff:0:0:0/96; the IPv4-mapped ::ffff:a.b.c.d is unmapped before) and
// ISATAP interface identifiers (::0:5efe:a.b.c.d and ::200:5efe:a.b.c.d
// under any prefix).
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	last4 := netip.AddrFrom4([4]byte(b[12:16]))
	switch {
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && [8]byte(b[4:12]) == [8]byte{}:
		return last4, true
	case b[0] == 0x20 && b[1] == 0x02:
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case [8]byte(b[0:8]) == [8]byte{} && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0:
		return last4, true
	case (b[8]|0x02) == 0x02 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe:
		return last4, true
	}
	return netip.Addr{}, false
}

// CheckHost resolves host and refuses it if any address it resolves to is
// refused: an attacker controlling DNS would otherwise pick which of its
// answers we dial.
func (p *AddressPolicy) CheckHost(ctx context.Context, host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.Check(ip)
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if strings.HasSuffix(host, ".localhost") {
		// RFC 6761: names under localhost are loopback whatever a resolver
		// says (localhost itself is left to the resolver, which knows it).
		return p.Check(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	if looksNumeric(host) {
		// 0x7f.1, 2130706433 and 017700000001 are 127.0.0.1 to inet_aton
		// (and so to some resolvers) but are not host names: a real name's
		// last label is never numeric.
		return fmt.Errorf("%q is not a valid host name; write an IP address in dotted decimal", host)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return fmt.Errorf("the host %s does not resolve", host)
		}
		return fmt.Errorf("could not resolve the host %s; try again: %w", host, err)
	}
	for _, ip := range ips {
		if err := p.Check(ip); err != nil {
			var blocked *BlockedAddressError
			if errors.As(err, &blocked) {
				named := *blocked
				named.Host = host
				return &named
			}
			return err
		}
	}
	return nil
}

func looksNumeric(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		return true
	}
	for _, r := range last {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Control is a net.Dialer Control function: it runs after resolution, on
// the address about to be connected, so DNS rebinding cannot get past it.
func (p *AddressPolicy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q: %w", address, err)
	}
	return p.Check(ap.Addr())
}
