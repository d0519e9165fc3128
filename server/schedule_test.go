package server_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

func TestSendAtValidation(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hi")
	now := time.Now()
	base := map[string]any{"from": mainLine, "to": alice, "text": "later"}
	for _, c := range []struct {
		name   string
		sendAt any
	}{
		{"a string", strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)},
		{"a fraction", float64(now.Add(time.Hour).UnixMilli()) + 0.5},
		{"a boolean", true},
		{"seconds, not ms", now.Add(time.Hour).Unix()},
		{"an hour ago", now.Add(-time.Hour).UnixMilli()},
		{"31 days ahead", now.Add(31 * 24 * time.Hour).UnixMilli()},
		{"microseconds", now.UnixMicro()},
	} {
		r := e.call("POST", "/v1/messages", key, apitest.WithFields(base, "send_at", c.sendAt))
		if r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "send_at" {
			t.Errorf("send_at %s: %d %s", c.name, r.Status, r.Raw)
		}
	}
	// An exponent is not an integer, even when its value is one.
	r := e.call("POST", "/v1/messages", key, `{"from":"`+mainLine+`","to":"`+alice+`","text":"x","send_at":1.8e12}`)
	if r.Status != 400 || r.ErrParam() != "send_at" {
		t.Errorf("send_at with an exponent: %d %s", r.Status, r.Raw)
	}
	// Accepted: a minute ago (clock skew: at once), and 29 days ahead.
	for _, at := range []int64{now.Add(-time.Minute).UnixMilli(), now.Add(29 * 24 * time.Hour).UnixMilli()} {
		item := e.send(key, apitest.WithFields(base, "send_at", at))
		if item["status"] != "pending" || item["send_at"] != float64(at) {
			t.Errorf("send_at %d: %v", at, item)
		}
		got := e.call("GET", "/v1/outbox?id="+item["id"].(string), key, nil)
		if got.Body["send_at"] != float64(at) {
			t.Errorf("GET /v1/outbox: send_at %v, want %d", got.Body["send_at"], at)
		}
		if p := item["payload"].(map[string]any); p["send_at"] != float64(at) {
			t.Errorf("payload %v lacks send_at", p)
		}
	}
	// Not scheduled: send_at is null.
	if item := e.send(key, base); item["send_at"] != nil {
		t.Errorf("unscheduled send_at: %v", item["send_at"])
	}
}

func TestScheduledAudioAndIdempotency(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hi")
	at := time.Now().Add(time.Hour).UnixMilli()
	file := e.call("POST", "/v1/files", key, "RIFF", "Content-Type", "audio/wav")
	for _, path := range []string{"/v1/audio-messages", "/v1/voice-notes"} {
		field := map[string]string{"/v1/audio-messages": "audio_message", "/v1/voice-notes": "voice_note"}[path]
		r := e.call("POST", path, key, map[string]any{"from": mainLine, "to": alice, field: file.Body["id"], "send_at": at})
		if r.Status != 201 || r.Body["send_at"] != float64(at) || r.Body["status"] != "pending" {
			t.Errorf("%s: %d %s", path, r.Status, r.Raw)
		}
		r = e.call("POST", path, key, map[string]any{"from": mainLine, "to": alice, field: file.Body["id"], "send_at": "soon"})
		if r.Status != 400 || r.ErrParam() != "send_at" {
			t.Errorf("%s with a bad send_at: %d %s", path, r.Status, r.Raw)
		}
	}
	// The Idempotency-Key stands for the request with its send_at.
	body := map[string]any{"from": mainLine, "to": alice, "text": "once", "send_at": at}
	first := e.send(key, body, "Idempotency-Key", "sched-1")
	again := e.call("POST", "/v1/messages", key, body, "Idempotency-Key", "sched-1")
	if again.Status != 201 || again.Body["id"] != first["id"] || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %s", again.Status, again.Raw)
	}
	other := e.call("POST", "/v1/messages", key, apitest.WithFields(body, "send_at", at+1000), "Idempotency-Key", "sched-1")
	if other.Status != 400 || other.ErrParam() != "Idempotency-Key" {
		t.Errorf("same key, another send_at: %d %s", other.Status, other.Raw)
	}
}

