package admin_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/admin"
	"github.com/blueline-app/blueline/client/api"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSimInbound(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	before := time.Now().UnixMilli()
	m := e.inbound(mainLine, alice, "hello there")
	if m["text"] != "hello there" || m["sender"] != alice || m["is_from_me"] != false || m["line_id"] != e.lines[mainLine].ID ||
		m["sent_at"].(float64) < float64(before) || !strings.HasPrefix(m["id"].(string), "msg_") {
		t.Fatalf("inbound answered %v", m)
	}
	stored := e.message(m["id"].(string))
	if stored.Text == nil || *stored.Text != "hello there" || stored.Sender != alice || stored.GUID != m["guid"] {
		t.Errorf("stored %+v", stored)
	}
	chat, err := e.db.ChatByID(ctx, stored.ChatID)
	if err != nil || chat.IsGroup || chat.Identifier != alice {
		t.Errorf("chat of the message: %+v, %v", chat, err)
	}

	// A picture, with text.
	photo := writeFile(t, "cat.jpg", "\xff\xd8\xff\xe0 not much of a picture")
	pic := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "look", Attach: photo})
	if atts := pic["attachments"].([]any); len(atts) != 1 || atts[0].(map[string]any)["filename"] != "cat.jpg" || pic["is_audio_message"] != false {
		t.Errorf("message with a picture: %v", pic)
	}
	// A voice memo with its transcription, without text.
	memo := writeFile(t, "memo.m4a", "not much of a recording")
	words := "call me back"
	voice := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Audio: memo, Transcription: &words})
	atts := voice["attachments"].([]any)
	if voice["is_audio_message"] != true || voice["text"] != nil || len(atts) != 1 || atts[0].(map[string]any)["transcription"] != words {
		t.Errorf("voice memo: %v", voice)
	}

	// A new group, then a message in it from another member.
	group := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "hi all", Group: "Friends",
		Participants: []string{bob, " +1 555 111 0003 "}})
	gc, err := e.db.ChatByID(ctx, group["chat_id"].(string))
	if err != nil || !gc.IsGroup || gc.Name != "Friends" || !slices.Contains(gc.Participants, carol) || !slices.Contains(gc.Participants, bob) {
		t.Fatalf("group chat %+v, %v", gc, err)
	}
	inGroup := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: bob, Text: "hey", Chat: gc.ID})
	if inGroup["chat_id"] != gc.ID || inGroup["sender"] != bob {
		t.Errorf("message in the group: %v", inGroup)
	}
	// The one-to-one chat, named.
	if again := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "again", Chat: chat.ID}); again["chat_id"] != chat.ID {
		t.Errorf("message in the named one-to-one chat: %v", again)
	}
	// SMS lines get SMS chats.
	if sms := e.inbound(smsLine, bob, "by sms"); sms["service"] != "sms" {
		t.Errorf("message on the SMS line: %v", sms)
	}

	count := func() int {
		n := 0
		for _, c := range []string{chat.ID, gc.ID} {
			msgs, _, err := e.db.ListMessages(ctx, c, nil, 100)
			if err != nil {
				t.Fatal(err)
			}
			n += len(msgs)
		}
		return n
	}
	other := e.inbound(mainLine, bob, "bob's chat")
	onSMS := e.inbound(smsLine, alice, "sms chat")
	n := count()
	for _, c := range []struct {
		body          api.SimInbound
		status        int
		code, param   string
		messageHasAny string
	}{
		{api.SimInbound{Line: "nope", From: alice, Text: "x"}, 400, "invalid_parameter_value", "line", "not a handle"},
		{api.SimInbound{Line: "+15559999999", From: alice, Text: "x"}, 404, "line_not_found", "line", "No line"},
		{api.SimInbound{Line: macLine, From: alice, Text: "x"}, 400, "invalid_parameter_value", "line", "messages bridge"},
		{api.SimInbound{Line: mainLine, From: "someone", Text: "x"}, 400, "invalid_parameter_value", "from", "not a handle"},
		{api.SimInbound{Line: mainLine, From: mainLine, Text: "x"}, 400, "invalid_parameter_value", "from", "line's own handle"},
		{api.SimInbound{Line: mainLine, From: alice}, 400, "missing_required_parameter", "text", "text"},
		{api.SimInbound{Line: mainLine, From: alice, Attach: photo, Audio: memo}, 400, "invalid_parameter_value", "audio", "not both"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Transcription: &words}, 400, "invalid_parameter_value", "transcription", "--audio"},
		{api.SimInbound{Line: mainLine, From: alice, Audio: photo}, 400, "invalid_parameter_value", "audio", "cat.jpg"},
		{api.SimInbound{Line: mainLine, From: alice, Attach: filepath.Join(t.TempDir(), "missing.jpg")}, 400, "invalid_parameter_value", "attach", "No file"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Chat: chat.ID, Group: "G"}, 400, "invalid_parameter_value", "chat", "not both"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Group: "G"}, 400, "missing_required_parameter", "participants", "participants"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Group: "G", Participants: []string{"zz"}}, 400, "invalid_parameter_value", "participants", "not a handle"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Group: "G", Participants: []string{mainLine}}, 400, "invalid_parameter_value", "participants", "the line itself"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Chat: other["chat_id"].(string)}, 400, "invalid_parameter_value", "chat", "one-to-one chat with " + bob},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Chat: onSMS["chat_id"].(string)}, 404, "chat_not_found", "chat", "No chat"},
		{api.SimInbound{Line: mainLine, From: alice, Text: "x", Chat: "cht_nope"}, 404, "chat_not_found", "chat", "No chat"},
	} {
		msg := e.refused(c.status, c.code, c.param, "POST", "/sim/inbound", c.body)
		if !strings.Contains(msg, c.messageHasAny) {
			t.Errorf("%+v: message %q lacks %q", c.body, msg, c.messageHasAny)
		}
	}
	if got := count(); got != n {
		t.Errorf("refusals stored messages: %d, then %d", n, got)
	}

	// Without a simulator, sim commands are refused.
	none := newEnv(t, envOptions{adjust: func(o *admin.Options) { o.Simulator = nil }})
	none.refused(503, "simulator_unavailable", "", "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "x"})
}

