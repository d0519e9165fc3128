package e2e

import (
	"reflect"
	"slices"
	"testing"

	"github.com/blueline-app/blueline/bridge"
)

// What a line can send beyond text, and do, on the simulated network:
// edits, unsends, emoji tapbacks, groups, availability and capabilities,
// over HTTP, with the events the network's records cause.

// sent sends a write, which must be created and then sent, and returns the
// outbox item as it ended.
func (td *testDaemon) sentItem(key, path string, body map[string]any) map[string]any {
	td.t.Helper()
	r := td.call("POST", path, key, body)
	if r.Status != 201 {
		td.t.Fatalf("POST %s: %d %s", path, r.Status, r.Raw)
	}
	item := td.waitOutbox(key, r.Body["id"].(string))
	if item["status"] != "sent" {
		td.t.Fatalf("POST %s: item ended %v", path, item)
	}
	return item
}

func TestEditAndUnsendOnTheSimulatedNetwork(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	td.register(key, mainLine, rc, "message.edited", "message.unsent")
	ev := newEventLog(t, rc)
	td.inbound(mainLine, alice, "hi")

	m := td.sentMessage(key, alice, "see you at 5")
	item := td.sentItem(key, "/v1/edits", map[string]any{"from": mainLine, "message_id": m["id"], "text": "see you at 6"})
	if item["chat_id"] != m["chat_id"] || item["payload"].(map[string]any)["text"] != "see you at 6" {
		t.Fatalf("edit item: %v", item)
	}
	d := ev.next("message.edited", guidIs(m["guid"].(string)))
	if d["text"] != "see you at 6" || !isTimestamp(d["edited_at"]) || d["is_from_me"] != true || d["outbox_id"] != m["outbox_id"] {
		t.Fatalf("message.edited: %v", d)
	}
	if got := td.lineMessage(key, alice, m["id"].(string)); got["text"] != "see you at 6" || got["edited_at"] != d["edited_at"] {
		t.Fatalf("edited message over HTTP: %v", got)
	}
	edits := td.d.Sim().Edits()
	if len(edits) != 1 || edits[0].TargetGUID != m["guid"] || edits[0].Text != "see you at 6" || edits[0].Chat.Identifier != alice {
		t.Fatalf("the network made edits %+v", edits)
	}

	// Five edits in all (by msg_ ID or GUID), then no more.
	for i, text := range []string{"6:15", "6:30", "6:45", "7"} {
		ref := m["id"]
		if i%2 == 1 {
			ref = m["guid"]
		}
		td.sentItem(key, "/v1/edits", map[string]any{"from": mainLine, "message_id": ref, "text": text})
	}
	ev.next("message.edited", fieldIs("text", "7"))
	r := td.call("POST", "/v1/edits", key, map[string]any{"from": mainLine, "message_id": m["id"], "text": "8"})
	if r.Status != 400 || r.ErrCode() != "edit_limit_reached" || r.ErrParam() != "message_id" {
		t.Fatalf("sixth edit: %d %s", r.Status, r.Raw)
	}

	// Unsend: text and attachments go, unsent_at and the event come.
	u := td.sentMessage(key, alice, "oops")
	td.sentItem(key, "/v1/unsends", map[string]any{"from": mainLine, "message_id": u["guid"]})
	d = ev.next("message.unsent", guidIs(u["guid"].(string)))
	if d["text"] != nil || !isTimestamp(d["unsent_at"]) {
		t.Fatalf("message.unsent: %v", d)
	}
	if n := td.d.Sim().Unsends(); len(n) != 1 || n[0].TargetGUID != u["guid"] {
		t.Fatalf("the network made unsends %+v", n)
	}
	// An unsent message changes no more; nor does a contact's message.
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/edits", map[string]any{"from": mainLine, "message_id": u["id"], "text": "x"}},
		{"/v1/unsends", map[string]any{"from": mainLine, "message_id": u["id"]}},
		{"/v1/edits", map[string]any{"from": mainLine, "message_id": td.inbound(mainLine, alice, "mine")["id"], "text": "x"}},
	} {
		if r := td.call("POST", c.path, key, c.body); r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "message_id" {
			t.Fatalf("POST %s %v: %d %s", c.path, c.body, r.Status, r.Raw)
		}
	}
	// A line without advanced features cannot.
	td.inbound(plainLine, alice, "hi")
	plain := td.send(key, map[string]any{"from": plainLine, "to": alice, "text": "plain"})
	td.waitOutbox(key, plain["id"].(string))
	pm := td.call("GET", "/v1/messages?from="+plainLine+"&to="+alice+"&limit=1", key, nil).Data()[0]
	if r := td.call("POST", "/v1/edits", key, map[string]any{"from": plainLine, "message_id": pm["id"], "text": "x"}); r.Status != 400 || r.ErrCode() != "advanced_features_required" {
		t.Fatalf("edit on the plain line: %d %s", r.Status, r.Raw)
	}
}