func TestCancelOutboxItem(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hi")
	e.inbound(smsLine, bob, "hi")
	item := e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "later", "send_at": time.Now().Add(time.Hour).UnixMilli()})
	id := item["id"].(string)

	// Only keys that may write messages on the item's line.
	readOnly := e.key(keyOpts{Scopes: []string{"outbox:read"}})
	if r := e.call("POST", "/v1/outbox/cancel", readOnly, map[string]any{"id": id}); r.Status != 403 || r.ErrCode() != "insufficient_scope" {
		t.Errorf("without messages:write: %d %s", r.Status, r.Raw)
	}
	smsOnly := e.key(keyOpts{Lines: []string{smsLine}})
	if r := e.call("POST", "/v1/outbox/cancel", smsOnly, map[string]any{"id": id}); r.Status != 404 || r.ErrCode() != "outbox_item_not_found" || r.ErrParam() != "id" {
		t.Errorf("another line's item: %d %s", r.Status, r.Raw)
	}
	for _, c := range []struct {
		body       any
		code, want string
	}{
		{map[string]any{}, "missing_required_parameter", "id"},
		{map[string]any{"id": "msg_1"}, "invalid_parameter_value", "id"},
		{map[string]any{"id": 42}, "invalid_parameter_value", "id"},
	} {
		if r := e.call("POST", "/v1/outbox/cancel", key, c.body); r.Status != 400 || r.ErrCode() != c.code || r.ErrParam() != c.want {
			t.Errorf("cancel %v: %d %s", c.body, r.Status, r.Raw)
		}
	}
	if r := e.call("POST", "/v1/outbox/cancel", key, map[string]any{"id": "obx_nothing"}); r.Status != 404 || r.ErrCode() != "outbox_item_not_found" {
		t.Errorf("unknown item: %d %s", r.Status, r.Raw)
	}

	r := e.call("POST", "/v1/outbox/cancel", key, map[string]any{"id": id})
	if r.Status != 200 || r.Body["status"] != "failed" || r.Body["error"] != "canceled" || r.Body["completed_at"] == nil || r.Body["id"] != id {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	if got := e.call("GET", "/v1/outbox?id="+id, key, nil); got.Body["status"] != "failed" || got.Body["error"] != "canceled" {
		t.Errorf("after cancel: %s", got.Raw)
	}
	again := e.call("POST", "/v1/outbox/cancel", key, map[string]any{"id": id})
	if again.Status != 409 || again.ErrCode() != "outbox_item_not_pending" || again.ErrParam() != "id" {
		t.Errorf("cancel twice: %d %s", again.Status, again.Raw)
	}
	apitest.CheckErrorType(t, "cancel twice", again)
	// An item being sent cannot be cancelled (nothing delivers here: claim
	// it as the worker would).
	now := e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "now"})
	if _, _, err := e.db.ClaimDue(t.Context(), 1<<62, 10); err != nil {
		t.Fatal(err)
	}
	if r := e.call("POST", "/v1/outbox/cancel", key, map[string]any{"id": now["id"]}); r.Status != 409 || r.ErrCode() != "outbox_item_not_pending" {
		t.Errorf("cancel a claimed item: %d %s", r.Status, r.Raw)
	}
}

// guardOn is the options with the guard of each line given, none on the
// others.
func guardOn(policies map[string]server.GuardPolicy) server.Options {
	opts := defaultOptions()
	opts.Guard = func(l storage.Line) server.GuardPolicy { return policies[l.Handle] }
	return opts
}

