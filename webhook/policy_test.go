package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/storage"
)

func TestCheckAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "0.0.0.0", "100.64.0.1",
		"192.0.2.10", "198.18.0.1", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd12::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "2001:db8::1", "ff02::1", "2002:7f00:1::1",
	}
	for _, s := range refused {
		if err := checkAddr(netip.MustParseAddr(s)); !errors.Is(err, ErrRefused) {
			t.Errorf("%s allowed", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.215.14"} {
		if err := checkAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	strict := Policy{}
	for raw, why := range map[string]string{
		"http://93.184.215.14/h":               "https://",
		"https://127.0.0.1/h":                  "127.0.0.1 is not a public address",
		"https://localhost:8443/h":             "is not a public address", // a name that resolves to loopback
		"https://[::1]/h":                      "::1 is not a public address",
		"https://10.0.0.1/h":                   "10.0.0.1",
		"https://169.254.169.254/latest":       "169.254.169.254",
		"https://93.184.215.14/h#frag":         "fragment",
		"https:///nohost":                      "no host",
		"ftp://93.184.215.14/":                 "https://",
		"https://host.invalid/h":               "could not be resolved",
		"https://" + strings.Repeat("a", 2100): "at most",
	} {
		if _, err := strict.CheckURL(ctx, raw); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckURL(%q) = %v, want a refusal saying %q", raw, err, why)
		}
	}
	if u, err := strict.CheckURL(ctx, "https://93.184.215.14:8443/hooks?x=1"); err != nil || u.Host != "93.184.215.14:8443" {
		t.Errorf("public URL: %v %v", u, err)
	}
	dev := Policy{AllowHTTP: true, AllowPrivateNetworks: true}
	for _, raw := range []string{"http://127.0.0.1:9000/h", "https://localhost/h", "http://10.0.0.1/h"} {
		if _, err := dev.CheckURL(ctx, raw); err != nil {
			t.Errorf("development policy refused %s: %v", raw, err)
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
