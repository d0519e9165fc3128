package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/storage"
)

// Every block of the IANA special-purpose registries that is not globally
// reachable is refused, at both ends and inside, and so is everything
// outside IPv6 global unicast; public addresses, the globally reachable
// special-purpose ones we keep among them, pass.
func TestCheckAddr(t *testing.T) {
	refused := map[string]string{ // address → what the refusal calls it
		"0.0.0.0":         "this network",
		"0.255.255.255":   "this network",
		"10.0.0.1":        "private-use",
		"10.255.255.255":  "private-use",
		"100.64.0.1":      "carrier-grade NAT",
		"100.127.255.255": "carrier-grade NAT",
		"127.0.0.1":       "loopback",
		"127.1.2.3":       "loopback",
		"169.254.169.254": "link-local",
		"172.16.5.4":      "private-use",
		"172.31.255.255":  "private-use",
		"192.0.0.1":       "IETF protocol assignments",
		"192.0.0.8":       "IETF protocol assignments",
		"192.0.0.9":       "IETF protocol assignments", // PCP anycast: globally reachable, refused by choice
		"192.0.0.10":      "IETF protocol assignments", // TURN anycast: likewise
		"192.0.0.170":     "IETF protocol assignments",
		"192.0.2.10":      "documentation",
		"192.88.99.1":     "6to4 relay",
		"192.168.1.1":     "private-use",
		"198.18.0.1":      "benchmarking",
		"198.19.255.255":  "benchmarking",
		"198.51.100.7":    "documentation",
		"203.0.113.9":     "documentation",
		"224.0.0.1":       "multicast",
		"239.255.255.250": "multicast",
		"240.0.0.1":       "reserved",
		"255.255.255.254": "reserved",
		"255.255.255.255": "limited broadcast",

		"::":                                     "unspecified",
		"::1":                                    "loopback",
		"::127.0.0.1":                            "IPv4-compatible",
		"::8.8.8.8":                              "IPv4-compatible",
		"::1:0:0:1":                              "reserved by the IETF",
		"::ffff:127.0.0.1":                       "loopback", // IPv4-mapped: judged by its IPv4 address
		"::ffff:10.0.0.1":                        "private-use",
		"::ffff:169.254.169.254":                 "link-local",
		"64:ff9b::a00:1":                         "NAT64",
		"64:ff9b::808:808":                       "NAT64",
		"64:ff9b:1::1":                           "local-use NAT64",
		"100::1":                                 "discard-only",
		"100::ffff:ffff:ffff:ffff":               "discard-only",
		"100:0:0:1::1":                           "dummy prefix",
		"1::1":                                   "reserved by the IETF",
		"400::1":                                 "outside IPv6 global unicast",
		"2001::1":                                "Teredo",
		"2001:0:4136:e378:8000:63bf:3fff:fdd2":   "Teredo",
		"2001:1::1":                              "IETF protocol assignments", // PCP anycast: refused by choice
		"2001:2::1":                              "benchmarking",
		"2001:3::1":                              "IETF protocol assignments", // AMT: refused by choice
		"2001:4:112::1":                          "IETF protocol assignments", // AS112-v6: refused by choice
		"2001:10::1":                             "ORCHID",
		"2001:20::1":                             "IETF protocol assignments", // ORCHIDv2: refused by choice
		"2001:30::1":                             "IETF protocol assignments",
		"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff": "IETF protocol assignments",
		"2001:db8::1":                            "documentation",
		"2002:7f00:1::1":                         "6to4",
		"2002:808:808::1":                        "6to4",
		"3fff::1":                                "documentation",
		"3fff:fff:ffff::1":                       "documentation",
		"4000::1":                                "outside IPv6 global unicast",
		"5f00::1":                                "SRv6",
		"8000::1":                                "outside IPv6 global unicast",
		"fc00::1":                                "unique local",
		"fd12::1":                                "unique local",
		"fe80::1":                                "link-local",
		"fe80::1%eth0":                           "link-local",
		"febf::1":                                "link-local",
		"fec0::1":                                "site-local",
		"feff::1":                                "site-local",
		"ff02::1":                                "multicast",
		"ff0e::1":                                "multicast",
	}
	for s, why := range refused {
		err := checkAddr(netip.MustParseAddr(s))
		want := fmt.Sprintf("%v is not a public address", netip.MustParseAddr(s).WithZone(""))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), why) {
			t.Errorf("checkAddr(%s) = %v, want a refusal saying %q and %q", s, err, want, why)
		}
	}
	allowed := []string{
		"1.1.1.1", "8.8.8.8", "93.184.215.14", "223.255.255.254",
		"100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "198.17.255.255", "198.20.0.0",
		"192.31.196.1", "192.52.193.1", "192.175.48.1", // AS112, AMT: globally reachable
		"::ffff:93.184.215.14",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1", "2001:200::1",
		"2620:4f:8000::1", // direct delegation AS112: globally reachable
		"2606:4700::1111%eth0",
	}
	for _, s := range allowed {
		if err := checkAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
}

