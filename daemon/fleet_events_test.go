package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/fleet/relay"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// fleetWebhooks is a fleet's [webhooks]: receivers on loopback over plain
// HTTP, and the retry schedule given.
func fleetWebhooks(schedule string) string {
	return "[webhooks]\nallow_http = true\nallow_private_networks = true\ntimeout = \"2s\"\nretry_schedule = " + schedule + "\n"
}

// registerHook makes a webhook of node line's line for message.received
// to url, through node via's API (routed to the line's node), and waits
// until every running node has it (the control plane shares it). It
// returns the webhook's ID and secret.
func registerHook(t *testing.T, nodes []*daemontest.Daemon, via, line int, url string) (id, secret string) {
	t.Helper()
	key := daemontest.FleetKey(t, nodes, api.KeyRequest{})
	r := apitest.Client{TB: t, Base: nodes[via].URL()}.Call("POST", "/v1/webhooks", key,
		map[string]any{"from": daemontest.FleetLine(line), "url": url, "events": []string{api.EventMessageReceived}})
	if r.Status != 201 {
		t.Fatalf("POST /v1/webhooks through %s: %d %s", daemontest.FleetNode(via), r.Status, r.Raw)
	}
	id, secret = r.Body["id"].(string), r.Body["secret"].(string)
	for _, td := range nodes {
		if td.Daemon() == nil {
			continue
		}
		testkit.Eventually(t, 5*time.Second, func() bool {
			var hooks []api.WebhookInfo
			if err := td.Admin().Do(context.Background(), http.MethodGet, "/webhooks", nil, &struct{ Data *[]api.WebhookInfo }{&hooks}); err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(hooks, func(h api.WebhookInfo) bool { return h.ID == id })
		})
	}
	return id, secret
}

// attempts are the webhook's attempts node i recorded.
func attempts(t *testing.T, td *daemontest.Daemon, webhookID string) []storage.Attempt {
	t.Helper()
	var page struct{ Data []storage.Attempt }
	if err := td.Admin().Do(context.Background(), http.MethodGet, "/webhooks/attempts?limit=1000&webhook="+webhookID, nil, &page); err != nil {
		t.Fatal(err)
	}
	return page.Data
}

// delivered groups the receiver's requests by delivery ID, checking each
// is signed with the secret, and counts those answered 2xx (answered
// reports the status the n-th request, from 1, got).
func delivered(t *testing.T, rc *apitest.Receiver, answered func(n int) int) (texts map[string][]string, ok map[string]int) {
	t.Helper()
	texts, ok = map[string][]string{}, map[string]int{}
	for i, h := range rc.Requests() {
		if h.Err != nil {
			t.Fatalf("delivery %d: %v", i+1, h.Err)
		}
		id := h.DeliveryID()
		if got := h.Header.Get(signature.HeaderDeliveryID); got != id {
			t.Fatalf("delivery %d: header delivery ID %q, body %q", i+1, got, id)
		}
		text, _ := h.Data()["text"].(string)
		texts[id] = append(texts[id], text)
		if s := answered(i + 1); s >= 200 && s < 300 {
			ok[id]++
		}
	}
	return texts, ok
}

// streamError fails the test on an API error of the event stream; a
// stream that broke (its node's stream leader changing) is followed again
// by the client.
func streamError(t *testing.T, err error) {
	t.Helper()
	if _, ok := errors.AsType[*client.Error](err); ok {
		t.Fatal(err)
	}
	t.Log(err)
}

