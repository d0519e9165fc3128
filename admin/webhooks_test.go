package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/admin"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
	"github.com/blueline-app/blueline/webhook"
)

// receiver is a webhook receiver on a loopback port that keeps what it
// is sent and answers 200.
type receiver struct {
	url    string
	mu     sync.Mutex
	events []api.Event
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var e api.Event
		if err == nil {
			err = json.Unmarshal(body, &e)
		}
		if err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.events = append(rc.events, e)
		rc.mu.Unlock()
		io.WriteString(w, "thanks")
	}))
	t.Cleanup(ts.Close)
	rc.url = ts.URL + "/hook"
	return rc
}

func (rc *receiver) received() []api.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]api.Event(nil), rc.events...)
}

// runDispatcher runs the webhook dispatcher over e's storage until the
// test ends.
func runDispatcher(t *testing.T, e *env, opts webhook.Options) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		webhook.New(e.db, e.srv, opts, e.log).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestWebhooks(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	rc := newReceiver(t)
	if got := e.call("GET", "/webhooks", nil).data(t); len(got) != 0 {
		t.Fatalf("webhooks with none: %v", got)
	}
	hook := e.ok(http.StatusCreated, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": rc.url, "events": []string{"message.received", "reaction.added"}})
	hookID := hook["id"].(string)
	var list struct{ Data []api.WebhookInfo }
	e.call("GET", "/webhooks", nil).decode(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("webhooks: %+v", list.Data)
	}
	if w := list.Data[0]; w.ID != hookID || w.Line != mainLine || w.Owner != "" || w.URL != rc.url || !w.IsActive || len(w.Events) != 2 || w.CreatedAt == 0 || w.FailingSince != 0 {
		t.Errorf("listed webhook %+v", w)
	}
	// An owner's webhook on the sandbox is listed too, with its owner.
	if r := e.call("POST", "/v1/webhooks", map[string]any{"from": sandboxLine, "url": rc.url, "events": []string{"message.received"}}, api.OwnerHeader, "acme"); r.status != http.StatusCreated {
		t.Fatalf("acme's webhook: %d", r.status)
	}
	e.call("GET", "/webhooks", nil).decode(t, &list)
	// Listed by ID, which orders by the millisecond of creation only: the
	// two may have been made in the same one.
	owners := map[string]string{}
	for _, w := range list.Data {
		owners[w.Line] = w.Owner
	}
	if len(list.Data) != 2 || len(owners) != 2 || owners[sandboxLine] != "acme" || owners[mainLine] != "" {
		t.Errorf("webhooks with acme's: %+v, want acme's on the sandbox line, with its owner, beside the operator's", list.Data)
	}

	runDispatcher(t, e, webhookOpts())
	m := e.inbound(mainLine, alice, "deliver me")
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rc.received()) == 1 })
	got := rc.received()[0]
	data, err := got.Message()
	if err != nil || got.Type != "message.received" || data.ID != m["id"] || data.LineHandle != mainLine || got.Test {
		t.Fatalf("received %+v (%+v, %v)", got, data, err)
	}
	deliveryID := got.DeliveryID

	// The attempt is recorded once the dispatcher is done with it.
	var attempts []map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		attempts = e.call("GET", "/webhooks/attempts", nil).data(t)
		return len(attempts) == 1
	})
	if a := attempts[0]; a["delivery_id"] != deliveryID || a["webhook_id"] != hookID || a["status_code"] != float64(200) || a["n"] != float64(1) || a["event"] != "message.received" {
		t.Errorf("attempt %v", a)
	}
	if d, err := e.db.DeliveryByID(ctx, deliveryID); err != nil || d.Status != "succeeded" {
		t.Errorf("delivery %+v, %v", d, err)
	}
	for _, q := range []string{"?webhook=" + hookID, "?delivery=" + deliveryID, "?limit=1"} {
		if got := e.call("GET", "/webhooks/attempts"+q, nil).data(t); len(got) != 1 {
			t.Errorf("attempts%s: %v", q, got)
		}
	}
	for _, q := range []string{"?webhook=wh_other", "?delivery=dlv_other"} {
		if got := e.call("GET", "/webhooks/attempts"+q, nil).data(t); len(got) != 0 {
			t.Errorf("attempts%s: %v", q, got)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=x", "?limit=10001"} {
		e.refused(400, "invalid_parameter_value", "limit", "GET", "/webhooks/attempts"+q, nil)
	}

	// Redelivery sends the same event again, under the same delivery ID.
	again := e.ok(http.StatusOK, "POST", "/webhooks/redeliver", map[string]string{"id": deliveryID})
	if again["id"] != deliveryID || again["status"] != "pending" {
		t.Errorf("redeliver answered %v", again)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rc.received()) == 2 })
	if second := rc.received()[1]; second.DeliveryID != deliveryID || second.Type != "message.received" {
		t.Errorf("redelivered %+v", second)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return len(e.call("GET", "/webhooks/attempts?delivery="+deliveryID, nil).data(t)) == 2
	})
	if !strings.Contains(e.logs.String(), "webhook delivery queued again") {
		t.Errorf("redelivery not logged")
	}
	e.refused(404, "delivery_not_found", "id", "POST", "/webhooks/redeliver", map[string]string{"id": "dlv_nope"})

	// A deleted webhook's deliveries are gone for redelivery.
	e.ok(http.StatusOK, "DELETE", "/v1/webhooks", map[string]string{"id": hookID})
	e.refused(404, "delivery_not_found", "id", "POST", "/webhooks/redeliver", map[string]string{"id": deliveryID})
}