// fakeLookup resolves names from a table, so that tests need no DNS.
func fakeLookup(table map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		ss, ok := table[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
}

var testNames = map[string][]string{
	"receiver.test": {"93.184.215.14", "2606:4700::1111"},
	"internal.test": {"10.1.2.3"},
	"rebind.test":   {"93.184.215.14", "169.254.169.254"},
	"mapped.test":   {"::ffff:192.168.7.7"},
	"teredo.test":   {"2001:0:4136:e378:8000:63bf:3fff:fdd2"},
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	strict := Policy{lookup: fakeLookup(testNames)}
	for raw, why := range map[string]string{
		"http://93.184.215.14/h":               "https://; [webhooks] allow_http",
		"ftp://93.184.215.14/":                 "https://",
		"https://127.0.0.1/h":                  "127.0.0.1 is not a public address (loopback); [webhooks] allow_private_networks",
		"https://[::1]/h":                      "::1 is not a public address",
		"https://10.0.0.1/h":                   "10.0.0.1 is not a public address",
		"https://169.254.169.254/latest":       "169.254.169.254 is not a public address",
		"https://[::127.0.0.1]/h":              "::7f00:1 is not a public address (deprecated IPv4-compatible)",
		"https://[fec0::1]/":                   "fec0::1 is not a public address (deprecated site-local)",
		"https://[100::1]/":                    "100::1 is not a public address (discard-only)",
		"https://[2001::1]/":                   "2001::1 is not a public address (Teredo",
		"https://[::ffff:127.0.0.1]/":          "::ffff:127.0.0.1 is not a public address (loopback)",
		"https://[64:ff9b::7f00:1]/":           "NAT64",
		"https://[2002:7f00:1::1]/":            "6to4",
		"https://[fe80::1%25eth0]/":            "network interface",
		"https://[::ffff:0x7f.1]/":             "not a valid URL", // url.Parse checks bracketed hosts
		"https://[1:2:3]/":                     "not a valid URL",
		"https://0x7f000001/":                  "not a name, nor an IPv4 address in dotted decimal",
		"https://2130706433/":                  "not a name",
		"https://0177.0.0.1/":                  "not a name",
		"https://127.1/":                       "not a name",
		"https://127.0.0.1./":                  "not a name",
		"https://receiver.0x10/":               "not a name",
		"https://93.184.215.14/h#frag":         "fragment",
		"https://u:p@93.184.215.14/h":          "user name or password",
		"https:///nohost":                      "no host",
		"https://nowhere.test/h":               "the host nowhere.test could not be resolved",
		"https://internal.test/h":              "the host internal.test resolves to an address that is not public; [webhooks] allow_private_networks",
		"https://rebind.test/h":                "the host rebind.test resolves to an address that is not public",
		"https://mapped.test/h":                "not public",
		"https://teredo.test/h":                "not public",
		"https://" + strings.Repeat("a", 2100): "at most",
	} {
		if _, err := strict.CheckURL(ctx, raw); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckURL(%q) = %v, want a refusal saying %q", raw, err, why)
		}
	}
	for raw, host := range map[string]string{
		"https://93.184.215.14:8443/hooks?x=1":      "93.184.215.14:8443",
		"https://[2606:4700:4700::1111]/h":          "[2606:4700:4700::1111]",
		"https://[2001:4860:4860::8888]:8443/h":     "[2001:4860:4860::8888]:8443",
		"https://receiver.test/hooks/abc?token=xyz": "receiver.test",
		"https://1.1.1.1/":                          "1.1.1.1",
	} {
		if u, err := strict.CheckURL(ctx, raw); err != nil || u.Host != host {
			t.Errorf("CheckURL(%q) = %v, %v; want it allowed", raw, u, err)
		}
	}
	dev := Policy{AllowHTTP: true, AllowPrivateNetworks: true, lookup: fakeLookup(testNames)}
	for _, raw := range []string{"http://127.0.0.1:9000/h", "https://localhost/h", "http://10.0.0.1/h", "https://internal.test/h", "http://[fec0::1]/"} {
		if _, err := dev.CheckURL(ctx, raw); err != nil {
			t.Errorf("development policy refused %s: %v", raw, err)
		}
	}
	if _, err := dev.CheckURL(ctx, "http://2130706433/"); !errors.Is(err, ErrRefused) {
		t.Errorf("development policy allowed a numeric host: %v", err)
	}
}