func TestEmojiTapbacksOnTheSimulatedNetwork(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	td.register(key, mainLine, rc, "reaction.added", "reaction.removed")
	ev := newEventLog(t, rc)
	in := td.inbound(mainLine, alice, "we won")
	id := in["id"].(string)

	for _, emoji := range []string{"🎉", "👍🏽", "🇫🇷", "👩‍👩‍👧"} {
		td.sentItem(key, "/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": id, "type": "emoji", "emoji": emoji})
		d := ev.next("reaction.added", fieldIs("emoji", emoji))
		if d["type"] != "emoji" || d["is_from_me"] != true || d["message_id"] != id || d["sender"] != mainLine {
			t.Fatalf("reaction.added %s: %v", emoji, d)
		}
	}
	td.sentItem(key, "/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": id, "type": "emoji", "emoji": "👩‍👩‍👧", "remove": true})
	if d := ev.next("reaction.removed", fieldIs("type", "emoji")); d["added"] != false {
		t.Fatalf("reaction.removed: %v", d)
	}
	recs := td.listAll(key, "/v1/reactions?message_id="+id)
	if len(recs) != 1 || recs[0]["type"] != "emoji" || recs[0]["added"] != false || recs[0]["emoji"] != "👩‍👩‍👧" {
		t.Fatalf("reactions: %v", recs)
	}
	var emojis []string
	for _, r := range td.d.Sim().Reactions() {
		if r.Type != bridge.ReactionEmoji {
			t.Fatalf("the network got %+v", r)
		}
		emojis = append(emojis, r.Emoji)
	}
	if want := []string{"🎉", "👍🏽", "🇫🇷", "👩‍👩‍👧", "👩‍👩‍👧"}; !slices.Equal(emojis, want) {
		t.Fatalf("the network got emoji %q, want %q", emojis, want)
	}
	for _, c := range []struct {
		body  map[string]any
		code  string
		param string
	}{
		{map[string]any{"type": "emoji"}, "missing_required_parameter", "emoji"},
		{map[string]any{"type": "emoji", "emoji": "🎉🎉"}, "invalid_parameter_value", "emoji"},
		{map[string]any{"type": "emoji", "emoji": "a"}, "invalid_parameter_value", "emoji"},
		{map[string]any{"type": "love", "emoji": "🎉"}, "invalid_parameter_value", "emoji"},
	} {
		body := map[string]any{"from": mainLine, "to": alice, "message_id": id}
		for k, v := range c.body {
			body[k] = v
		}
		if r := td.call("POST", "/v1/reactions", key, body); r.Status != 400 || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Fatalf("%v: %d %s", c.body, r.Status, r.Raw)
		}
	}
}

