package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// The simulated network produces every change the Messages bridge reads
// from chat.db: edits, unsends, delivery and reading, group changes, and
// emoji and sticker tapbacks.

// lineMessage is the message id (msg_…) on the main line, as GET
// /v1/messages lists it in the chat with to.
func (td *testDaemon) lineMessage(key, to, id string) map[string]any {
	td.t.Helper()
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+to+"&limit=100", key, nil).Data() {
		if m["id"] == id {
			return m
		}
	}
	td.t.Fatalf("no message %s with %s", id, to)
	return nil
}

// sentMessage sends text from the main line to a contact and returns the
// message stored.
func (td *testDaemon) sentMessage(key, to, text string) map[string]any {
	td.t.Helper()
	obx := td.send(key, map[string]any{"from": mainLine, "to": to, "text": text})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		td.t.Fatalf("send %q: %v", text, item)
	}
	m := td.call("GET", "/v1/messages?from="+mainLine+"&to="+to+"&limit=1", key, nil).Data()[0]
	if m["outbox_id"] != obx["id"] || m["text"] != text {
		td.t.Fatalf("latest message after sending %q: %v", text, m)
	}
	return m
}

// millisWithin reports whether v is a Unix ms timestamp from from to to.
func millisWithin(v any, from, to time.Time) bool {
	ms, ok := v.(float64)
	return ok && ms >= millis(from) && ms <= millis(to)
}

// isPrinted matches event data identical to what a sim command printed.
func isPrinted(printed map[string]any) func(map[string]any) bool {
	return func(d map[string]any) bool { return reflect.DeepEqual(d, printed) }
}