// A refusal never says what a name resolved to: registering webhooks must
// not be a way to map the daemon's network. localhost resolves from the
// hosts file, with the system's resolver.
func TestCheckURLHidesResolvedAddresses(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		policy Policy
		url    string
		hidden []string
	}{
		{Policy{}, "https://localhost:8443/h", []string{"127.", "::1", "loopback"}},
		{Policy{lookup: fakeLookup(testNames)}, "https://internal.test/h", []string{"10.1.2.3", "private-use"}},
		{Policy{lookup: fakeLookup(testNames)}, "https://rebind.test/h", []string{"169.254", "93.184", "link-local"}},
		{Policy{lookup: fakeLookup(testNames)}, "https://mapped.test/h", []string{"192.168", "ffff", "private-use"}},
	}
	for _, c := range cases {
		_, err := c.policy.CheckURL(ctx, c.url)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%s) = %v, want a refusal", c.url, err)
			continue
		}
		for _, h := range c.hidden {
			if strings.Contains(err.Error(), h) {
				t.Errorf("CheckURL(%s) says %q: it reveals %q", c.url, err, h)
			}
		}
	}
}

func TestEndsInNumber(t *testing.T) {
	for host, want := range map[string]bool{
		"2130706433": true, "0x7f000001": true, "0X7F.1": true, "0177.0.0.1": true, "127.1": true, "1.2.3.4.": true,
		"a.b.0x": true, "a.b.123": true,
		"example.com": false, "1.example": false, "0xfoo": false, "x1": false, "receiver.test.": false, "123abc": false,
	} {
		if got := endsInNumber(host); got != want {
			t.Errorf("endsInNumber(%q) = %v, want %v", host, got, want)
		}
	}
}

// The check at dial time covers whatever address a host became.
func TestControl(t *testing.T) {
	strict := Policy{}
	for _, addr := range []string{"127.0.0.1:443", "[::ffff:127.0.0.1]:443", "[::127.0.0.1]:443", "[fe80::1%eth0]:443",
		"[fec0::1]:443", "[100::1]:443", "[2001::1]:443", "10.0.0.1:8443", "not an address"} {
		if err := strict.control("tcp", addr, nil); !errors.Is(err, ErrRefused) {
			t.Errorf("dial to %s allowed", addr)
		}
	}
	for _, addr := range []string{"1.1.1.1:443", "[2606:4700:4700::1111]:443", "[::ffff:8.8.8.8]:443"} {
		if err := strict.control("tcp", addr, nil); err != nil {
			t.Errorf("dial to %s refused: %v", addr, err)
		}
	}
	if err := (Policy{AllowPrivateNetworks: true}).control("tcp", "127.0.0.1:443", nil); err != nil {
		t.Errorf("development policy refused loopback: %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example.com/T123/B456/s3cret?token=abc": "https://hooks.example.com",
		"https://u:pw@hooks.example.com:8443/p?q=1#f":          "https://hooks.example.com:8443",
		"http://[2606:4700::1111]:9000/x":                      "http://[2606:4700::1111]:9000",
		"https://receiver.test":                                "https://receiver.test",
		"::nope":                                               "(not a URL)",
		"/relative/path?token=abc":                             "(not a URL)",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// The policy is checked again on the address each delivery connects to: a
// URL registered while its name resolved elsewhere cannot reach loopback.
func TestDeliveryRefusesPrivateAddress(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	d := New(nil, nil, Options{Policy: Policy{AllowHTTP: true}}, nil)
	w := d.newWorker(context.Background(), storageWebhook(srv.URL))
	resp, err := w.client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "127.0.0.1 is not a public address") || hits != 0 {
		t.Fatalf("delivery to loopback: err %v, %d requests arrived", err, hits)
	}
	allowed := New(nil, nil, Options{Policy: Policy{AllowHTTP: true, AllowPrivateNetworks: true}}, nil)
	resp, err = allowed.newWorker(context.Background(), storageWebhook(srv.URL)).client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != 200 || hits != 1 {
		t.Fatalf("allowed delivery: %v %v, %d requests", resp, err, hits)
	}
	resp.Body.Close()
}

func storageWebhook(url string) storage.Webhook {
	return storage.Webhook{ID: "wh_test", URL: url, IsActive: true}
}