// A webhook that failed long enough is made inactive, and its deliveries
// are not sent again until it is registered again.
func TestRedeliverInactive(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	hook := e.ok(http.StatusCreated, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": failing.URL, "events": []string{"message.received"}})
	hookID := hook["id"].(string)
	opts := webhookOpts()
	opts.Schedule = []time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}
	opts.DisableAfter = time.Millisecond
	runDispatcher(t, e, opts)
	e.inbound(mainLine, alice, "nobody hears this")
	testkit.Eventually(t, 10*time.Second, func() bool {
		h, err := e.db.WebhookByID(ctx, hookID)
		return err == nil && !h.IsActive
	})
	var list struct{ Data []api.WebhookInfo }
	e.call("GET", "/webhooks", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].IsActive || list.Data[0].FailingSince == 0 {
		t.Errorf("listed webhooks %+v", list.Data)
	}
	attempts := e.call("GET", "/webhooks/attempts?webhook="+hookID, nil).data(t)
	if len(attempts) == 0 {
		t.Fatalf("attempts %v", attempts)
	}
	for _, a := range attempts {
		if a["status_code"] != float64(http.StatusServiceUnavailable) || a["error"] == nil {
			t.Errorf("attempt %v", a)
		}
	}
	deliveryID := attempts[0]["delivery_id"].(string)
	msg := e.refused(400, "invalid_parameter_value", "id", "POST", "/webhooks/redeliver", map[string]string{"id": deliveryID})
	if !strings.Contains(msg, "inactive") || !strings.Contains(msg, hookID) {
		t.Errorf("message %q", msg)
	}
	if d, err := e.db.DeliveryByID(ctx, deliveryID); err != nil || d.Status == "pending" {
		t.Errorf("delivery after refusal: %+v, %v", d, err)
	}
}