func TestSimChanges(t *testing.T) {
	all, received := newReceiver(t, nil), newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, all, ""))
	key := td.key()
	td.register(key, mainLine, all, "message.received", "message.edited", "message.unsent", "message.delivered",
		"receipt.read", "chat.updated", "reaction.added")
	td.register(key, mainLine, received, "message.received")
	ev := newEventLog(t, all)
	withoutLine := func(d map[string]any) map[string]any { return apitest.WithFields(d, "line_handle", nil) }

	// An edit, twice: the message keeps its ID and takes the latest text.
	in := td.inbound(mainLine, alice, "see you at 5")
	id, guid := in["id"].(string), in["guid"].(string)
	ev.next("message.received", guidIs(guid))
	before := time.Now()
	edited := td.simJSON("edit", "--line", mainLine, "--from", alice, "--message", id, "--text", "see you at 6")
	if edited["id"] != id || edited["text"] != "see you at 6" || !millisWithin(edited["edited_at"], before, time.Now()) || edited["unsent_at"] != nil {
		t.Fatalf("sim edit printed %v", edited)
	}
	// The event is the message as printed, with the line and what wakes an agent.
	if d := ev.next("message.edited", guidIs(guid)); !reflect.DeepEqual(apitest.WithFields(withoutLine(d), "arrival", nil, "filter", nil, "sender_verified", nil), edited) ||
		d["line_handle"] != mainLine || d["arrival"] != "live" || d["filter"] != nil || d["sender_verified"] != true {
		t.Fatalf("message.edited %v, printed %v", d, edited)
	}
	again := td.simJSON("edit", "--line", mainLine, "--from", alice, "--message", guid, "--text", "see you at 7")
	if again["text"] != "see you at 7" || again["edited_at"].(float64) <= edited["edited_at"].(float64) {
		t.Fatalf("second edit printed %v after %v", again, edited)
	}
	ev.next("message.edited", fieldIs("text", "see you at 7"))
	if m := td.lineMessage(key, alice, id); m["text"] != "see you at 7" || m["edited_at"] != again["edited_at"] {
		t.Fatalf("edited message over HTTP: %v", m)
	}

	// An unsend, of a message with a photo: no text, no attachments.
	photo := filepath.Join(t.TempDir(), "oops.jpg")
	writeFile(t, photo, "\xff\xd8\xff\xe0 not much of a picture")
	oops := td.inbound(mainLine, alice, "oops", "--attach", photo)
	if len(oops["attachments"].([]any)) != 1 {
		t.Fatalf("message with a photo: %v", oops)
	}
	ev.next("message.received", guidIs(oops["guid"].(string)))
	before = time.Now()
	unsent := td.simJSON("unsend", "--line", mainLine, "--from", alice, "--message", oops["id"].(string))
	if unsent["id"] != oops["id"] || unsent["text"] != nil || len(unsent["attachments"].([]any)) != 0 || !millisWithin(unsent["unsent_at"], before, time.Now()) {
		t.Fatalf("sim unsend printed %v", unsent)
	}
	d := ev.next("message.unsent", guidIs(oops["guid"].(string)))
	if d["text"] != nil || d["attachments"] == nil || len(d["attachments"].([]any)) != 0 || d["unsent_at"] != unsent["unsent_at"] {
		t.Fatalf("message.unsent: %v", d)
	}
	if m := td.lineMessage(key, alice, oops["id"].(string)); m["text"] != nil || len(m["attachments"].([]any)) != 0 || m["unsent_at"] != unsent["unsent_at"] {
		t.Fatalf("unsent message over HTTP: %v", m)
	}

	// Delivered only, then read: message.delivered, then receipt.read.
	mine := td.sentMessage(key, alice, "on my way")
	before = time.Now()
	delivered := td.simJSON("read", "--line", mainLine, "--from", alice, "--delivered-only")
	if delivered["id"] != mine["id"] || !millisWithin(delivered["delivered_at"], before, time.Now()) || delivered["read_at"] != nil {
		t.Fatalf("sim read --delivered-only printed %v", delivered)
	}
	d = ev.next("message.delivered", guidIs(mine["guid"].(string)))
	if d["delivered_at"] != delivered["delivered_at"] || d["read_at"] != nil || d["is_from_me"] != true || d["outbox_id"] != mine["outbox_id"] {
		t.Fatalf("message.delivered: %v", d)
	}
	read := td.simJSON("read", "--line", mainLine, "--from", alice, "--message", mine["id"].(string))
	if read["id"] != mine["id"] || read["delivered_at"] != delivered["delivered_at"] || !millisWithin(read["read_at"], before, time.Now()) {
		t.Fatalf("sim read printed %v", read)
	}
	rcpt := ev.next("receipt.read", fieldIs("last_read_at", read["read_at"]))
	if rcpt["handle"] != alice || rcpt["chat_id"] != mine["chat_id"] || rcpt["line_handle"] != mainLine || rcpt["id"] == nil {
		t.Fatalf("receipt.read: %v", rcpt)
	}
	// By default the line's latest message is read, delivered on the way.
	latest := td.sentMessage(key, alice, "here")
	both := td.simJSON("read", "--line", mainLine, "--from", alice)
	if both["id"] != latest["id"] || !isTimestamp(both["delivered_at"]) || both["read_at"] != both["delivered_at"] {
		t.Fatalf("sim read of the latest printed %v", both)
	}
	ev.next("message.delivered", guidIs(latest["guid"].(string)))
	if r := ev.next("receipt.read", fieldIs("last_read_at", both["read_at"])); r["id"] != rcpt["id"] {
		t.Fatalf("the contact's receipt moved forward as another: %v, then %v", rcpt, r)
	}
	if m := td.lineMessage(key, alice, mine["id"].(string)); m["delivered_at"] != read["delivered_at"] || m["read_at"] != read["read_at"] {
		t.Fatalf("read message over HTTP: %v", m)
	}
	var receipt map[string]any
	for _, r := range td.listAll(key, "/v1/receipts?from="+mainLine+"&to="+alice) {
		if r["handle"] == alice {
			receipt = r
		}
	}
	if receipt["id"] != rcpt["id"] || receipt["last_read_at"] != both["read_at"] || receipt["chat_id"] != mine["chat_id"] {
		t.Fatalf("receipts: alice's is %v", receipt)
	}

	// Group changes: each prints what chat.updated carries.
	g := td.inbound(mainLine, bob, "climbing?", "--group", "Climbers", "--participants", bob+","+carol)
	ev.next("message.received", guidIs(g["guid"].(string)))
	chatID := g["chat_id"].(string)
	for _, c := range []struct {
		by           string
		change       []string
		action       string
		participant  any
		name         any
		participants []any
		chatName     any
	}{
		{bob, []string{"--add", alice}, "participant_added", alice, nil, []any{bob, carol, alice}, "Climbers"},
		{mainLine, []string{"--rename", "Crag crew"}, "renamed", nil, "Crag crew", []any{bob, carol, alice}, "Crag crew"},
		{bob, []string{"--remove", carol}, "participant_removed", carol, nil, []any{bob, alice}, "Crag crew"},
		{alice, []string{"--leave"}, "participant_left", alice, nil, []any{bob}, "Crag crew"},
		{bob, []string{"--photo"}, "photo_changed", nil, nil, []any{bob}, "Crag crew"},
		{mainLine, []string{"--remove-photo"}, "photo_removed", nil, nil, []any{bob}, "Crag crew"},
		{bob, []string{"--rename", ""}, "renamed", nil, nil, []any{bob}, nil},
	} {
		before := time.Now()
		u := td.simJSON(append([]string{"group", "--line", mainLine, "--chat", chatID, "--by", c.by}, c.change...)...)
		change, _ := u["change"].(map[string]any)
		if change["action"] != c.action || change["participant"] != c.participant || change["name"] != c.name || change["by"] != c.by ||
			change["is_from_me"] != (c.by == mainLine) || !millisWithin(change["at"], before, time.Now()) {
			t.Fatalf("%v: change %v", c.change, change)
		}
		if u["id"] != chatID || u["chat_id"] != chatID || u["is_group"] != true || u["line_handle"] != mainLine ||
			!reflect.DeepEqual(u["participants"], c.participants) || u["name"] != c.chatName {
			t.Fatalf("%v: chat %v", c.change, u)
		}
		ev.next("chat.updated", isPrinted(u))
	}
	var chat map[string]any
	for _, c := range td.listAll(key, "/v1/chats?from="+mainLine) {
		if c["id"] == chatID {
			chat = c
		}
	}
	if chat == nil || chat["name"] != nil || !reflect.DeepEqual(chat["participants"], []any{bob}) {
		t.Fatalf("the group over HTTP: %v", chat)
	}

	// The tapbacks of recent systems.
	emoji := td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", id, "--type", "emoji", "--emoji", "🎉")
	if emoji["type"] != "emoji" || emoji["emoji"] != "🎉" || emoji["message_id"] != id || emoji["added"] != true {
		t.Fatalf("sim reaction --type emoji printed %v", emoji)
	}
	if d := ev.next("reaction.added", fieldIs("type", "emoji")); !reflect.DeepEqual(withoutLine(d), emoji) {
		t.Fatalf("reaction.added %v, printed %v", d, emoji)
	}
	sticker := td.simJSON("reaction", "--line", mainLine, "--from", bob, "--message", g["id"].(string), "--type", "sticker")
	if sticker["type"] != "sticker" || sticker["emoji"] != nil || sticker["sender"] != bob {
		t.Fatalf("sim reaction --type sticker printed %v", sticker)
	}
	ev.next("reaction.added", fieldIs("type", "sticker"))
	if recs := td.listAll(key, "/v1/reactions?message_id="+id); len(recs) != 1 || recs[0]["id"] != emoji["id"] || recs[0]["emoji"] != "🎉" {
		t.Fatalf("reactions over HTTP: %v", recs)
	}

	// A receiver of message.received has had those and nothing else, the
	// last message included.
	last := td.inbound(mainLine, carol, "that's all")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range received.Requests() {
			if r.Data()["guid"] == last["guid"] {
				return true
			}
		}
		return false
	})
	got := received.Requests()
	for _, r := range got {
		if r.Err != nil || r.Event() != "message.received" {
			t.Fatalf("the message.received receiver got %s (%v)", r.Raw, r.Err)
		}
	}
	if len(got) != 4 {
		t.Fatalf("the message.received receiver got %d deliveries, want the 4 messages", len(got))
	}
}

