package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

// clock is a settable clock for the server (Options.Now).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// sentByLine records a message the line sent (from another of its owner's
// devices, as the network reports it) at sentAt.
func (e *apiEnv) sentByLine(line, to, text string, sentAt time.Time) storage.Message {
	e.t.Helper()
	res, err := e.recv.Record(context.Background(), bridge.Inbound{Line: line, Service: e.lines[line].Service, Chat: sim.OneToOne(e.lines[line].Service, to),
		GUID: sim.NewGUID(), Sender: line, IsFromMe: true, Text: &text, SentAt: sentAt})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Message
}

// Edits and unsends are checked against Messages' limits when accepted:
// the windows against the message's sent_at by the server's clock, the
// number of edits in the transaction that stores one.
func TestEditAndUnsendLimits(t *testing.T) {
	sent := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: sent}
	opts := defaultOptions()
	opts.Now = clk.Now
	e := newAPI(t, opts)
	key := e.key(keyOpts{})
	theirs := e.inbound(mainLine, alice, "hi")
	m := e.sentByLine(mainLine, alice, "see you at 5", sent)
	edit := map[string]any{"from": mainLine, "message_id": m.ID, "text": "see you at 6"}
	unsend := map[string]any{"from": mainLine, "message_id": m.ID}

	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
		param      string
	}{
		{"edit, missing text", "/v1/edits", apitest.WithFields(edit, "text", nil), 400, "missing_required_parameter", "text"},
		{"edit, missing message", "/v1/edits", apitest.WithFields(edit, "message_id", nil), 400, "missing_required_parameter", "message_id"},
		{"edit, missing from", "/v1/edits", apitest.WithFields(edit, "from", nil), 400, "missing_required_parameter", "from"},
		{"edit, a contact's message", "/v1/edits", apitest.WithFields(edit, "message_id", theirs.ID), 400, "invalid_parameter_value", "message_id"},
		{"edit, unknown message", "/v1/edits", apitest.WithFields(edit, "message_id", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "message_id"},
		{"edit, another line's message", "/v1/edits", apitest.WithFields(edit, "from", sandboxLine), 403, "sandbox_requires_owner", ""},
		{"edit, no advanced features", "/v1/edits", apitest.WithFields(edit, "from", plainLine), 400, "advanced_features_required", "from"},
		{"edit, SMS line", "/v1/edits", apitest.WithFields(edit, "from", smsLine), 400, "advanced_features_required", "from"},
		{"unsend, missing message", "/v1/unsends", apitest.WithFields(unsend, "message_id", nil), 400, "missing_required_parameter", "message_id"},
		{"unsend, a contact's message", "/v1/unsends", apitest.WithFields(unsend, "message_id", theirs.GUID), 400, "invalid_parameter_value", "message_id"},
	} {
		r := e.call("POST", c.path, key, c.body)
		if r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param, r.Raw)
		}
		apitest.CheckErrorType(t, c.name, r)
	}

	// Unsend: up to 2 minutes after sent_at, not a millisecond more.
	clk.set(sent.Add(2*time.Minute + time.Millisecond))
	if r := e.call("POST", "/v1/unsends", key, unsend); r.Status != 400 || r.ErrCode() != "unsend_window_expired" || r.ErrParam() != "message_id" {
		t.Fatalf("unsend after 2 minutes: %d %s", r.Status, r.Raw)
	}
	clk.set(sent.Add(2 * time.Minute))
	if r := e.call("POST", "/v1/unsends", key, unsend); r.Status != 201 || r.Body["status"] != "pending" || r.Body["chat_id"] != m.ChatID {
		t.Fatalf("unsend at 2 minutes: %d %s", r.Status, r.Raw)
	}

	// Edit: up to 15 minutes, at most 5; the sixth is refused even while
	// the five are pending.
	clk.set(sent.Add(15*time.Minute + time.Millisecond))
	if r := e.call("POST", "/v1/edits", key, edit); r.Status != 400 || r.ErrCode() != "edit_window_expired" || r.ErrParam() != "message_id" {
		t.Fatalf("edit after 15 minutes: %d %s", r.Status, r.Raw)
	}
	clk.set(sent.Add(15 * time.Minute))
	var wg sync.WaitGroup
	statuses := make(chan int, 8)
	for range 8 {
		wg.Go(func() { statuses <- e.call("POST", "/v1/edits", key, edit).Status })
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[201] != 5 || counts[400] != 3 {
		t.Fatalf("8 concurrent edits answered %v, want 5 accepted and 3 refused", counts)
	}
	r := e.call("POST", "/v1/edits", key, edit)
	if r.Status != 400 || r.ErrCode() != "edit_limit_reached" || r.ErrParam() != "message_id" {
		t.Fatalf("sixth edit: %d %s", r.Status, r.Raw)
	}
	apitest.CheckErrorType(t, "sixth edit", r)
	// An Idempotency-Key replay of an accepted edit is not a sixth.
	other := e.sentByLine(mainLine, alice, "later", sent.Add(15*time.Minute))
	again := apitest.WithFields(edit, "message_id", other.ID)
	first := e.call("POST", "/v1/edits", key, again, "Idempotency-Key", "k1")
	replay := e.call("POST", "/v1/edits", key, again, "Idempotency-Key", "k1")
	if first.Status != 201 || replay.Status != 201 || replay.Body["id"] != first.Body["id"] {
		t.Fatalf("replayed edit: %d %s, then %d %s", first.Status, first.Raw, replay.Status, replay.Raw)
	}
	if got, _ := e.db.MessageByID(context.Background(), other.ID); got.EditRequests != 1 {
		t.Fatalf("a replay counted: %d edits", got.EditRequests)
	}
}

