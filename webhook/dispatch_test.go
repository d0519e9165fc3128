package webhook_test

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

const (
	mainLine = "+15550000001"
	alice    = "+15551110001"
	bob      = "+15551110002"
	carol    = "+15551110003"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// textRenderer renders a message event as its text: enough for the
// receiver to tell events apart. (The API's shapes are the server's.)
type textRenderer struct{}

func (textRenderer) EventData(d storage.Delivery, lineHandle string) (json.RawMessage, error) {
	out := map[string]any{"line": lineHandle}
	if d.Message != nil {
		out["id"], out["text"] = d.Message.ID, d.Message.Text
	}
	return json.Marshal(out)
}

// hookEnv is a real database with one line.
type hookEnv struct {
	t    *testing.T
	db   *storage.DB
	line storage.Line
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(context.Background(), []storage.Line{{Handle: mainLine, Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	return &hookEnv{t: t, db: db, line: lines[0]}
}

// register stores an active webhook for message.received at url.
func (e *hookEnv) register(url, secret string) storage.Webhook {
	e.t.Helper()
	h := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{e.line.ID}, URL: url, Events: []string{api.EventMessageReceived},
		Secret: secret, IsActive: true, CreatedAt: time.Now().UnixMilli()}
	if err := e.db.CreateWebhook(context.Background(), h); err != nil {
		e.t.Fatal(err)
	}
	return h
}

// inbound records a message from contact: it queues a message.received
// delivery to every webhook of the line, in the same transaction.
func (e *hookEnv) inbound(contact, text string) storage.Message {
	e.t.Helper()
	res, err := e.db.RecordInbound(context.Background(), storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: e.line.ID, GUID: "iMessage;-;" + contact, Identifier: contact, Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: contact, Text: &text, SentAt: time.Now().UnixMilli()},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Message
}

// run starts a dispatcher with opts, what they leave unset as the default
// configuration has it; it is stopped when the test ends.
func (e *hookEnv) run(opts webhook.Options) {
	e.t.Helper()
	def := config.Default().Webhooks
	if opts.Schedule == nil {
		opts.Schedule = def.Schedule()
	}
	opts.Timeout = cmp.Or(opts.Timeout, def.Timeout.Duration)
	opts.DisableAfter = cmp.Or(opts.DisableAfter, def.DisableAfter.Duration)
	opts.Lanes = cmp.Or(opts.Lanes, def.Concurrency)
	d := webhook.New(e.db, textRenderer{}, opts, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("dispatcher Run: %v", err)
		}
	})
}

// attempts returns a webhook's recorded attempts, oldest first.
func (e *hookEnv) attempts(hookID string) []storage.Attempt {
	e.t.Helper()
	as, err := e.db.Attempts(context.Background(), storage.AttemptFilter{WebhookID: hookID, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Reverse(as)
	return as
}

// eventually polls cond until it holds, or fails the test after a deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
	}
}

// newReceiver starts an apitest.Receiver that checks each request's
// signature with a secret of its own (rc.Secret()) and answers as answer
// says (the status for the n-th request, from 1; nil answers 204).
func newReceiver(t *testing.T, tls bool, answer func(n int, w http.ResponseWriter, r *http.Request) int) *apitest.Receiver {
	rc := apitest.NewReceiver(t, tls, func(n int, w http.ResponseWriter, r *http.Request) int {
		status := http.StatusNoContent
		if answer != nil {
			status = answer(n, w, r)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "answer %d", n) // an excerpt goes into a failed attempt's record
		return 0
	})
	rc.SetSecret("whsec_" + strconv.FormatInt(time.Now().UnixNano(), 36))
	return rc
}

// loopback lets the dispatcher reach httptest's servers.
var loopback = webhook.Policy{AllowHTTP: true, AllowPrivateNetworks: true}

// An event reaches the receiver over TLS, signed with the webhook's secret,
// and the delivery and its attempt are recorded.
func TestDispatcherDeliversSigned(t *testing.T) {
	e := newHookEnv(t)
	rc := newReceiver(t, true, nil)
	pool := x509.NewCertPool()
	pool.AddCert(rc.Server.Certificate())
	hook := e.register(rc.Server.URL+"/hook", rc.Secret())
	m := metrics.New(e.db, quiet)
	e.run(webhook.Options{Policy: webhook.Policy{AllowPrivateNetworks: true}, RootCAs: pool, Metrics: m})
	msg := e.inbound(alice, "hello hook")

	eventually(t, "one request", func() bool { return len(rc.Requests()) == 1 })
	got := rc.Requests()[0]
	if got.Err != nil {
		t.Fatalf("signature: %v", got.Err)
	}
	if got.Event() != api.EventMessageReceived || got.Data()["text"] != "hello hook" || got.Data()["id"] != msg.ID ||
		got.Data()["line"] != mainLine || got.Header.Get(signature.HeaderDeliveryID) != got.DeliveryID() ||
		got.Header.Get(signature.HeaderTimestamp) != strconv.FormatInt(got.Timestamp(), 10) ||
		got.Header.Get("Content-Type") != "application/json" || got.Header.Get("User-Agent") != "Blueline-Webhooks/1" {
		t.Fatalf("request %s %v", got.Raw, got.Header)
	}
	// A request signed with another secret does not verify.
	if err := signature.Verify("whsec_other", got.Raw, got.Header.Get(signature.HeaderSignature), got.Header.Get(signature.HeaderTimestamp), time.Now()); err == nil {
		t.Fatal("the signature verifies with another secret")
	}

	var d storage.Delivery
	eventually(t, "the delivery recorded as succeeded", func() bool {
		d, _ = e.db.DeliveryByID(context.Background(), got.DeliveryID())
		return d.Status == storage.DeliverySucceeded
	})
	if d.Attempts != 1 || d.LastStatus != 204 || d.LastError != "" || d.WebhookID != hook.ID || d.CompletedAt == 0 {
		t.Fatalf("delivery %+v", d)
	}
	as := e.attempts(hook.ID)
	if len(as) != 1 || as[0].N != 1 || as[0].StatusCode != 204 || as[0].Error != "" || as[0].DeliveryID != d.ID {
		t.Fatalf("attempts %+v", as)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `blueline_webhook_attempts_total{outcome="success"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
}

// Failures and timeouts are retried on the schedule with the same delivery
// ID, each attempt signed afresh; every attempt is recorded, and a
// delivery can be sent again.
func TestDispatcherRetries(t *testing.T) {
	e := newHookEnv(t)
	// The third hangs past the timeout: an answer that late is no answer.
	rc := newReceiver(t, false, apitest.Answers(t, 500, 404, apitest.Hang))
	hook := e.register(rc.Server.URL+"/hook", rc.Secret())
	e.run(webhook.Options{Policy: loopback, Timeout: 300 * time.Millisecond, Schedule: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}})
	e.inbound(alice, "retry me")

	eventually(t, "four attempts recorded", func() bool { return len(e.attempts(hook.ID)) == 4 })
	got := rc.Requests()
	if len(got) != 4 {
		t.Fatalf("%d requests arrived, want 4", len(got))
	}
	id := got[0].DeliveryID()
	var stamps []string
	for i, g := range got {
		if g.Err != nil || g.DeliveryID() != id || g.Header.Get(signature.HeaderDeliveryID) != id || g.Data()["text"] != "retry me" {
			t.Fatalf("attempt %d: %v %s", i+1, g.Err, g.Raw)
		}
		stamps = append(stamps, g.Header.Get(signature.HeaderTimestamp))
	}
	if uniq := slices.Compact(slices.Clone(stamps)); len(uniq) != 4 {
		t.Errorf("retries were not signed afresh: timestamps %v", stamps)
	}
	as := e.attempts(hook.ID)
	for i, want := range []struct {
		status int
		err    string
	}{{500, "HTTP 500: answer 1"}, {404, "HTTP 404: answer 2"}, {0, "no answer within 300ms"}, {204, ""}} {
		if a := as[i]; a.N != i+1 || a.StatusCode != want.status || !strings.HasPrefix(a.Error, want.err) || (want.err == "") != (a.Error == "") {
			t.Errorf("attempt %d: %+v, want status %d, error %q", i+1, a, want.status, want.err)
		}
	}
	d, err := e.db.DeliveryByID(context.Background(), id)
	if err != nil || d.Status != storage.DeliverySucceeded || d.Attempts != 4 {
		t.Fatalf("delivery %+v %v", d, err)
	}
	// A success ends the failing run.
	if h, _ := e.db.WebhookByID(context.Background(), hook.ID); h.FailingSince != 0 || !h.IsActive {
		t.Fatalf("webhook %+v", h)
	}

	// Redelivery sends the same delivery again.
	if _, err := e.db.Redeliver(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the redelivery", func() bool { return len(rc.Requests()) == 5 })
	if g := rc.Requests()[4]; g.DeliveryID() != id || g.Err != nil {
		t.Fatalf("redelivery: %s (%v)", g.Raw, g.Err)
	}
}

// After the last retry of the schedule a delivery fails for good.
func TestDispatcherGivesUp(t *testing.T) {
	e := newHookEnv(t)
	rc := newReceiver(t, false, func(int, http.ResponseWriter, *http.Request) int { return 503 })
	hook := e.register(rc.Server.URL, rc.Secret())
	e.run(webhook.Options{Policy: loopback, Schedule: []time.Duration{5 * time.Millisecond, 5 * time.Millisecond}})
	e.inbound(alice, "nobody home")
	var d storage.Delivery
	eventually(t, "the delivery failed", func() bool {
		as := e.attempts(hook.ID)
		if len(as) == 0 {
			return false
		}
		d, _ = e.db.DeliveryByID(context.Background(), as[0].DeliveryID)
		return d.Status == storage.DeliveryFailed
	})
	if d.Attempts != 3 || d.LastStatus != 503 || d.CompletedAt == 0 {
		t.Fatalf("delivery %+v", d)
	}
	if n := len(rc.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	// Still active: it has not failed for DisableAfter (72 hours by default).
	if h, _ := e.db.WebhookByID(context.Background(), hook.ID); !h.IsActive || h.FailingSince == 0 {
		t.Fatalf("webhook %+v", h)
	}
}

// Redirects are not followed, and a webhook that has failed for
// DisableAfter becomes inactive and stops receiving. (Moved down from the
// end-to-end TestWebhookRedirectAndDisable.)
func TestDispatcherRedirectAndDisable(t *testing.T) {
	e := newHookEnv(t)
	target := newReceiver(t, false, nil)
	rc := newReceiver(t, false, func(n int, w http.ResponseWriter, r *http.Request) int {
		w.Header().Set("Location", target.Server.URL)
		return 307
	})
	hook := e.register(rc.Server.URL, rc.Secret())
	schedule := slices.Repeat([]time.Duration{20 * time.Millisecond}, 20)
	e.run(webhook.Options{Policy: loopback, Schedule: schedule, DisableAfter: 100 * time.Millisecond})
	e.inbound(alice, "where do you go")

	var h storage.Webhook
	eventually(t, "the webhook disabled", func() bool {
		h, _ = e.db.WebhookByID(context.Background(), hook.ID)
		return !h.IsActive
	})
	if h.DisabledAt == 0 || h.DisabledAt-h.FailingSince < 100 {
		t.Fatalf("webhook %+v", h)
	}
	if n := len(target.Requests()); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	as := e.attempts(hook.ID)
	if len(as) < 2 || as[0].StatusCode != 307 || !strings.Contains(as[0].Error, "redirect") || !strings.Contains(as[0].Error, target.Server.URL) {
		t.Fatalf("attempts %+v", as)
	}
	// Its pending delivery failed with the webhook.
	if d, _ := e.db.DeliveryByID(context.Background(), as[0].DeliveryID); d.Status != storage.DeliveryFailed {
		t.Fatalf("delivery of a disabled webhook %+v", d)
	}
	// A live webhook on the same line gets the next event; the inactive one not.
	n := len(rc.Requests())
	e.register(target.Server.URL, target.Secret())
	e.inbound(alice, "for the live one")
	eventually(t, "the live webhook's request", func() bool { return len(target.Requests()) == 1 })
	if g := target.Requests()[0]; g.Err != nil || g.Data()["text"] != "for the live one" {
		t.Fatalf("live webhook got %s (%v)", g.Raw, g.Err)
	}
	if m := len(rc.Requests()); m != n {
		t.Errorf("the inactive webhook got %d more requests", m-n)
	}
	if _, err := e.db.Redeliver(context.Background(), as[0].DeliveryID); err != storage.ErrWebhookInactive {
		t.Errorf("redeliver to an inactive webhook: %v", err)
	}
}

// A receiver that never answers delays nobody else. (Moved down from the
// end-to-end TestWebhookSlowReceiverIsolated.)
func TestDispatcherSlowReceiverIsolated(t *testing.T) {
	e := newHookEnv(t)
	stuck := make(chan struct{})
	slow := newReceiver(t, false, func(n int, w http.ResponseWriter, r *http.Request) int {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
		return 200
	})
	defer close(stuck)
	fast := newReceiver(t, false, nil)
	e.register(slow.Server.URL, slow.Secret())
	e.register(fast.Server.URL, fast.Secret())
	e.run(webhook.Options{Policy: loopback, Timeout: time.Minute})
	const n = 30
	for i := range n {
		e.inbound([]string{alice, bob, carol}[i%3], "msg "+strconv.Itoa(i))
	}
	eventually(t, "the fast receiver got every event", func() bool { return len(fast.Requests()) == n })
	// The slow one holds at most one request per lane (4 by default).
	if s := len(slow.Requests()); s > 4 {
		t.Errorf("the slow receiver has %d requests under way", s)
	}
	// Each chat's events reached the fast receiver in order.
	next := map[string]int{}
	for _, g := range fast.Requests() {
		i, _ := strconv.Atoi(strings.TrimPrefix(g.Data()["text"].(string), "msg "))
		who := i % 3
		if i/3 != next[strconv.Itoa(who)] {
			t.Fatalf("chat %d: got msg %d out of order", who, i)
		}
		next[strconv.Itoa(who)]++
	}
}

// A contact's message is timed from its date on the network to the
// receiver's 2xx answer: a failed attempt times nothing, its retry's
// success does.
func TestDispatcherTimesRowToWebhook(t *testing.T) {
	e := newHookEnv(t)
	rc := newReceiver(t, false, func(n int, _ http.ResponseWriter, _ *http.Request) int {
		return map[bool]int{true: http.StatusInternalServerError, false: http.StatusNoContent}[n == 1]
	})
	e.register(rc.Server.URL+"/hook", rc.Secret())
	m := metrics.New(e.db, quiet)
	e.run(webhook.Options{Policy: loopback, Metrics: m, Schedule: []time.Duration{time.Millisecond}})
	text := "written while the Mac slept"
	dated := time.Now().Add(-10 * time.Minute)
	if _, err := e.db.RecordInbound(context.Background(), storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: e.line.ID, GUID: "iMessage;-;" + alice, Identifier: alice, Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: alice, Text: &text, SentAt: dated.UnixMilli()},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two requests", func() bool { return len(rc.Requests()) == 2 })
	var q metrics.Quantiles
	eventually(t, "the success timed", func() bool {
		q = m.LineLatency(e.line.ID).Stages[metrics.RowToWebhook]
		return q.Count > 0
	})
	if q.Count != 1 || q.P50 < 10*time.Minute || q.P50 != q.P99 {
		t.Fatalf("row to webhook: %+v, want one of 10 minutes and more", q)
	}
}
