package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/client/webhook/signature"
)

// `blueline webhooks test` sends one signed test event of a subscribed type
// to the receiver, prints its answer, and records no delivery.
func TestCLIWebhooksTest(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) int {
		return answerWith(w, 200, "thanks\n")
	})
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	hook := td.register(key, mainLine, rc, "reaction.added", "message.received")
	id := hook["id"].(string)

	// Default: the webhook's first event, in its real shape.
	out := td.mustCLI("webhooks", "test", id)
	got := rc.waitRequests(1)
	r := got[0]
	if r.Err != nil {
		t.Fatalf("the test event does not verify with the webhook's secret: %v", r.Err)
	}
	if r.Event() != "reaction.added" || r.Body["test"] != true || !strings.HasPrefix(r.DeliveryID(), "dlv_test") ||
		r.Header.Get(signature.HeaderDeliveryID) != r.DeliveryID() {
		t.Errorf("test event: %s", r.Raw)
	}
	assertConforms(t, "test reaction.added", response{Status: 200, Body: r.Body, Raw: r.Raw}, sdkEvent(sdkReactionEventData))
	if d := r.Data(); !strings.HasPrefix(d["id"].(string), "rxn_test") || d["line_handle"] != mainLine {
		t.Errorf("test reaction data: %v", d)
	}
	if f := strings.Split(strings.TrimSpace(out), "\t"); len(f) != 5 || f[0] != id || f[1] != "reaction.added" || f[2] != "200" ||
		!strings.HasSuffix(f[3], "ms") || f[4] != "thanks" {
		t.Errorf("webhooks test printed %q", out)
	}

	// --event picks another subscribed event; --json prints the answer.
	var res struct {
		DeliveryID string `json:"delivery_id"`
		Event      string `json:"event"`
		StatusCode int    `json:"status_code"`
		LatencyMs  *int64 `json:"latency_ms"`
		Body       string `json:"body"`
		Error      string `json:"error"`
	}
	cliJSON(t, td.mustCLI("webhooks", "test", id, "--event", "message.received", "--json"), &res)
	r = rc.waitRequests(2)[1]
	if r.Err != nil || r.Event() != "message.received" || r.Body["test"] != true {
		t.Fatalf("second test event (%v): %s", r.Err, r.Raw)
	}
	assertConforms(t, "test message.received", response{Status: 200, Body: r.Body, Raw: r.Raw}, sdkEvent(sdkMessageEventData))
	if d := r.Data(); !strings.HasPrefix(d["id"].(string), "msg_test") || d["is_from_me"] != false {
		t.Errorf("test message data: %v", d)
	}
	if res.Event != "message.received" || res.StatusCode != 200 || res.LatencyMs == nil || res.Body != "thanks\n" ||
		res.Error != "" || res.DeliveryID != r.DeliveryID() {
		t.Errorf("--json: %+v", res)
	}

	// Not recorded as a delivery.
	if out := td.mustCLI("webhooks", "deliveries", "--webhook", id); strings.Contains(out, "dlv_") {
		t.Errorf("a test event was recorded: %q", out)
	}

	// An event the webhook does not subscribe to, or no such webhook: no
	// request, exit 1 with the reason.
	if _, errOut, code := td.cli("webhooks", "test", id, "--event", "message.sent"); code != 1 || !strings.Contains(errOut, "does not subscribe") {
		t.Errorf("unsubscribed event: exit %d, %q", code, errOut)
	}
	if _, errOut, code := td.cli("webhooks", "test", "wh_nope"); code != 1 || !strings.Contains(errOut, "No webhook") {
		t.Errorf("unknown webhook: exit %d, %q", code, errOut)
	}
	if _, _, code := td.cli("webhooks", "test"); code != 2 {
		t.Errorf("no ID: exit %d, want 2", code)
	}
	if n := len(rc.Requests()); n != 2 {
		t.Errorf("the receiver got %d requests, want 2", n)
	}
}

// A receiver that refuses the test event, or cannot be reached: the answer
// or the error is printed, and the command exits 1.
func TestCLIWebhooksTestFailing(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) int {
		return answerWith(w, 401, "bad signature, go away")
	})
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	id := td.register(key, mainLine, rc, "message.sent")["id"].(string)

	out, errOut, code := td.cli("webhooks", "test", id)
	if code != 1 || !strings.Contains(out, "\t401\t") || !strings.Contains(out, "bad signature, go away") || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("refused: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if r := rc.waitRequests(1)[0]; r.Err != nil || r.Event() != "message.sent" || r.Data()["is_from_me"] != true {
		t.Errorf("refused test event (%v): %s", r.Err, r.Raw)
	}

	// The receiver gone: no status, the error.
	rc.Server.Close()
	out, errOut, code = td.cli("webhooks", "test", id, "--json")
	var res struct {
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
	}
	cliJSON(t, out, &res)
	if code != 1 || res.StatusCode != 0 || res.Error == "" || !strings.Contains(errOut, "did not accept") {
		t.Errorf("unreachable: exit %d, %+v, stderr %q", code, res, errOut)
	}
	if out := td.mustCLI("webhooks", "deliveries", "--webhook", id); strings.Contains(out, "dlv_") {
		t.Errorf("a test event was recorded: %q", out)
	}
}

// answerWith answers a receiver's request with status and body; it returns
// 0, which tells the receiver the answer is written.
func answerWith(w http.ResponseWriter, status int, body string) int {
	w.WriteHeader(status)
	w.Write([]byte(body))
	return 0
}