func TestSimReaction(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	m := e.inbound(mainLine, alice, "react to me")
	id := m["id"].(string)
	rxn := e.ok(http.StatusCreated, "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "love"})
	if rxn["message_id"] != id || rxn["type"] != "love" || rxn["added"] != true || rxn["sender"] != alice {
		t.Fatalf("reaction answered %v", rxn)
	}
	emoji := e.ok(http.StatusCreated, "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: m["guid"].(string), Type: "emoji", Emoji: "🎉"})
	if emoji["type"] != "emoji" || emoji["emoji"] != "🎉" {
		t.Errorf("emoji reaction answered %v", emoji)
	}
	removed := e.ok(http.StatusCreated, "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "love", Remove: true})
	if removed["added"] != false {
		t.Errorf("removal answered %v", removed)
	}
	stored, err := e.db.ReactionsByMessage(ctx, id)
	if err != nil || len(stored) == 0 {
		t.Fatalf("stored reactions: %+v, %v", stored, err)
	}
	for _, r := range stored {
		if r.Type == "love" && r.Added {
			t.Errorf("the love tapback is still on: %+v", stored)
		}
	}
	n := len(stored)

	e.refused(400, "invalid_parameter_value", "type", "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "wink"})
	e.refused(400, "missing_required_parameter", "emoji", "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "emoji"})
	e.refused(400, "invalid_parameter_value", "emoji", "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: id, Type: "like", Emoji: "🎉"})
	e.refused(404, "message_not_found", "message", "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: alice, Message: "guid-nope", Type: "like"})
	e.refused(400, "invalid_parameter_value", "from", "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: bob, Message: id, Type: "like"})
	e.refused(400, "invalid_parameter_value", "from", "POST", "/sim/reaction", api.SimReaction{Line: mainLine, From: "bob", Message: id, Type: "like"})
	if stored, _ := e.db.ReactionsByMessage(ctx, id); len(stored) != n {
		t.Errorf("refusals stored reactions: %+v", stored)
	}
}

func TestSimTyping(t *testing.T) {
	e := newEnv(t, envOptions{})
	m := e.inbound(mainLine, alice, "typing next")
	chatID := m["chat_id"].(string)
	on := e.ok(http.StatusCreated, "POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, State: "on"})
	if on["chat_id"] != chatID || on["handle"] != alice || on["is_typing"] != true {
		t.Fatalf("typing on answered %v", on)
	}
	if ind := e.db.TypingIndicators(chatID, time.Now()); len(ind) != 1 || ind[0].Handle != alice || !ind[0].IsTyping {
		t.Errorf("indicators after on: %+v", ind)
	}
	off := e.ok(http.StatusCreated, "POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, Chat: chatID, State: "off"})
	if off["is_typing"] != false {
		t.Errorf("typing off answered %v", off)
	}
	for _, ind := range e.db.TypingIndicators(chatID, time.Now()) {
		if ind.IsTyping {
			t.Errorf("still typing after off: %+v", ind)
		}
	}
	e.refused(400, "invalid_parameter_value", "state", "POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, State: "maybe"})
	msg := e.refused(404, "chat_not_found", "chat", "POST", "/sim/typing", api.SimTyping{Line: mainLine, From: bob, State: "on"})
	if !strings.Contains(msg, "send a message first") {
		t.Errorf("message %q", msg)
	}
	e.refused(404, "chat_not_found", "chat", "POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, Chat: "cht_nope", State: "on"})
	e.refused(404, "line_not_found", "line", "POST", "/sim/typing", api.SimTyping{Line: "+15559999999", From: alice, State: "on"})
}

func TestSimEditUnsend(t *testing.T) {
	e := newEnv(t, envOptions{})
	m := e.inbound(mainLine, alice, "see you at 5")
	id, guid := m["id"].(string), m["guid"].(string)
	before := time.Now().UnixMilli()
	edited := e.ok(http.StatusOK, "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: id, Text: "see you at 6"})
	if edited["id"] != id || edited["text"] != "see you at 6" || edited["edited_at"] == nil || edited["edited_at"].(float64) < float64(before) {
		t.Fatalf("edit answered %v", edited)
	}
	// Two edits in a row both count, the second later than the first.
	again := e.ok(http.StatusOK, "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: guid, Text: "see you at 7"})
	if again["text"] != "see you at 7" || again["edited_at"].(float64) <= edited["edited_at"].(float64) {
		t.Errorf("second edit answered %v after %v", again, edited)
	}
	if s := e.message(id); s.Text == nil || *s.Text != "see you at 7" || s.EditedAt != int64(again["edited_at"].(float64)) {
		t.Errorf("stored after edits: %+v", s)
	}

	// A photo alone has no text to edit.
	photo := writeFile(t, "p.jpg", "\xff\xd8\xff\xe0 picture")
	pic := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Attach: photo})
	e.refused(400, "invalid_parameter_value", "message", "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: pic["id"].(string), Text: "x"})
	e.refused(400, "missing_required_parameter", "text", "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: id})
	e.refused(400, "missing_required_parameter", "message", "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Text: "x"})
	e.refused(400, "invalid_parameter_value", "from", "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: bob, Message: id, Text: "x"})
	e.refused(400, "invalid_parameter_value", "message", "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: "msg_!!", Text: "x"})
	e.refused(404, "message_not_found", "message", "POST", "/sim/edit", api.SimEdit{Line: smsLine, From: alice, Message: id, Text: "x"})
	mine := e.sent(mainLine, alice, "the line's own")
	e.refused(400, "invalid_parameter_value", "from", "POST", "/sim/unsend", api.SimUnsend{Line: mainLine, From: alice, Message: mine.ID})

	// Unsending.
	unsent := e.ok(http.StatusOK, "POST", "/sim/unsend", api.SimUnsend{Line: mainLine, From: alice, Message: id})
	if unsent["id"] != id || unsent["text"] != nil || unsent["unsent_at"] == nil {
		t.Fatalf("unsend answered %v", unsent)
	}
	if s := e.message(id); s.UnsentAt == 0 || s.Text != nil {
		t.Errorf("stored after unsend: %+v", s)
	}
	msg := e.refused(400, "invalid_parameter_value", "message", "POST", "/sim/edit", api.SimEdit{Line: mainLine, From: alice, Message: id, Text: "back"})
	if !strings.Contains(msg, "was unsent") {
		t.Errorf("editing an unsent message: %q", msg)
	}
	e.refused(400, "invalid_parameter_value", "message", "POST", "/sim/unsend", api.SimUnsend{Line: mainLine, From: alice, Message: id})
}

func TestSimRead(t *testing.T) {
	e := newEnv(t, envOptions{})
	// A contact with no chat yet.
	e.refused(404, "chat_not_found", "from", "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice})
	in := e.inbound(mainLine, alice, "hi")
	// The line has sent nothing in the chat yet.
	e.refused(404, "message_not_found", "message", "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice})

	first := e.sent(mainLine, alice, "first")
	latest := e.sent(mainLine, alice, "latest")
	toBob := e.sent(mainLine, bob, "to bob")

	before := time.Now().UnixMilli()
	delivered := e.ok(http.StatusOK, "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice, DeliveredOnly: true})
	if delivered["id"] != latest.ID || delivered["delivered_at"] == nil || delivered["delivered_at"].(float64) < float64(before) || delivered["read_at"] != nil {
		t.Fatalf("delivered-only answered %v, want the latest message %s", delivered, latest.ID)
	}
	if s := e.message(latest.ID); s.DeliveredAt == 0 || s.ReadAt != 0 {
		t.Errorf("stored after delivery: %+v", s)
	}
	read := e.ok(http.StatusOK, "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice, Message: first.ID})
	if read["id"] != first.ID || read["read_at"] == nil || read["delivered_at"] == nil {
		t.Errorf("read answered %v", read)
	}
	if s := e.message(first.ID); s.ReadAt == 0 {
		t.Errorf("stored after reading: %+v", s)
	}

	e.refused(400, "invalid_parameter_value", "message", "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice, Message: in["guid"].(string)})
	msg := e.refused(400, "invalid_parameter_value", "message", "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice, Message: toBob.ID})
	if !strings.Contains(msg, "one-to-one chat") {
		t.Errorf("reading another contact's message: %q", msg)
	}
	e.refused(404, "message_not_found", "message", "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice, Message: "msg_" + strings.Repeat("a", 26)})
}

// Many messages from the contact after the line's latest: the search goes
// past a page.
func TestSimReadPages(t *testing.T) {
	e := newEnv(t, envOptions{})
	mine := e.sent(mainLine, alice, "mine")
	for i := range 105 {
		e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: strings.Repeat("x", i+1)})
	}
	read := e.ok(http.StatusOK, "POST", "/sim/read", api.SimRead{Line: mainLine, From: alice})
	if read["id"] != mine.ID || read["read_at"] == nil {
		t.Errorf("read answered %v, want %s", read, mine.ID)
	}
}

func TestSimGroup(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	first := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "hi all", Group: "Friends", Participants: []string{bob}})
	chatID := first["chat_id"].(string)
	one := e.inbound(mainLine, alice, "just us")["chat_id"].(string)
	participants := func() []string {
		c, err := e.db.ChatByID(ctx, chatID)
		if err != nil {
			t.Fatal(err)
		}
		return c.Participants
	}

	added := e.ok(http.StatusOK, "POST", "/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_added", Participant: carol})
	change := added["change"].(map[string]any)
	if added["chat_id"] != chatID || change["action"] != "participant_added" || change["participant"] != carol || change["by"] != alice || change["is_from_me"] != false {
		t.Fatalf("adding answered %v", added)
	}
	if p := participants(); !slices.Contains(p, carol) {
		t.Errorf("participants after adding carol: %v", p)
	}
	renamed := e.ok(http.StatusOK, "POST", "/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: mainLine, Action: "renamed", Name: "Best friends"})
	if c := renamed["change"].(map[string]any); c["name"] != "Best friends" || c["is_from_me"] != true || renamed["name"] != "Best friends" {
		t.Errorf("renaming answered %v", renamed)
	}
	if c, _ := e.db.ChatByID(ctx, chatID); c.Name != "Best friends" {
		t.Errorf("stored name %q", c.Name)
	}
	e.ok(http.StatusOK, "POST", "/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob, Action: "photo_changed"})
	removed := e.ok(http.StatusOK, "POST", "/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_removed", Participant: carol})
	if c := removed["change"].(map[string]any); c["participant"] != carol {
		t.Errorf("removing answered %v", removed)
	}
	left := e.ok(http.StatusOK, "POST", "/sim/group", api.SimGroup{Line: mainLine, Chat: chatID, By: bob, Action: "participant_left"})
	if c := left["change"].(map[string]any); c["participant"] != bob || c["action"] != "participant_left" {
		t.Errorf("leaving answered %v", left)
	}
	if p := participants(); slices.Contains(p, bob) || slices.Contains(p, carol) || !slices.Contains(p, alice) {
		t.Errorf("participants after carol's removal and bob's leaving: %v", p)
	}
	p := participants()

	for _, c := range []struct {
		body        api.SimGroup
		status      int
		code, param string
	}{
		{api.SimGroup{Line: mainLine, By: alice, Action: "renamed"}, 400, "missing_required_parameter", "chat"},
		{api.SimGroup{Line: mainLine, Chat: "cht_nope", By: alice, Action: "renamed"}, 404, "chat_not_found", "chat"},
		{api.SimGroup{Line: mainLine, Chat: one, By: alice, Action: "photo_changed"}, 400, "invalid_parameter_value", "chat"},
		{api.SimGroup{Line: mainLine, Chat: chatID, Action: "photo_changed"}, 400, "missing_required_parameter", "by"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: "who", Action: "photo_changed"}, 400, "invalid_parameter_value", "by"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: carol, Action: "photo_changed"}, 400, "invalid_parameter_value", "by"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice}, 400, "missing_required_parameter", "action"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "archived"}, 400, "invalid_parameter_value", "action"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_left", Participant: carol}, 400, "invalid_parameter_value", "participant"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "photo_changed", Name: "x"}, 400, "invalid_parameter_value", "name"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_added"}, 400, "missing_required_parameter", "participant"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_added", Participant: "nobody"}, 400, "invalid_parameter_value", "participant"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_added", Participant: mainLine}, 400, "invalid_parameter_value", "participant"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: mainLine, Action: "participant_removed", Participant: bob}, 400, "invalid_parameter_value", "participant"},
		{api.SimGroup{Line: mainLine, Chat: chatID, By: alice, Action: "participant_removed", Participant: alice}, 400, "invalid_parameter_value", "participant"},
		{api.SimGroup{Line: smsLine, Chat: chatID, By: alice, Action: "photo_changed"}, 404, "chat_not_found", "chat"},
		{api.SimGroup{Line: "x", Chat: chatID, By: alice, Action: "photo_changed"}, 400, "invalid_parameter_value", "line"},
	} {
		e.refused(c.status, c.code, c.param, "POST", "/sim/group", c.body)
	}
	if got := participants(); !slices.Equal(got, p) {
		t.Errorf("refusals changed the participants: %v, then %v", p, got)
	}
}

// A simulated message may be sent late (news caught up) or from an
// unknown sender, as a Messages line reports them.
func TestSimInboundLateAndUnknown(t *testing.T) {
	e := newEnv(t, envOptions{})
	m := e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "still there?", Late: "2h"})
	if age := time.Since(time.UnixMilli(int64(m["sent_at"].(float64)))); age < 2*time.Hour || age > 2*time.Hour+time.Minute {
		t.Errorf("a message sent 2h late is %s old", age)
	}
	m = e.ok(http.StatusCreated, "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: bob, Text: "hi", UnknownSender: true})
	c, err := e.db.ChatByID(context.Background(), m["chat_id"].(string))
	if err != nil || c.Filter != "unknown_sender" {
		t.Errorf("an unknown sender's chat: %+v, %v", c, err)
	}
	for _, late := range []string{"soon", "-1h", "25h"} {
		e.refused(400, "invalid_parameter_value", "late", "POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "x", Late: late})
	}
	e.refused(400, "invalid_parameter_value", "unknown_sender", "POST", "/sim/inbound",
		api.SimInbound{Line: mainLine, From: alice, Text: "x", UnknownSender: true, Group: "G", Participants: []string{alice}})
}