// A webhook of A's line and one of C's, each registered through B, each
// to its own receiver: each event recorded on A and C reaches it once, signed, with a
// delivery ID that its retries keep (the receiver fails the first two
// attempts), made by whichever nodes pull; the attempts are recorded by
// the nodes that made them. GET /v1/events on B shows the events of A's
// and C's lines, each once, and their evt_ IDs give the delivery IDs.
func TestFleetWebhooksAndEventStream(t *testing.T) {
	nodes := daemontest.Fleet(t, 3, fleetWebhooks(`["100ms", "100ms", "100ms", "100ms"]`))
	failFirst := 2 // of each receiver's requests
	answer := func(n int) int {
		if n <= failFirst {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	}
	origins := []int{0, 2}
	receivers := map[int]*apitest.Receiver{}
	hooks := map[int]string{}
	for _, origin := range origins {
		rc := apitest.NewReceiver(t, false, func(n int, _ http.ResponseWriter, _ *http.Request) int { return answer(n) })
		id, secret := registerHook(t, nodes, 1, origin, rc.Server.URL)
		rc.SetSecret(secret)
		receivers[origin], hooks[origin] = rc, id
	}

	want := map[string]bool{}
	for i, origin := range origins {
		for j := range 3 {
			text := fmt.Sprintf("from %s, %d", daemontest.FleetNode(origin), j)
			nodes[origin].Inbound(daemontest.FleetLine(origin), fmt.Sprintf("+1555111%04d", i*10+j), text)
			want[text] = true
		}
	}
	all := func() (texts map[string][]string, ok map[string]int, requests int) {
		texts, ok = map[string][]string{}, map[string]int{}
		for _, rc := range receivers {
			tx, o := delivered(t, rc, answer)
			for id, v := range tx {
				texts[id] = v
			}
			for id, n := range o {
				ok[id] = n
			}
			requests += len(rc.Requests())
		}
		return texts, ok, requests
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		_, ok, _ := all()
		return len(ok) == len(want)
	})
	texts, ok, requests := all()
	retried := 0
	for id, ts := range texts {
		if ok[id] != 1 {
			t.Errorf("delivery %s answered 2xx %d times", id, ok[id])
		}
		if len(ts) > 1 {
			retried++
		}
		for _, text := range ts {
			if !want[text] || text != ts[0] {
				t.Errorf("delivery %s carried %q", id, ts)
			}
		}
	}
	if wantRequests := len(want) + failFirst*len(receivers); retried == 0 || requests != wantRequests {
		t.Errorf("%d requests, %d deliveries retried: want %d and some", requests, retried, wantRequests)
	}

	// Every attempt is recorded once, by the node that made it.
	testkit.Eventually(t, 5*time.Second, func() bool {
		n := 0
		for _, td := range nodes {
			for _, id := range hooks {
				n += len(attempts(t, td, id))
			}
		}
		return n == requests
	})

	// B's event stream shows A's and C's events, once each.
	c := client.New(nodes[1].URL(), client.WithAPIKey(nodes[1].Key(api.KeyRequest{})))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[string]string{} // text → evt_ ID
	for ev, err := range c.Events.Stream(ctx, client.EventStreamParams{Since: time.Now().Add(-time.Hour)}) {
		if err != nil {
			streamError(t, err)
			continue
		}
		m, err := ev.Message()
		if err != nil {
			t.Fatal(err)
		}
		text := *m.Message.Text
		if _, dup := seen[text]; dup {
			t.Errorf("B's event stream has %q twice", text)
		}
		seen[text] = ev.DeliveryID
		if node := text[5:10]; m.LineHandle != daemontest.FleetLine(map[string]int{"mac-a": 0, "mac-c": 2}[node]) {
			t.Errorf("event %q on line %q", text, m.LineHandle)
		}
		if len(seen) == len(want) {
			break
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("B's event stream showed %v, want %d events", seen, len(want))
	}
	for text, evt := range seen {
		hook := hooks[0]
		if text[5:10] == "mac-c" {
			hook = hooks[2]
		}
		if id := relay.DeliveryID(hook, evt); texts[id] == nil {
			t.Errorf("event %s (%q): no delivery %s", evt, text, id)
		}
	}
}

// Events recorded on C but not published before it stopped (written into
// its event log while it was down, as if it had stopped between the commit
// and the publish, and with its publish cursor lost) go out once when it
// starts again, and what it had published is not published again: counted
// by event ID on the stream, read through A. Then the node that made a
// webhook's first attempt is stopped while the receiver fails: another
// node retries with the same delivery ID, and once the receiver recovers
// each event is delivered once.
func TestFleetPublishOnceAndFailover(t *testing.T) {
	// Retries every second, for long enough to outlast the restarts.
	nodes := daemontest.Fleet(t, 3, fleetWebhooks(`["1s"`+strings.Repeat(`, "1s"`, 39)+`]`))
	var failing atomic.Bool
	failing.Store(true)
	var succeeded atomic.Int64
	rc := apitest.NewReceiver(t, false, func(n int, _ http.ResponseWriter, _ *http.Request) int {
		if failing.Load() {
			return http.StatusServiceUnavailable
		}
		succeeded.Add(1)
		return http.StatusNoContent
	})
	hookID, secret := registerHook(t, nodes, 1, 2, rc.Server.URL)
	rc.SetSecret(secret)

	// Published while C runs.
	in := nodes[2].Inbound(daemontest.FleetLine(2), alice, "before the stop")
	c := client.New(nodes[0].URL(), client.WithAPIKey(nodes[0].Key(api.KeyRequest{})))
	// streamed reads the stream through A from its start until the message
	// last, counting each event by its ID. The publisher is serial: an
	// event of C published again would be on the stream before last.
	streamed := func(last string) map[string]int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		count := map[string]int{}
		for ev, err := range c.Events.Stream(ctx, client.EventStreamParams{Since: time.Now().Add(-time.Hour), Events: []string{api.EventMessageReceived, api.EventReceiptRead}}) {
			if err != nil {
				streamError(t, err)
				continue
			}
			count[ev.DeliveryID]++
			if m, err := ev.Message(); err == nil && m.Message.Text != nil && *m.Message.Text == last {
				return count
			}
		}
		t.Fatalf("the stream has %v, and not %q", count, last)
		return nil
	}
	streamed("before the stop")

	// Recorded while C is down, and its cursor lost.
	nodes[2].Stop()
	db, err := storage.Open(nodes[2].DataDir())
	if err != nil {
		t.Fatal(err)
	}
	db.SetFleetDeliveries(true)
	if _, err := db.SyncLines(context.Background(), []storage.Line{{Handle: daemontest.FleetLine(2), Label: "Line of mac-c", Service: "iMessage", Bridge: "sim", AdvancedFeatures: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordRead(context.Background(), in.ChatID, alice, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPublishCursor(context.Background(), storage.PublishCursor{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	nodes[2].Start()
	nodes[2].Inbound(daemontest.FleetLine(2), alice, "after the restart")

	count := streamed("after the restart")
	for id, n := range count {
		if n != 1 {
			t.Errorf("event %s is %d times on the stream", id, n)
		}
	}
	if len(count) != 3 {
		t.Errorf("the stream has %v", count)
	}

	// The receiver fails: find the node that made the latest attempt,
	// stop it, let the receiver
	// recover. (Attempts count from 1 across the fleet: a node that stops
	// hands back what it pulled, which counts.)
	var first int
	testkit.Eventually(t, 10*time.Second, func() bool {
		latest := int64(0)
		for i, td := range nodes {
			for _, a := range attempts(t, td, hookID) {
				if a.At > latest {
					first, latest = i, a.At
				}
			}
		}
		return latest > 0
	})
	nodes[first].Stop()
	failing.Store(false)
	t.Logf("stopped %s at %s after %d requests", daemontest.FleetNode(first), time.Now().Format("15:04:05.000"), len(rc.Requests()))
	if len(rc.Requests()) == 0 {
		t.Fatal("no attempt before the stop")
	}
	defer func() {
		if t.Failed() {
			for _, h := range rc.Requests() {
				t.Logf("request %s %s", h.DeliveryID(), h.Data()["text"])
			}
			for i, td := range nodes {
				if i != first {
					for _, a := range attempts(t, td, hookID) {
						t.Logf("%s: %+v", daemontest.FleetNode(i), a)
					}
				}
			}
		}
	}()
	// Within AckWait (timeout + 10s): a retry's delay may be lost in the
	// consumer leader's change when the stopped node led it.
	testkit.Eventually(t, 30*time.Second, func() bool { return succeeded.Load() == 2 })
	t.Logf("delivered at %s", time.Now().Format("15:04:05.000"))
	ids := map[string][]string{}
	for _, h := range rc.Requests() {
		ids[h.DeliveryID()] = append(ids[h.DeliveryID()], fmt.Sprint(h.Data()["text"]))
	}
	if len(ids) != 2 {
		t.Fatalf("deliveries %v: want the two messages", ids)
	}
	// Delivered by the nodes left, which record each success once they
	// have the answer.
	testkit.Eventually(t, 5*time.Second, func() bool {
		after := 0
		for i, td := range nodes {
			if i == first {
				continue
			}
			for _, a := range attempts(t, td, hookID) {
				if a.Error == "" {
					after++
				}
			}
		}
		return after == 2
	})
	for id, texts := range ids {
		if slices.Compact(slices.Clone(texts))[0] != texts[len(texts)-1] || len(slices.Compact(slices.Clone(texts))) != 1 {
			t.Errorf("delivery %s carried %v", id, texts)
		}
	}
}