func TestWebhookTest(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t)
	hook := e.ok(http.StatusCreated, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": rc.url, "events": api.WebhookEvents})
	hookID := hook["id"].(string)

	// The webhook's first event by default.
	var res webhook.TestResult
	r := e.call("POST", "/webhooks/test", api.WebhookTestRequest{ID: hookID})
	r.decode(t, &res)
	if r.status != http.StatusOK || res.Event != api.WebhookEvents[0] || res.StatusCode != 200 || res.Body != "thanks" || res.Error != "" {
		t.Fatalf("test answered %d %s", r.status, r.body)
	}
	// Each event, with sample data in its real shape.
	for _, ev := range api.WebhookEvents {
		var res webhook.TestResult
		e.call("POST", "/webhooks/test", api.WebhookTestRequest{ID: hookID, Event: ev}).decode(t, &res)
		if res.Event != ev || res.StatusCode != 200 {
			t.Errorf("test of %s answered %+v", ev, res)
		}
	}
	sent := rc.received()
	if len(sent) != 1+len(api.WebhookEvents) {
		t.Fatalf("receiver got %d events", len(sent))
	}
	for i, got := range sent[1:] {
		ev := api.WebhookEvents[i]
		if got.Type != ev || !got.Test || got.DeliveryID == "" {
			t.Errorf("test event %d: %+v", i, got)
			continue
		}
		var id string
		switch {
		case strings.HasPrefix(ev, "message."):
			d, err := got.Message()
			if err != nil {
				t.Errorf("%s: %v", ev, err)
				continue
			}
			id = d.ID
			if d.LineHandle != mainLine || d.IsFromMe != (ev == "message.sent" || ev == "message.failed" || ev == "message.delivered" || ev == "message.self") {
				t.Errorf("%s: message %+v", ev, d)
			}
			if ev == "message.unsent" && (d.Text != nil || d.UnsentAt == nil) || ev == "message.failed" && d.FailedAt == nil ||
				ev == "message.edited" && d.EditedAt == nil || ev == "message.delivered" && d.DeliveredAt == nil {
				t.Errorf("%s: message %+v", ev, d)
			}
		case strings.HasPrefix(ev, "reaction."):
			d, err := got.Reaction()
			if err != nil || d.Added != (ev == "reaction.added") {
				t.Errorf("%s: %+v, %v", ev, d, err)
				continue
			}
			id = d.ID
		case ev == "receipt.read":
			d, err := got.Receipt()
			if err != nil {
				t.Errorf("%s: %v", ev, err)
				continue
			}
			id = d.ID
		case ev == "chat.updated":
			d, err := got.Chat()
			if err != nil || d.Change.Action != "renamed" {
				t.Errorf("%s: %+v, %v", ev, d, err)
				continue
			}
			id = d.ChatID
		case strings.HasPrefix(ev, "contact."):
			d, err := got.Contact()
			if err != nil || d.Handle == "" || d.At == 0 {
				t.Errorf("%s: %+v, %v", ev, d, err)
				continue
			}
			id = d.ChatID
		case ev == "chat.handoff":
			d, err := got.Handoff()
			if err != nil || d.State != "human_active" || d.Until == nil {
				t.Errorf("%s: %+v, %v", ev, d, err)
				continue
			}
			id = d.ChatID
		case ev == "chat.leased" || ev == "chat.released":
			d, err := got.Lease()
			if err != nil || d.KeyLabel == "" || (d.Released != nil) != (ev == "chat.released") {
				t.Errorf("%s: %+v, %v", ev, d, err)
				continue
			}
			id = d.KeyID
		}
		// Sample IDs say they are a test's.
		if _, rest, ok := strings.Cut(id, "_"); !ok || !strings.HasPrefix(rest, "test") {
			t.Errorf("%s: sample ID %q", ev, id)
		}
	}

	e.refused(400, "invalid_parameter_value", "event", "POST", "/webhooks/test", api.WebhookTestRequest{ID: hookID, Event: "message.teleported"})
	e.refused(404, "webhook_not_found", "id", "POST", "/webhooks/test", api.WebhookTestRequest{ID: "wh_nope"})
	// Nothing the tests sent was stored as a delivery.
	if got := e.call("GET", "/webhooks/attempts", nil).data(t); len(got) != 0 {
		t.Errorf("test events recorded attempts: %v", got)
	}

	// A receiver that fails is an answer, not an error of ours.
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusTeapot)
	}))
	defer failing.Close()
	bad := e.ok(http.StatusCreated, "POST", "/v1/webhooks", map[string]any{"from": smsLine, "url": failing.URL, "events": []string{"message.sent"}})
	res = webhook.TestResult{}
	r = e.call("POST", "/webhooks/test", api.WebhookTestRequest{ID: bad["id"].(string)})
	r.decode(t, &res)
	if r.status != http.StatusOK || res.StatusCode != http.StatusTeapot || res.Error == "" || !strings.Contains(res.Error, strconv.Itoa(http.StatusTeapot)) {
		t.Errorf("test of a failing receiver answered %d %s", r.status, r.body)
	}

	// A daemon that cannot send tests answers a 500 that reveals nothing,
	// and logs why.
	none := newEnv(t, envOptions{adjust: func(o *admin.Options) { o.WebhookTester = nil }})
	msg := none.refused(500, "internal_error", "", "POST", "/webhooks/test", api.WebhookTestRequest{ID: hookID})
	if strings.Contains(msg, "webhook") {
		t.Errorf("the 500 reveals its cause: %q", msg)
	}
	if !strings.Contains(none.logs.String(), "cannot send webhook test events") {
		t.Errorf("the cause is not logged: %s", none.logs.String())
	}
}