// Emoji tapbacks: one emoji, as Unicode composes them.
func TestEmojiTapbackValidation(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	in := e.inbound(mainLine, alice, "hi")
	ok := map[string]any{"from": mainLine, "to": alice, "message_id": in.ID, "type": "emoji"}
	for _, emoji := range []string{"🎉", "❤️", "❤", "👍🏽", "🇯🇵", "1️⃣", "#⃣", "👩‍👩‍👧‍👦", "🧑🏿‍🚀", "🏳️‍🌈", "🏴‍☠️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "©️", "🫠"} {
		if r := e.call("POST", "/v1/reactions", key, apitest.WithFields(ok, "emoji", emoji)); r.Status != 201 {
			t.Errorf("emoji %q (%+q): %d %s", emoji, emoji, r.Status, r.Raw)
		}
	}
	for _, emoji := range []string{"a", "🎉🎉", "🇯", "🇯🇵🇫", "1", "12⃣", "👍 ", " 👍", "🏽", "👩‍", "‍👩", "👩‍‍👧", "🎉a", "\u200d", "\ufe0f", "🏴󠁧󠁢"} {
		r := e.call("POST", "/v1/reactions", key, apitest.WithFields(ok, "emoji", emoji))
		if r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "emoji" {
			t.Errorf("emoji %+q: %d %s", emoji, r.Status, r.Raw)
		}
	}
	if r := e.call("POST", "/v1/reactions", key, apitest.WithFields(ok, "emoji", nil)); r.Status != 400 || r.ErrCode() != "missing_required_parameter" || r.ErrParam() != "emoji" {
		t.Errorf("no emoji: %d %s", r.Status, r.Raw)
	}
	// The reference CLI's `react MSG 🎉` sends the emoji as the type: the
	// emoji tapback it means, with or without the same emoji in emoji.
	for _, body := range []map[string]any{apitest.WithFields(ok, "type", "👍🏽"), apitest.WithFields(ok, "type", "👍🏽", "emoji", "👍🏽")} {
		r := e.call("POST", "/v1/reactions", key, body)
		if r.Status != 201 {
			t.Fatalf("type %+v: %d %s", body, r.Status, r.Raw)
		}
		item, err := e.db.OutboxItemByID(context.Background(), r.Body["id"].(string))
		if err != nil || item.ReactionType != "emoji" || item.ReactionEmoji != "👍🏽" {
			t.Errorf("type 👍🏽 queued %q %q (%v), want emoji 👍🏽", item.ReactionType, item.ReactionEmoji, err)
		}
	}
	for _, c := range []struct {
		typ   string
		emoji any // nil: absent
		param string
	}{{"🎉🎉", nil, "type"}, {"a", nil, "type"}, {"Love", nil, "type"}, {"🏽", nil, "type"}, {" 🎉", nil, "type"}, {"🎉", "👍", "emoji"}} {
		r := e.call("POST", "/v1/reactions", key, apitest.WithFields(ok, "type", c.typ, "emoji", c.emoji))
		if r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != c.param {
			t.Errorf("type %+q emoji %v: %d %s", c.typ, c.emoji, r.Status, r.Raw)
		}
		apitest.CheckErrorType(t, "type "+c.typ, r)
	}
}

