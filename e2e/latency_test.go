package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// lineLatency is the main line's latency as GET /v1/lines shows it, read
// with the Go client.
func (td *testDaemon) lineLatency(key string) api.LineLatency {
	td.t.Helper()
	lines, err := client.New(td.base, client.WithAPIKey(key)).Lines.List(context.Background())
	if err != nil {
		td.t.Fatal(err)
	}
	for _, l := range lines {
		if l.Handle == mainLine {
			return l.Latency
		}
	}
	td.t.Fatalf("no line %s in %+v", mainLine, lines)
	return api.LineLatency{}
}

// On the simulated network each stage is timed once per event: a message
// sent (accept → sent), its delivered receipt (sent → delivered), and a
// contact's message delivered to a webhook (row → webhook). GET /v1/lines
// shows the day's figures, /metrics the histograms, and a restart starts
// the day over.
func TestLatencyPerLine(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	started := time.Now()

	none := td.lineLatency(key)
	for name, q := range map[string]api.LatencyQuantiles{"accept_to_sent": none.AcceptToSent, "row_to_webhook": none.RowToWebhook,
		"sent_to_delivered": none.SentToDelivered} {
		if q.Count != 0 || q.P50Ms != nil || q.P99Ms != nil {
			t.Errorf("%s before any traffic: %+v", name, q)
		}
	}
	if none.Since > started.UnixMilli() || none.Since < started.Add(-time.Minute).UnixMilli() {
		t.Errorf("since %d, want the daemon's start (about %d)", none.Since, started.UnixMilli())
	}

	td.register(key, mainLine, rc, "message.received")
	td.inbound(mainLine, alice, "hi")
	rc.waitRequests(1)
	td.sentMessage(key, alice, "hello")
	delivered := td.simJSON("read", "--line", mainLine, "--from", alice, "--delivered-only")
	if delivered["delivered_at"] == nil {
		t.Fatalf("sim read --delivered-only printed %v", delivered)
	}

	var l api.LineLatency
	testkit.Eventually(t, 10*time.Second, func() bool {
		l = td.lineLatency(key)
		// Each is recorded just after what it times: the receiver's
		// answer, the item recorded as sent.
		return l.RowToWebhook.Count > 0 && l.AcceptToSent.Count > 0 && l.SentToDelivered.Count > 0
	})
	for name, q := range map[string]api.LatencyQuantiles{"accept_to_sent": l.AcceptToSent, "row_to_webhook": l.RowToWebhook,
		"sent_to_delivered": l.SentToDelivered} {
		if q.Count != 1 || q.P50Ms == nil || q.P99Ms == nil || *q.P50Ms < 0 || *q.P50Ms != *q.P99Ms {
			t.Errorf("%s after one: %+v", name, q)
		}
	}
	// The same in the line's list as JSON, checked against the API document.
	r := td.call("GET", "/v1/lines", key, nil)
	if r.Status != 200 {
		t.Fatalf("GET /v1/lines: %d %s", r.Status, r.Body)
	}

	m := td.scrape()
	for _, stage := range []string{"accept_to_sent", "row_to_webhook", "sent_to_delivered"} {
		series := `blueline_latency_` + stage + `_seconds_count{line="` + mainLine + `"}`
		if m[series] != 1 {
			t.Errorf("%s = %v, want 1", series, m[series])
		}
		if inf := m[`blueline_latency_`+stage+`_seconds_bucket{line="`+mainLine+`",le="+Inf"}`]; inf != 1 {
			t.Errorf("%s's +Inf bucket = %v, want 1", stage, inf)
		}
	}

	// Kept in memory: a restart starts the day over.
	td.stop()
	restarted := time.Now()
	td.start()
	l = td.lineLatency(key)
	if l.AcceptToSent.Count != 0 || l.RowToWebhook.Count != 0 || l.SentToDelivered.Count != 0 || l.Since < restarted.UnixMilli() {
		t.Errorf("after a restart: %+v, want nothing since %d", l, restarted.UnixMilli())
	}
}
