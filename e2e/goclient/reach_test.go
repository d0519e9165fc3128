package goclient_test

import (
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// What a line can do beyond text, through the client: edits and unsends,
// emoji tapbacks, groups and availability, on the simulated network.

// sentMessage has the main line send text to a contact and returns the
// message as stored once it is sent.
func sentMessage(t *testing.T, c *client.Client, to, text string) api.Message {
	t.Helper()
	sent, err := c.Messages.Send(t.Context(), client.MessageSendParams{From: mainLine, To: to, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, sent.ID)
	page, err := c.Messages.ListPage(t.Context(), client.MessageListParams{From: mainLine, To: to, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].OutboxID == nil || *page.Data[0].OutboxID != sent.ID {
		t.Fatalf("latest message after sending %q: %+v", text, page.Data)
	}
	return page.Data[0]
}

// waitMessage polls a chat's message until cond holds of it, and returns
// it.
func waitMessage(t *testing.T, c *client.Client, to, id string, cond func(api.Message) bool) api.Message {
	t.Helper()
	var m api.Message
	testkit.Eventually(t, 10*time.Second, func() bool {
		for msg, err := range c.Messages.List(t.Context(), client.MessageListParams{From: mainLine, To: to}) {
			if err != nil {
				t.Fatal(err)
			}
			if msg.ID == id {
				m = msg
				return cond(m)
			}
		}
		t.Fatalf("no message %s in the chat with %s", id, to)
		return false
	})
	return m
}

// waitChat polls a chat of the main line until cond holds of it, and
// returns it.
func waitChat(t *testing.T, c *client.Client, id string, cond func(api.Chat) bool) api.Chat {
	t.Helper()
	var chat api.Chat
	testkit.Eventually(t, 10*time.Second, func() bool {
		for ch, err := range c.Chats.List(t.Context(), client.ChatListParams{From: mainLine}) {
			if err != nil {
				t.Fatal(err)
			}
			if ch.ID == id {
				chat = ch
				return cond(chat)
			}
		}
		t.Fatalf("no chat %s", id)
		return false
	})
	return chat
}

func TestEditAndUnsend(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	td.Inbound(mainLine, alice, "hi")

	m := sentMessage(t, c, alice, "see you at 5")
	p := client.MessageEditParams{From: mainLine, MessageID: m.ID, Text: "see you at 6", IdempotencyKey: "edit-1"}
	edit, err := c.Messages.Edit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if edit.Status != client.StatusPending || edit.ChatID == nil || *edit.ChatID != m.ChatID || edit.Replayed {
		t.Fatalf("edit answered %+v", edit)
	}
	// The same key answers the same item, and is not another edit.
	again, err := c.Messages.Edit(ctx, p)
	if err != nil || again.ID != edit.ID || !again.Replayed {
		t.Fatalf("replayed edit: %+v %v", again, err)
	}
	waitSent(t, c, edit.ID)
	got := waitMessage(t, c, alice, m.ID, func(m api.Message) bool { return m.EditedAt != nil })
	if got.Text == nil || *got.Text != "see you at 6" || got.UnsentAt != nil {
		t.Fatalf("edited message: %+v", got)
	}

	// Five edits in all (by ID or GUID), then Messages allows no more.
	for i, text := range []string{"6:15", "6:30", "6:45", "7"} {
		ref := m.ID
		if i%2 == 1 {
			ref = m.GUID
		}
		if _, err := c.Messages.Edit(ctx, client.MessageEditParams{From: mainLine, MessageID: ref, Text: text}); err != nil {
			t.Fatalf("edit %d: %v", i+2, err)
		}
	}
	_, err = c.Messages.Edit(ctx, client.MessageEditParams{From: mainLine, MessageID: m.ID, Text: "8"})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "edit_limit_reached"); e.Param != "message_id" {
		t.Errorf("param %q", e.Param)
	}
	// A line changes only the messages it sent.
	theirs := td.Inbound(mainLine, alice, "mine")
	_, err = c.Messages.Edit(ctx, client.MessageEditParams{From: mainLine, MessageID: theirs.ID, Text: "x"})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value"); e.Param != "message_id" {
		t.Errorf("param %q", e.Param)
	}
	_, err = c.Messages.Unsend(ctx, client.MessageUnsendParams{From: mainLine, MessageID: theirs.ID})
	apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value")

	// Unsend: the text goes and unsent_at comes.
	u := sentMessage(t, c, alice, "oops")
	un, err := c.Messages.Unsend(ctx, client.MessageUnsendParams{From: mainLine, MessageID: u.GUID})
	if err != nil {
		t.Fatal(err)
	}
	if un.ChatID == nil || *un.ChatID != u.ChatID {
		t.Fatalf("unsend answered %+v", un)
	}
	waitSent(t, c, un.ID)
	got = waitMessage(t, c, alice, u.ID, func(m api.Message) bool { return m.UnsentAt != nil })
	if got.Text != nil {
		t.Fatalf("unsent message: %+v", got)
	}
	// An unsent message changes no more.
	_, err = c.Messages.Edit(ctx, client.MessageEditParams{From: mainLine, MessageID: u.ID, Text: "x"})
	apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value")
	_, err = c.Messages.Unsend(ctx, client.MessageUnsendParams{From: mainLine, MessageID: u.ID})
	apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value")
	_, err = c.Messages.Edit(ctx, client.MessageEditParams{From: mainLine, MessageID: u.ID})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "missing_required_parameter"); e.Param != "text" {
		t.Errorf("param %q", e.Param)
	}
}