// Groups: contact-first for every member, and changes only to groups.
func TestGroupValidation(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hi")
	e.inbound(mainLine, bob, "hi")
	e.inbound(sandboxLine, alice, "hi")
	group := sim.NewGroup("imessage", "Book club", []string{alice, bob})
	g := e.inbound(mainLine, alice, "in the group", group)
	create := map[string]any{"from": mainLine, "participants": []string{alice, bob}, "text": "hello"}
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
		param      string
	}{
		{"no participants", "/v1/groups", apitest.WithFields(create, "participants", nil), 400, "missing_required_parameter", "participants"},
		{"one participant", "/v1/groups", apitest.WithFields(create, "participants", []string{alice}), 400, "invalid_parameter_value", "participants"},
		{"not a handle", "/v1/groups", apitest.WithFields(create, "participants", []string{alice, "bob"}), 400, "invalid_parameter_value", "participants"},
		{"participants not strings", "/v1/groups", apitest.WithFields(create, "participants", []any{alice, 2}), 400, "invalid_parameter_value", "participants"},
		{"the line itself", "/v1/groups", apitest.WithFields(create, "participants", []string{alice, mainLine}), 400, "invalid_parameter_value", "participants"},
		{"carol never wrote", "/v1/groups", apitest.WithFields(create, "participants", []string{alice, carol}), 403, "contact_has_not_messaged", "participants"},
		{"no text", "/v1/groups", apitest.WithFields(create, "text", nil), 400, "missing_required_parameter", "text"},
		{"no advanced features", "/v1/groups", apitest.WithFields(create, "from", plainLine), 400, "advanced_features_required", "from"},
		{"rename a one-to-one chat", "/v1/groups/rename", map[string]any{"from": mainLine, "to": alice, "name": "x"}, 400, "invalid_parameter_value", "to"},
		{"rename without a name", "/v1/groups/rename", map[string]any{"from": mainLine, "to": g.ChatID}, 400, "missing_required_parameter", "name"},
		{"rename an unknown chat", "/v1/groups/rename", map[string]any{"from": mainLine, "to": "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa", "name": "x"}, 404, "chat_not_found", "to"},
		{"add carol", "/v1/groups/participants", map[string]any{"from": mainLine, "to": g.ChatID, "add": carol}, 403, "contact_has_not_messaged", "add"},
		{"remove a stranger", "/v1/groups/participants", map[string]any{"from": mainLine, "to": g.ChatID, "remove": carol}, 400, "invalid_parameter_value", "remove"},
		{"leave a one-to-one chat", "/v1/groups/leave", map[string]any{"from": mainLine, "to": alice}, 400, "invalid_parameter_value", "to"},
	} {
		r := e.call("POST", c.path, key, c.body)
		if r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param, r.Raw)
		}
		apitest.CheckErrorType(t, c.name, r)
	}
	r := e.call("POST", "/v1/groups", key, apitest.WithFields(create, "participants", []string{alice, "+1 (555) 111-0002", bob}))
	if r.Status != 201 || r.Body["chat_id"] != nil {
		t.Fatalf("POST /v1/groups: %d %s", r.Status, r.Raw)
	}
	item, err := e.db.OutboxItemByID(context.Background(), r.Body["id"].(string))
	if err != nil || item.Kind != storage.KindGroupCreate || len(item.Participants) != 2 {
		t.Fatalf("group item %+v: %v", item, err)
	}
	owner := e.key(keyOpts{Owner: "ann"})
	if r := e.call("POST", "/v1/groups", owner, apitest.WithFields(create, "from", sandboxLine)); r.Status != 400 || r.ErrCode() != "advanced_features_required" {
		t.Fatalf("group on the sandbox line: %d %s", r.Status, r.Raw)
	}
}

