package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Policy says which receiver URLs are allowed. By default only https:// URLs
// whose host resolves to globally reachable addresses: a webhook must not
// become a way to make the daemon call services on its own host or network
// (SSRF).
type Policy struct {
	AllowHTTP            bool
	AllowPrivateNetworks bool

	// lookup resolves a host name at registration; nil is the system's
	// resolver. Tests set it so that they need no DNS.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ErrRefused marks a URL or address the policy refuses.
var ErrRefused = errors.New("refused by the webhook policy")

const maxURLLen = 2048

// The settings that lift the policy, as the refusals name them.
const (
	hintHTTP    = "[webhooks] allow_http permits http:// for local development, as `blueline serve --dev` does"
	hintPrivate = "[webhooks] allow_private_networks permits it for local development, as `blueline serve --dev` does"
)

// CheckURL validates a receiver URL at registration and resolves its host,
// refusing it when any address is not public (unless allowed). DNS can change
// afterwards, so every delivery checks the address it connects to again.
//
// Its refusals may be shown to whoever registers the URL: they name an
// address only when the URL spells it out, never what a name resolved to, so
// that registering webhooks cannot map the daemon's network.
func (p Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || len(raw) > maxURLLen:
		return nil, fmt.Errorf("%w: not a valid URL of at most %d characters", ErrRefused, maxURLLen)
	case u.Scheme != "https" && !(p.AllowHTTP && u.Scheme == "http"):
		if p.AllowHTTP {
			return nil, fmt.Errorf("%w: the URL must start with https:// or http://", ErrRefused)
		}
		return nil, fmt.Errorf("%w: the URL must start with https://; %s", ErrRefused, hintHTTP)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%w: the URL has no host", ErrRefused)
	case u.User != nil:
		return nil, fmt.Errorf("%w: the URL must not carry a user name or password", ErrRefused)
	case u.Fragment != "":
		return nil, fmt.Errorf("%w: the URL must not have a #fragment", ErrRefused)
	}
	host := u.Hostname()
	if strings.Contains(host, "%") {
		return nil, fmt.Errorf("%w: the URL must not name a network interface (%%zone)", ErrRefused)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// An address the URL spells out may be named in the refusal.
		if p.AllowPrivateNetworks {
			return u, nil
		}
		if err := checkAddr(a); err != nil {
			return nil, fmt.Errorf("%w; %s", err, hintPrivate)
		}
		return u, nil
	}
	if endsInNumber(host) {
		// 2130706433, 0x7f000001, 0177.0.0.1 or 127.1: browsers read these
		// as IPv4 addresses and some resolvers do too; no DNS name ends in
		// a number. One spelling of an address keeps the policy simple.
		return nil, fmt.Errorf("%w: the host %s is not a name, nor an IPv4 address in dotted decimal (a.b.c.d)", ErrRefused, host)
	}
	if p.AllowPrivateNetworks {
		return u, nil
	}
	lookup := p.lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("%w: the host %s could not be resolved", ErrRefused, host)
	}
	for _, a := range addrs {
		if checkAddr(a) != nil {
			return nil, fmt.Errorf("%w: the host %s resolves to an address that is not public; %s", ErrRefused, host, hintPrivate)
		}
	}
	return u, nil
}