func TestSimChangesRefused(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	in := td.inbound(mainLine, alice, "hi")
	bobs := td.inbound(mainLine, bob, "hi")
	mine := td.sentMessage(key, alice, "hello")
	g := td.inbound(mainLine, bob, "climbing?", "--group", "Climbers", "--participants", bob+","+carol)
	gone := td.inbound(mainLine, alice, "never mind")
	td.simJSON("unsend", "--line", mainLine, "--from", alice, "--message", gone["id"].(string))
	id, chatID := in["id"].(string), g["chat_id"].(string)
	group := []string{"group", "--line", mainLine, "--chat", chatID}
	for _, c := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"edit", "--line", mainLine, "--from", alice, "--message", bobs["id"].(string), "--text", "x"}, 1, "was sent by " + bob + ", not " + alice},
		{[]string{"edit", "--line", mainLine, "--from", alice, "--message", mine["id"].(string), "--text", "x"}, 1, "was sent by " + mainLine},
		{[]string{"edit", "--line", mainLine, "--from", alice, "--message", gone["id"].(string), "--text", "x"}, 1, "was unsent"},
		{[]string{"edit", "--line", mainLine, "--from", alice, "--message", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--text", "x"}, 1, "message_not_found"},
		{[]string{"edit", "--line", mainLine, "--from", mainLine, "--message", id, "--text", "x"}, 1, "line's own handle"},
		{[]string{"edit", "--line", "+15559999999", "--from", alice, "--message", id, "--text", "x"}, 1, "line_not_found"},
		{[]string{"edit", "--line", mainLine, "--from", alice, "--message", id}, 2, "--text"},
		{[]string{"unsend", "--line", mainLine, "--from", bob, "--message", id}, 1, "was sent by " + alice},
		{[]string{"unsend", "--line", mainLine, "--from", alice, "--message", gone["guid"].(string)}, 1, "was unsent"},
		{[]string{"unsend", "--line", mainLine, "--from", alice}, 2, "--message"},
		{[]string{"read", "--line", mainLine, "--from", alice, "--message", id}, 1, "a contact reads the line's messages"},
		{[]string{"read", "--line", mainLine, "--from", bob, "--message", mine["id"].(string)}, 1, "not in the one-to-one chat"},
		{[]string{"read", "--line", mainLine, "--from", bob}, 1, "message_not_found"},
		{[]string{"read", "--line", mainLine, "--from", carol}, 1, "chat_not_found"},
		{[]string{"read", "--line", mainLine}, 2, "--from"},
		{[]string{"group", "--line", mainLine, "--chat", in["chat_id"].(string), "--by", alice, "--leave"}, 1, "one-to-one chat"},
		{[]string{"group", "--line", mainLine, "--chat", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--by", bob, "--leave"}, 1, "chat_not_found"},
		{append(group, "--by", alice, "--photo"), 1, alice + " is not a member"},
		{append(group, "--by", bob, "--add", carol), 1, "already in chat"},
		{append(group, "--by", bob, "--remove", alice), 1, alice + " is not in chat"},
		{append(group, "--by", bob, "--remove", bob), 1, "cannot remove itself"},
		{append(group, "--by", bob, "--add", "not a handle"), 1, "invalid_parameter_value"},
		{append(group, "--by", bob, "--add", alice, "--leave"), 2, "one change at a time, not --add and --leave"},
		{append(group, "--by", bob, "--rename", "x", "--remove-photo"), 2, "one change at a time"},
		{append(group, "--by", bob), 2, "needs a change"},
		{append(group, "--by", bob, "--add", ""), 2, "needs a handle"},
		{append(group, "--add", alice), 2, "--by"},
		{[]string{"reaction", "--line", mainLine, "--from", alice, "--message", id, "--type", "emoji"}, 2, "--type emoji needs --emoji"},
		{[]string{"reaction", "--line", mainLine, "--from", alice, "--message", id, "--type", "love", "--emoji", "🎉"}, 2, "--emoji goes with --type emoji"},
		{[]string{"reaction", "--line", mainLine, "--from", alice, "--message", id, "--type", "wink"}, 1, "emoji or sticker"},
		{[]string{"wave"}, 2, "unknown sim command"},
	} {
		out, errOut, code := td.cli(append([]string{"sim"}, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("sim %v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}

	// The daemon refuses, in the API's error shape, what the CLI would
	// not send.
	admin := adminsock.NewClient(td.dataDir)
	for _, c := range []struct {
		path  string
		body  any
		code  string
		param string
	}{
		{"/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "emoji"}, "missing_required_parameter", "emoji"},
		{"/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "love", Emoji: "🎉"}, "invalid_parameter_value", "emoji"},
		{"/sim/edit", api.SimEdit{Line: mainLine, From: bob, Message: id, Text: "x"}, "invalid_parameter_value", "from"},
		{"/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: id}, "missing_required_parameter", "text"},
		{"/sim/unsend", api.SimUnsend{Line: mainLine, From: alice}, "missing_required_parameter", "message"},
		{"/sim/read", api.SimRead{Line: mainLine, From: alice, Message: in["guid"].(string)}, "invalid_parameter_value", "message"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob}, "missing_required_parameter", "action"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob, Action: "archived"}, "invalid_parameter_value", "action"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob, Action: "participant_left", Participant: carol}, "invalid_parameter_value", "participant"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob, Action: "photo_changed", Name: "x"}, "invalid_parameter_value", "name"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob, Action: "participant_added"}, "missing_required_parameter", "participant"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: in["chat_id"].(string), By: alice, Action: "photo_changed"}, "invalid_parameter_value", "chat"},
		{"/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, Action: "photo_changed"}, "missing_required_parameter", "by"},
	} {
		var e *client.Error
		err := admin.Do(context.Background(), "POST", c.path, c.body, nil)
		if !errors.As(err, &e) || e.Status != 400 || e.Code != c.code || e.Param != c.param || e.Message == "" {
			t.Errorf("%s %+v: %v, want %s on %s", c.path, c.body, err, c.code, c.param)
		}
	}

	// Nothing refused changed anything.
	if m := td.lineMessage(key, bob, bobs["id"].(string)); m["text"] != "hi" || m["edited_at"] != nil || m["unsent_at"] != nil {
		t.Fatalf("bob's message after refusals: %v", m)
	}
	if m := td.lineMessage(key, alice, mine["id"].(string)); m["delivered_at"] != nil || m["read_at"] != nil {
		t.Fatalf("the line's message after refusals: %v", m)
	}
	if rs := td.listAll(key, "/v1/reactions?message_id="+id); len(rs) != 0 {
		t.Fatalf("reactions after refusals: %v", rs)
	}
	for _, c := range td.listAll(key, "/v1/chats?from="+mainLine) {
		if c["id"] == chatID && (c["name"] != "Climbers" || !reflect.DeepEqual(c["participants"], []any{bob, carol})) {
			t.Fatalf("the group after refusals: %v", c)
		}
	}
}