func TestEmojiTapback(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	in := td.Inbound(mainLine, alice, "we won")

	reactions := func(cond func([]api.Reaction) bool) []api.Reaction {
		t.Helper()
		var recs []api.Reaction
		testkit.Eventually(t, 10*time.Second, func() bool {
			var err error
			if recs, err = c.Reactions.List(ctx, in.ID); err != nil {
				t.Fatal(err)
			}
			return cond(recs)
		})
		return recs
	}
	p := client.ReactionSendParams{From: mainLine, To: alice, MessageID: in.ID, Type: client.ReactionEmoji, Emoji: "👍🏽"}
	r, err := c.Reactions.Send(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	recs := reactions(func(recs []api.Reaction) bool { return len(recs) == 1 && recs[0].Added })
	if rec := recs[0]; rec.Type != client.ReactionEmoji || rec.Emoji == nil || *rec.Emoji != "👍🏽" || !rec.IsFromMe || rec.Sender != mainLine {
		t.Fatalf("emoji tapback: %+v", rec)
	}
	p.Remove = true
	if r, err = c.Reactions.Send(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	reactions(func(recs []api.Reaction) bool { return len(recs) == 1 && !recs[0].Added })

	for _, c2 := range []struct {
		typ, emoji, code string
	}{
		{client.ReactionEmoji, "", "missing_required_parameter"},
		{client.ReactionEmoji, "🎉🎉", "invalid_parameter_value"},
		{client.ReactionLove, "🎉", "invalid_parameter_value"},
	} {
		_, err := c.Reactions.Send(ctx, client.ReactionSendParams{From: mainLine, To: alice, MessageID: in.ID, Type: c2.typ, Emoji: c2.emoji})
		if e := apiErr(t, err, client.ErrInvalidRequest, 400, c2.code); e.Param != "emoji" {
			t.Errorf("%s %q: param %q", c2.typ, c2.emoji, e.Param)
		}
	}
}

func TestGroups(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	td.Inbound(mainLine, alice, "hi")
	td.Inbound(mainLine, bob, "hey")

	// Contact-first for every participant: carol never wrote.
	_, err := c.Groups.Create(ctx, client.GroupCreateParams{From: mainLine, Participants: []string{alice, carol}, Text: "hi all"})
	if e := apiErr(t, err, client.ErrPermission, 403, "contact_has_not_messaged"); e.Param != "participants" {
		t.Errorf("param %q", e.Param)
	}
	_, err = c.Groups.Create(ctx, client.GroupCreateParams{From: mainLine, Participants: []string{alice}, Text: "just you"})
	apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value")

	created, err := c.Groups.Create(ctx, client.GroupCreateParams{From: mainLine, Participants: []string{alice, bob}, Name: "Climbers", Text: "climbing?"})
	if err != nil {
		t.Fatal(err)
	}
	if created.Status != client.StatusPending || created.ChatID != nil {
		t.Fatalf("create answered %+v", created)
	}
	var item *api.OutboxItem
	testkit.Eventually(t, 10*time.Second, func() bool {
		if item, err = c.Outbox.Get(ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		if item.Status == client.StatusFailed {
			t.Fatalf("group item failed: %+v", item)
		}
		return item.Status == client.StatusSent && item.ChatID != nil
	})
	chatID := *item.ChatID
	chat := waitChat(t, c, chatID, func(api.Chat) bool { return true })
	if !chat.IsGroup || chat.Name == nil || *chat.Name != "Climbers" || !slices.Equal(chat.Participants, []string{alice, bob}) {
		t.Fatalf("the new group: %+v", chat)
	}
	first := collect(t, c.Messages.List(ctx, client.MessageListParams{From: mainLine, To: chatID}))
	if len(first) != 1 || first[0].Text == nil || *first[0].Text != "climbing?" || first[0].OutboxID == nil || *first[0].OutboxID != created.ID {
		t.Fatalf("the group's messages: %+v", first)
	}

	// Rename, add, remove: the chat changes when the network records it.
	r, err := c.Groups.Rename(ctx, client.GroupRenameParams{From: mainLine, To: chatID, Name: "Crag crew"})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	waitChat(t, c, chatID, func(ch api.Chat) bool { return ch.Name != nil && *ch.Name == "Crag crew" })

	_, err = c.Groups.AddParticipant(ctx, client.GroupParticipantParams{From: mainLine, To: chatID, Handle: carol})
	if e := apiErr(t, err, client.ErrPermission, 403, "contact_has_not_messaged"); e.Param != "add" {
		t.Errorf("param %q", e.Param)
	}
	td.Inbound(mainLine, carol, "me too")
	r, err = c.Groups.AddParticipant(ctx, client.GroupParticipantParams{From: mainLine, To: chatID, Handle: carol})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	waitChat(t, c, chatID, func(ch api.Chat) bool { return slices.Equal(ch.Participants, []string{alice, bob, carol}) })

	r, err = c.Groups.RemoveParticipant(ctx, client.GroupParticipantParams{From: mainLine, To: chatID, Handle: bob})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	waitChat(t, c, chatID, func(ch api.Chat) bool { return slices.Equal(ch.Participants, []string{alice, carol}) })

	for _, c2 := range []struct {
		call  func() (*client.Accepted, error)
		param string
	}{
		{func() (*client.Accepted, error) {
			return c.Groups.AddParticipant(ctx, client.GroupParticipantParams{From: mainLine, To: chatID, Handle: alice})
		}, "add"},
		{func() (*client.Accepted, error) {
			return c.Groups.RemoveParticipant(ctx, client.GroupParticipantParams{From: mainLine, To: chatID, Handle: bob})
		}, "remove"},
		{func() (*client.Accepted, error) {
			return c.Groups.Rename(ctx, client.GroupRenameParams{From: mainLine, To: alice, Name: "x"})
		}, "to"},
		{func() (*client.Accepted, error) {
			return c.Groups.Leave(ctx, client.GroupLeaveParams{From: mainLine, To: alice})
		}, "to"},
	} {
		_, err := c2.call()
		if e := apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value"); e.Param != c2.param {
			t.Errorf("param %q, want %q", e.Param, c2.param)
		}
	}

	// Leave: the chat stays listed, and the network refuses what the line
	// sends there.
	r, err = c.Groups.Leave(ctx, client.GroupLeaveParams{From: mainLine, To: chatID, IdempotencyKey: "leave-1"})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	sent, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: chatID, Text: "anyone?"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		if item, err = c.Outbox.Get(ctx, sent.ID); err != nil {
			t.Fatal(err)
		}
		return item.Status == client.StatusFailed
	})

	// A line without advanced features has no groups.
	td.Inbound(plainLine, alice, "hi")
	td.Inbound(plainLine, bob, "hey")
	_, err = c.Groups.Create(ctx, client.GroupCreateParams{From: plainLine, Participants: []string{alice, bob}, Text: "x"})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "advanced_features_required"); e.Param != "from" {
		t.Errorf("param %q", e.Param)
	}
}