func TestGroupsOnTheSimulatedNetwork(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	td.register(key, mainLine, rc, "message.sent", "chat.updated")
	ev := newEventLog(t, rc)
	td.inbound(mainLine, alice, "hi")
	td.inbound(mainLine, bob, "hey")

	// Contact-first for every participant: carol never wrote.
	r := td.call("POST", "/v1/groups", key, map[string]any{"from": mainLine, "participants": []string{alice, carol}, "text": "hi all"})
	if r.Status != 403 || r.ErrCode() != "contact_has_not_messaged" || r.ErrParam() != "participants" {
		t.Fatalf("group with carol: %d %s", r.Status, r.Raw)
	}
	r = td.call("POST", "/v1/groups", key, map[string]any{"from": mainLine, "participants": []string{alice, bob}, "name": "Climbers", "text": "climbing?"})
	if r.Status != 201 || r.Body["chat_id"] != nil || r.Body["status"] != "pending" {
		t.Fatalf("POST /v1/groups: %d %s", r.Status, r.Raw)
	}
	item := td.waitOutbox(key, r.Body["id"].(string))
	chatID, _ := item["chat_id"].(string)
	if item["status"] != "sent" || chatID == "" {
		t.Fatalf("group item: %v", item)
	}
	first := ev.next("message.sent", fieldIs("chat_id", chatID))
	if first["text"] != "climbing?" || first["is_from_me"] != true || first["outbox_id"] != item["id"] {
		t.Fatalf("first message: %v", first)
	}
	chat := td.chatOf(key, chatID)
	if chat["is_group"] != true || chat["name"] != "Climbers" || !reflect.DeepEqual(chat["participants"], []any{alice, bob}) ||
		chat["has_received_inbound"] != false {
		t.Fatalf("the new group: %v", chat)
	}
	if g := td.d.Sim().Groups(); len(g) != 1 || !slices.Equal(g[0].Participants, []string{alice, bob}) || g[0].Name != "Climbers" || g[0].Text != "climbing?" {
		t.Fatalf("the network created %+v", g)
	}
	// Every member wrote to the line: the group takes messages at once.
	td.sentItem(key, "/v1/messages", map[string]any{"from": mainLine, "to": chatID, "text": "saturday?"})

	// Rename, add, remove, leave: each comes back as chat.updated by the line.
	td.inbound(mainLine, carol, "me too")
	for _, c := range []struct {
		path         string
		body         map[string]any
		action       string
		participant  any
		name         any
		participants []any
	}{
		{"/v1/groups/rename", map[string]any{"name": "Crag crew"}, "renamed", nil, "Crag crew", []any{alice, bob}},
		{"/v1/groups/participants", map[string]any{"add": carol}, "participant_added", carol, nil, []any{alice, bob, carol}},
		{"/v1/groups/participants", map[string]any{"remove": bob}, "participant_removed", bob, nil, []any{alice, carol}},
		{"/v1/groups/leave", map[string]any{}, "participant_left", mainLine, nil, []any{alice, carol}},
	} {
		body := map[string]any{"from": mainLine, "to": chatID}
		for k, v := range c.body {
			body[k] = v
		}
		td.sentItem(key, c.path, body)
		u := ev.next("chat.updated", func(d map[string]any) bool { return d["change"].(map[string]any)["action"] == c.action })
		change := u["change"].(map[string]any)
		if change["participant"] != c.participant || change["name"] != c.name || change["by"] != mainLine || change["is_from_me"] != true ||
			u["id"] != chatID || !reflect.DeepEqual(u["participants"], c.participants) {
			t.Fatalf("%s %v: chat.updated %v", c.path, c.body, u)
		}
	}
	if n := len(td.d.Sim().GroupChanges()); n != 4 {
		t.Fatalf("the network made %d group changes", n)
	}
	// The line left: the network refuses what it sends there.
	obx := td.send(key, map[string]any{"from": mainLine, "to": chatID, "text": "anyone?"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "failed" {
		t.Fatalf("send after leaving: %v", item)
	}

	for _, c := range []struct {
		path, code, param string
		body              map[string]any
	}{
		{"/v1/groups", "invalid_parameter_value", "participants", map[string]any{"participants": []string{alice}, "text": "x"}},
		{"/v1/groups", "invalid_parameter_value", "participants", map[string]any{"participants": []string{alice, "+1 555 111 0001"}, "text": "x"}},
		{"/v1/groups", "missing_required_parameter", "text", map[string]any{"participants": []string{alice, bob}}},
		{"/v1/groups/rename", "invalid_parameter_value", "to", map[string]any{"to": alice, "name": "x"}},
		{"/v1/groups/participants", "missing_required_parameter", "add", map[string]any{"to": chatID}},
		{"/v1/groups/participants", "invalid_parameter_value", "remove", map[string]any{"to": chatID, "add": bob, "remove": alice}},
		{"/v1/groups/participants", "invalid_parameter_value", "add", map[string]any{"to": chatID, "add": alice}},
	} {
		body := map[string]any{"from": mainLine}
		for k, v := range c.body {
			body[k] = v
		}
		if r := td.call("POST", c.path, key, body); r.Status != 400 || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Fatalf("POST %s %v: %d %s", c.path, c.body, r.Status, r.Raw)
		}
	}
}

// chatOf is the main line's chat id, as GET /v1/chats lists it.
func (td *testDaemon) chatOf(key, id string) map[string]any {
	td.t.Helper()
	for _, c := range td.listAll(key, "/v1/chats?from="+mainLine+"&limit=100") {
		if c["id"] == id {
			return c
		}
	}
	td.t.Fatalf("no chat %s", id)
	return nil
}

func TestAvailabilityAndCapabilitiesOnTheSimulatedNetwork(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	ask := func(line, h string) map[string]any {
		t.Helper()
		r := td.call("GET", "/v1/availability?from="+line+"&handle="+h, key, nil)
		if r.Status != 200 || r.Body["handle"] != h || !isTimestamp(r.Body["checked_at"]) {
			t.Fatalf("availability of %s: %d %s", h, r.Status, r.Raw)
		}
		return r.Body
	}
	if a := ask(mainLine, alice); a["imessage"] != true {
		t.Fatalf("alice: %v", a)
	}
	if a := ask(mainLine, "+15551110099"); a["imessage"] != false {
		t.Fatalf("a number ending in 99: %v", a)
	}
	// Set unreachable: the kept answer is forgotten.
	out := td.simJSON("availability", "--handle", alice, "--imessage=false")
	if out["handle"] != alice || out["imessage"] != false {
		t.Fatalf("sim availability printed %v", out)
	}
	if a := ask(mainLine, alice); a["imessage"] != false {
		t.Fatalf("alice set unreachable: %v", a)
	}
	if r := td.call("GET", "/v1/availability?from="+plainLine+"&handle="+alice, key, nil); r.Status != 400 || r.ErrCode() != "advanced_features_required" {
		t.Fatalf("availability on the plain line: %d %s", r.Status, r.Raw)
	}
	if r := td.call("GET", "/v1/availability?from="+mainLine, key, nil); r.Status != 400 || r.ErrCode() != "missing_required_parameter" || r.ErrParam() != "handle" {
		t.Fatalf("availability without a handle: %d %s", r.Status, r.Raw)
	}

	lines := map[string]map[string]any{}
	for _, l := range td.listAll(key, "/v1/lines") {
		lines[l["handle"].(string)] = l["capabilities"].(map[string]any)
	}
	can := func(line, feature string) (bool, any) {
		c := lines[line][feature].(map[string]any)
		return c["available"].(bool), c["reason"]
	}
	for _, f := range []string{"reactions", "emoji_reactions", "typing", "receipts", "edit", "unsend", "groups", "availability", "audio_messages"} {
		if ok, why := can(mainLine, f); !ok || why != nil {
			t.Errorf("main line %s: %v %v", f, ok, why)
		}
		if ok, why := can(plainLine, f); ok || why == nil {
			t.Errorf("plain line %s: %v %v", f, ok, why)
		}
	}
	if ok, why := can(sandboxLine, "groups"); ok || why == nil {
		t.Errorf("sandbox line groups: %v %v", ok, why)
	}
	if ok, why := can(smsLine, "edit"); ok || why != "not on an SMS line" {
		t.Errorf("SMS line edit: %v %v", ok, why)
	}
}
