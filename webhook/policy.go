package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Policy says which receiver URLs are allowed. By default only https:// URLs
// whose host resolves to public addresses: a webhook must not become a way
// to make the daemon call services on its own host or network (SSRF).
type Policy struct {
	AllowHTTP            bool
	AllowPrivateNetworks bool
}

// ErrRefused marks a URL or address the policy refuses.
var ErrRefused = errors.New("refused by the webhook policy")

const maxURLLen = 2048

// CheckURL validates a receiver URL at registration and resolves its host,
// refusing it when any address is not public (unless allowed). DNS can change
// afterwards, so every delivery checks the address it connects to again.
func (p Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || len(raw) > maxURLLen:
		return nil, fmt.Errorf("%w: not a valid URL of at most %d characters", ErrRefused, maxURLLen)
	case u.Scheme != "https" && !(p.AllowHTTP && u.Scheme == "http"):
		if p.AllowHTTP {
			return nil, fmt.Errorf("%w: the URL must start with https:// or http://", ErrRefused)
		}
		return nil, fmt.Errorf("%w: the URL must start with https://", ErrRefused)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%w: the URL has no host", ErrRefused)
	case u.User != nil:
		return nil, fmt.Errorf("%w: the URL must not carry a user name or password", ErrRefused)
	case u.Fragment != "":
		return nil, fmt.Errorf("%w: the URL must not have a #fragment", ErrRefused)
	}
	if p.AllowPrivateNetworks {
		return u, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("%w: the host %s could not be resolved", ErrRefused, u.Hostname())
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return nil, fmt.Errorf("%w: %s resolves to %v", err, u.Hostname(), a.Unmap())
		}
	}
	return u, nil
}

// nonPublic are ranges netip's predicates do not cover that no public
// service lives in.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: could reach any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds any IPv4 address
}

// checkAddr refuses loopback, private, link-local (169.254.169.254, the
// cloud metadata service, among them), multicast, unspecified and reserved
// addresses.
func checkAddr(a netip.Addr) error {
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return fmt.Errorf("%w: %v is not a public address", ErrRefused, a)
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return fmt.Errorf("%w: %v is not a public address", ErrRefused, a)
		}
	}
	return nil
}

// control runs just before each connection, on the address really being
// dialled, so a name that resolves differently now than at registration
// (DNS rebinding) is caught.
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