func TestAvailability(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()

	a, err := c.Availability.Get(ctx, client.AvailabilityParams{From: mainLine, Handle: alice})
	if err != nil {
		t.Fatal(err)
	}
	if a.Handle != alice || !a.IMessage || a.CheckedAt <= 0 || a.RequestID == "" {
		t.Fatalf("alice: %+v", a)
	}
	// The answer is kept: asked again, it is the same one.
	again, err := c.Availability.Get(ctx, client.AvailabilityParams{From: mainLine, Handle: alice})
	if err != nil || again.CheckedAt != a.CheckedAt || !again.IMessage {
		t.Fatalf("alice again: %+v %v", again, err)
	}
	// On the simulated network, a number ending in 99 is an Android phone.
	android := "+15551110099"
	if a, err = c.Availability.Get(ctx, client.AvailabilityParams{From: mainLine, Handle: android}); err != nil || a.IMessage || a.Handle != android {
		t.Fatalf("%s: %+v %v", android, a, err)
	}

	_, err = c.Availability.Get(ctx, client.AvailabilityParams{From: mainLine})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "missing_required_parameter"); e.Param != "handle" {
		t.Errorf("param %q", e.Param)
	}
	_, err = c.Availability.Get(ctx, client.AvailabilityParams{From: plainLine, Handle: alice})
	apiErr(t, err, client.ErrInvalidRequest, 400, "advanced_features_required")
	_, err = c.Availability.Get(ctx, client.AvailabilityParams{From: mainLine, Handle: mainLine})
	apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value")
}
