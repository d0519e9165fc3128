package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/testkit"
)

// startLoggedTestDaemon is startTestDaemon with the daemon's log, at debug
// level, kept for the test to read (and shown with -v).
func startLoggedTestDaemon(t *testing.T, extra string) (*testDaemon, *testkit.LogBuffer) {
	t.Helper()
	td := newTestDaemon(t, extra)
	log, logs := keptLog()
	var err error
	td.d, err = daemon.Start(context.Background(), td.config(), log)
	if err != nil {
		t.Fatal(err)
	}
	td.base = "http://" + td.d.Addr().String()
	t.Cleanup(td.stop)
	return td, logs
}

// The daemon's log shows a webhook's scheme and host, never the path or
// query of its URL, which often carry the receiver's credential: not when
// it is registered or refused, not as its deliveries fail and succeed, not
// when it is deleted. The record of attempts leaves them out too.
func TestWebhookURLNotLogged(t *testing.T) {
	const pathSecret, querySecret = "p4th-s3cret", "qu3ry-s3cret"
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	td, logs := startLoggedTestDaemon(t, webhookConfig(t, rc, "retry_schedule = [\"10ms\"]\n"))
	key := td.key()
	secretURL := func(base string) string { return base + "/hooks/" + pathSecret + "?token=" + querySecret }
	dead := "https://" + freePort(t) // nothing listens there: attempts fail to connect

	var ids []string
	for _, u := range []string{secretURL(rc.Server.URL), secretURL(dead)} {
		r := td.call("POST", "/v1/webhooks", key, map[string]any{"from": mainLine, "url": u, "events": []string{"message.received"}})
		if r.Status != 201 {
			t.Fatalf("POST /v1/webhooks %s: %d %s", u, r.Status, r.Raw)
		}
		ids = append(ids, r.Body["id"].(string))
	}
	if r := td.call("POST", "/v1/webhooks", key, map[string]any{"from": mainLine, "url": secretURL("http://127.0.0.1:1"),
		"events": []string{"message.received"}}); r.Status != 400 {
		t.Fatalf("http:// URL: %d %s", r.Status, r.Raw)
	}

	td.inbound(mainLine, alice, "keep my secrets")
	// The live receiver fails once, then takes it; the dead one fails twice,
	// and its delivery is given up.
	var attempts string
	testkit.Eventually(t, 10*time.Second, func() bool {
		attempts = td.mustCLI("webhooks", "deliveries")
		return len(rc.Requests()) == 2 && strings.Count(attempts, "\n") == 4
	})
	for _, id := range ids {
		if r := td.call("DELETE", "/v1/webhooks", key, map[string]any{"id": id}); r.Status != 200 {
			t.Fatalf("DELETE %s: %d %s", id, r.Status, r.Raw)
		}
	}

	log := logs.String()
	for _, s := range []string{pathSecret, querySecret} {
		if strings.Contains(log, s) {
			t.Errorf("the log shows %q:\n%s", s, log)
		}
		if strings.Contains(attempts, s) {
			t.Errorf("the attempts show %q:\n%s", s, attempts)
		}
	}
	for _, base := range []string{rc.Server.URL, dead} {
		if !strings.Contains(log, "url="+base+"\n") && !strings.Contains(log, "url="+base+" ") {
			t.Errorf("the log does not show the webhook at %s:\n%s", base, log)
		}
	}
	if !strings.Contains(attempts, "connection refused") {
		t.Errorf("the attempts do not say what went wrong:\n%s", attempts)
	}
}

// Registration refuses the special-purpose addresses the URL spells out,
// naming them, and names that resolve to one without saying what they
// resolved to; the refusal says which setting lifts it.
func TestWebhookRegistrationRefusals(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	for url, want := range map[string]string{
		"https://[::127.0.0.1]/h":     "::7f00:1 is not a public address",
		"https://[fec0::1]/":          "fec0::1 is not a public address",
		"https://[100::1]/":           "100::1 is not a public address",
		"https://[2001::1]/":          "2001::1 is not a public address",
		"https://[::ffff:127.0.0.1]/": "::ffff:127.0.0.1 is not a public address",
		"https://0x7f000001/":         "not a name, nor an IPv4 address in dotted decimal",
		"https://2130706433/":         "not a name",
		"https://0177.0.0.1/":         "not a name",
		"https://localhost:8443/h":    "the host localhost resolves to an address that is not public; [webhooks] allow_private_networks",
		"http://93.184.215.14/h":      "[webhooks] allow_http",
	} {
		r := td.call("POST", "/v1/webhooks", key, map[string]any{"from": plainLine, "url": url, "events": []string{"message.received"}})
		e, _ := r.Body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "url" || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %s; want a refusal saying %q", url, r.Status, r.Raw, want)
		}
		if strings.HasPrefix(url, "https://localhost") && (strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "::1")) {
			t.Errorf("the refusal of %s reveals what localhost resolves to: %s", url, msg)
		}
	}
}