// inboundAt records a message a contact sent to line at a given time.
func (e *apiEnv) inboundAt(line, from, text string, at time.Time) {
	e.t.Helper()
	_, err := e.recv.Record(context.Background(), bridge.Inbound{Line: line, Service: e.lines[line].Service,
		Chat: sim.OneToOne(e.lines[line].Service, from), GUID: sim.NewGUID(), Sender: from, Text: &text, SentAt: at})
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestGuardCapsRefuse(t *testing.T) {
	e := newAPI(t, guardOn(map[string]server.GuardPolicy{
		mainLine:  {Enabled: true, Pace: time.Second, MaxUnanswered: 2, ColdAfter: 24 * time.Hour},
		smsLine:   {Enabled: true, MaxRatio: 3, ColdAfter: 24 * time.Hour},
		plainLine: {Enabled: true, MaxColdContacts: 1, ColdAfter: time.Hour},
	}))
	key := e.key(keyOpts{})
	send := func(line, to string) response {
		t.Helper()
		return e.call("POST", "/v1/messages", key, map[string]any{"from": line, "to": to, "text": "hello"})
	}
	mustSend := func(line, to string, n int) {
		t.Helper()
		for range n {
			if r := send(line, to); r.Status != 201 {
				t.Fatalf("send from %s to %s: %d %s", line, to, r.Status, r.Raw)
			}
		}
	}

	// Unanswered: two, then refused (no time known) until the contact
	// answers. Audio messages count as messages.
	e.inbound(mainLine, alice, "hi")
	mustSend(mainLine, alice, 2)
	r := send(mainLine, alice)
	if r.Status != 429 || r.ErrCode() != "guard_unanswered_limit" || r.ErrParam() != "to" || r.Header.Get("Retry-After") != "" {
		t.Errorf("third unanswered: %d %v %s", r.Status, r.Header, r.Raw)
	}
	apitest.CheckErrorType(t, "unanswered", r)
	file := e.call("POST", "/v1/files", key, "RIFF", "Content-Type", "audio/wav")
	if r := e.call("POST", "/v1/audio-messages", key, map[string]any{"from": mainLine, "to": alice, "audio_message": file.Body["id"]}); r.ErrCode() != "guard_unanswered_limit" {
		t.Errorf("audio over the unanswered cap: %d %s", r.Status, r.Raw)
	}
	e.inbound(mainLine, alice, "sorry, was out")
	mustSend(mainLine, alice, 1)

	// Ratio: one received, so three a day; then refused until midnight
	// UTC (or more messages arrive).
	e.inbound(smsLine, bob, "hi")
	mustSend(smsLine, bob, 3)
	r = send(smsLine, bob)
	retry, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	untilMidnight := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour))
	if r.Status != 429 || r.ErrCode() != "guard_ratio_limit" || retry < 1 || time.Duration(retry)*time.Second > untilMidnight+2*time.Second {
		t.Errorf("over the ratio: %d Retry-After %q %s", r.Status, r.Header.Get("Retry-After"), r.Raw)
	}
	e.inbound(smsLine, bob, "more")
	mustSend(smsLine, bob, 3)

	// Cold contacts: carol and dave last wrote two hours ago (cold after
	// one); one a day, as often as need be. Bob, who just wrote, is warm.
	const dave = "+15551110004"
	old := time.Now().Add(-2 * time.Hour)
	e.inboundAt(plainLine, carol, "long ago", old)
	e.inboundAt(plainLine, dave, "long ago", old)
	e.inbound(plainLine, bob, "hi")
	mustSend(plainLine, carol, 2)
	mustSend(plainLine, bob, 2)
	r = send(plainLine, dave)
	if r.Status != 429 || r.ErrCode() != "guard_cold_contacts_limit" || r.Header.Get("Retry-After") == "" {
		t.Errorf("second cold contact: %d %s", r.Status, r.Raw)
	}
	// Unguarded (the sandbox line, here), nothing is refused; refused
	// sends are not counted.
	lines := e.call("GET", "/v1/lines", key, nil)
	plainReceived := 3 // carol's and dave's count if they were today (UTC)
	if old.UTC().Format(time.DateOnly) != time.Now().UTC().Format(time.DateOnly) {
		plainReceived = 1
	}
	want := map[string]string{
		mainLine:  "true 1000 3 2 0 2 0 0 86400000",
		smsLine:   "true 0 6 2 0 0 3 0 86400000",
		plainLine: fmt.Sprintf("true 0 4 %d 1 0 0 1 3600000", plainReceived),
	}
	for _, l := range lines.Data() {
		g := l["guard"].(map[string]any)
		today, limits := g["today"].(map[string]any), g["limits"].(map[string]any)
		got := fmt.Sprint(g["enabled"])
		for _, v := range []any{g["pace_ms"], today["sent"], today["received"], today["cold_contacts"],
			limits["max_unanswered"], limits["max_ratio"], limits["max_cold_contacts"], limits["cold_after_ms"]} {
			got += fmt.Sprintf(" %d", int64(v.(float64)))
		}
		w, ok := want[l["handle"].(string)]
		if !ok {
			w = "false 0 0 0 0 0 0 0 0"
		}
		if got != w {
			t.Errorf("%s's guard: %s, want %s (%v)", l["handle"], got, w, g)
		}
		if today["resets_at"].(float64) != float64(time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour).UnixMilli()) {
			t.Errorf("resets_at %v", today["resets_at"])
		}
	}
}