// Availability answers are kept for the TTL, by the server's clock.
func TestAvailabilityIsKept(t *testing.T) {
	start := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: start}
	asked := 0
	answer, fail := true, false
	opts := defaultOptions()
	opts.Now = clk.Now
	opts.Availability = func(ctx context.Context, l storage.Line, h string) (bool, error) {
		asked++
		if fail {
			return false, errors.New("helper timed out")
		}
		return answer, nil
	}
	e := newAPI(t, opts)
	key := e.key(keyOpts{})
	ask := func() apitest.Response {
		return e.call("GET", "/v1/availability?from="+mainLine+"&handle=%2B1%20555%20111%200001", key, nil)
	}
	if r := ask(); r.Status != 200 || r.Body["imessage"] != true || r.Body["handle"] != alice || r.Body["checked_at"] != float64(start.UnixMilli()) {
		t.Fatalf("first: %d %s", r.Status, r.Raw)
	}
	answer = false
	clk.set(start.Add(time.Hour - time.Millisecond))
	if r := ask(); r.Body["imessage"] != true || asked != 1 {
		t.Fatalf("within the hour: asked %d times: %s", asked, r.Raw)
	}
	clk.set(start.Add(time.Hour))
	if r := ask(); r.Body["imessage"] != false || asked != 2 || r.Body["checked_at"] != float64(start.Add(time.Hour).UnixMilli()) {
		t.Fatalf("after the hour: asked %d times: %s", asked, r.Raw)
	}
	fail = true
	clk.set(start.Add(3 * time.Hour))
	if r := ask(); r.Status != 503 || r.ErrCode() != "network_unavailable" {
		t.Fatalf("network failing: %d %s", r.Status, r.Raw)
	}
	readOnly := e.key(keyOpts{Scopes: []string{"lines:read"}})
	if r := e.call("GET", "/v1/availability?from="+mainLine+"&handle="+bob, readOnly, nil); r.Status != 403 || r.ErrCode() != "insufficient_scope" {
		t.Fatalf("without messages:read: %d %s", r.Status, r.Raw)
	}
	for _, q := range []string{"handle=" + bob, "from=" + mainLine + "&handle=bob", "from=" + mainLine + "&handle=%2B15550000001"} {
		if r := e.call("GET", "/v1/availability?"+q, key, nil); r.Status != 400 {
			t.Errorf("%s: %d %s", q, r.Status, r.Raw)
		}
	}
}

// Capabilities follow what the line's bridge says.
func TestCapabilitiesFromTheBridge(t *testing.T) {
	opts := defaultOptions()
	opts.Capabilities = func(l storage.Line) map[string]string {
		if l.Handle != mainLine {
			return nil
		}
		return map[string]string{"edit": "the private-API helper is not connected", "groups": "chat.db is not readable"}
	}
	e := newAPI(t, opts)
	key := e.key(keyOpts{})
	r := e.call("GET", "/v1/lines", key, nil)
	for _, l := range r.Data() {
		if l["handle"] != mainLine {
			continue
		}
		caps := l["capabilities"].(map[string]any)
		if len(caps) != len(server.Features) {
			t.Fatalf("capabilities %v", caps)
		}
		for f, c := range caps {
			c := c.(map[string]any)
			want := map[string]any{"available": true, "reason": nil}
			switch f {
			case "edit":
				want = map[string]any{"available": false, "reason": "the private-API helper is not connected"}
			case "groups":
				want = map[string]any{"available": false, "reason": "chat.db is not readable"}
			}
			if c["available"] != want["available"] || c["reason"] != want["reason"] {
				t.Errorf("%s: %v, want %v", f, c, want)
			}
		}
	}
	e.inbound(mainLine, alice, "hi")
	m := e.sentByLine(mainLine, alice, "x", time.Now())
	if r := e.call("POST", "/v1/edits", key, map[string]any{"from": mainLine, "message_id": m.ID, "text": "y"}); r.Status != 400 ||
		r.ErrCode() != "advanced_features_required" {
		t.Fatalf("edit without the capability: %d %s", r.Status, r.Raw)
	}
}