// endsInNumber reports whether a host's last label is a number (decimal, or
// hexadecimal with 0x), which the WHATWG URL standard parses as an IPv4
// address: no top-level domain is numeric.
func endsInNumber(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := labels[len(labels)-1]
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// block is an address block that no receiver may be in, with what the
// refusal calls it.
type block struct {
	prefix netip.Prefix
	name   string
}

func blocks(pairs ...string) []block {
	out := make([]block, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, block{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// refusedV4 are the IPv4 blocks refused: those of the IANA IPv4
// Special-Purpose Address Registry (RFC 6890 and its updates) whose
// "Globally Reachable" is False or N/A, plus multicast. Decisions:
//   - 192.0.0.0/24 is refused whole, its globally reachable anycast
//     addresses 192.0.0.9 (PCP) and 192.0.0.10 (TURN) included: neither is a
//     web server, and refusing is the safe side.
//   - 192.88.99.0/24, the deprecated 6to4 relay anycast (RFC 7526), is
//     refused.
//   - 192.31.196.0/24 (AS112-v4), 192.52.193.0/24 (AMT) and 192.175.48.0/24
//     (direct delegation AS112) are globally reachable and stay allowed.
var refusedV4 = blocks(
	"0.0.0.0/8", "this network",
	"10.0.0.0/8", "private-use",
	"100.64.0.0/10", "shared address space, carrier-grade NAT",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local, where cloud metadata services live",
	"172.16.0.0/12", "private-use",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation",
	"192.88.99.0/24", "deprecated 6to4 relay anycast",
	"192.168.0.0/16", "private-use",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation",
	"203.0.113.0/24", "documentation",
	"224.0.0.0/4", "multicast",
	"240.0.0.0/4", "reserved",
	"255.255.255.255/32", "limited broadcast",
)

// globalUnicastV6 is the only IPv6 space a receiver may be in (RFC 4291):
// everything outside it is refused, whatever registry lists it.
var globalUnicastV6 = netip.MustParsePrefix("2000::/3")

// namedV6 name, for the refusal, the blocks outside 2000::/3 that the IANA
// IPv6 Special-Purpose Address Registry and RFC 4291 list; all are refused.
// 64:ff9b::/96 (NAT64) is globally reachable in the registry but refused
// all the same: a NAT64 gateway would carry the connection to whatever IPv4
// address the last 32 bits name, private ones included.
var namedV6 = blocks(
	"::/128", "unspecified",
	"::1/128", "loopback",
	"::/96", "deprecated IPv4-compatible",
	"::/8", "reserved by the IETF",
	"64:ff9b::/96", "NAT64",
	"64:ff9b:1::/48", "local-use NAT64",
	"100::/64", "discard-only",
	"100:0:0:1::/64", "dummy prefix",
	"5f00::/16", "SRv6 segment identifiers",
	"fc00::/7", "unique local",
	"fe80::/10", "link-local",
	"fec0::/10", "deprecated site-local",
	"ff00::/8", "multicast",
)

// refusedV6 are the blocks inside 2000::/3 that the IANA IPv6
// Special-Purpose Address Registry marks not globally reachable (False or
// N/A). 2001::/23 is refused whole, its globally reachable assignments
// (2001:1::1-3 anycast, 2001:3::/32 AMT, 2001:4:112::/48 AS112-v6,
// 2001:20::/28 ORCHIDv2, 2001:30::/28 drone remote ID) included: none is a
// web server, and refusing is the safe side. 2620:4f:8000::/48 (direct
// delegation AS112) is globally reachable and stays allowed.
var refusedV6 = blocks(
	"2001::/23", "IETF protocol assignments",
	"2001::/32", "Teredo: embeds an IPv4 address",
	"2001:2::/48", "benchmarking",
	"2001:10::/28", "deprecated ORCHID",
	"2001:db8::/32", "documentation",
	"2002::/16", "6to4: embeds an IPv4 address",
	"3fff::/20", "documentation",
)

// checkAddr refuses an address that is not globally reachable: loopback,
// private, link-local (169.254.169.254, the cloud metadata service, among
// them), multicast, documentation, reserved, and the like. An IPv4-mapped
// IPv6 address (::ffff:a.b.c.d) is judged by the IPv4 address it maps.
func checkAddr(a netip.Addr) error {
	if why := nonPublic(a); why != "" {
		return fmt.Errorf("%w: %v is not a public address (%s)", ErrRefused, a.WithZone(""), why)
	}
	return nil
}

// nonPublic says why an address is refused, or "" when it is not.
func nonPublic(a netip.Addr) string {
	a = a.WithZone("").Unmap() // a zoned address matches no prefix
	switch {
	case !a.IsValid():
		return "not an IP address"
	case a.Is4():
		return longestMatch(refusedV4, a, "")
	case !globalUnicastV6.Contains(a):
		return longestMatch(namedV6, a, "outside IPv6 global unicast, 2000::/3")
	}
	return longestMatch(refusedV6, a, "")
}

// longestMatch names the most specific block holding a, or is otherwise.
func longestMatch(bs []block, a netip.Addr, otherwise string) string {
	best := -1
	why := otherwise
	for _, b := range bs {
		if b.prefix.Contains(a) && b.prefix.Bits() > best {
			best, why = b.prefix.Bits(), b.name
		}
	}
	return why
}

// control runs just before each connection, on the address really being
// dialled, so a name that resolves differently now than at registration
// (DNS rebinding) is caught, and so is whatever a resolver made of a host.
// Its refusal names the address: it goes to the attempt's record, which
// only the operator reads.
func (p Policy) control(network, address string, _ syscall.RawConn) error {
	if p.AllowPrivateNetworks {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", ErrRefused, address)
	}
	return checkAddr(ap.Addr())
}
