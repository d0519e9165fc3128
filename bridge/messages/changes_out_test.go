package messages

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// Every action beyond sending needs the helper: without it, nothing was
// done and it may be tried again.
func TestHelperActionsWithoutTheHelper(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	conv := conversation("iMessage;-;"+alice, alice, false)
	errs := map[string]error{}
	_, errs["React"] = r.b.React(ctx, bridge.Reaction{Conversation: conv, TargetGUID: "G", Type: "love"})
	errs["SetTyping"] = r.b.SetTyping(ctx, bridge.Typing{Conversation: conv, On: true})
	errs["MarkRead"] = r.b.MarkRead(ctx, bridge.Read{Conversation: conv})
	errs["Edit"] = r.b.Edit(ctx, bridge.Edit{Conversation: conv, TargetGUID: "G", Text: "x"})
	errs["Unsend"] = r.b.Unsend(ctx, bridge.Unsend{Conversation: conv, TargetGUID: "G"})
	errs["ChangeGroup"] = r.b.ChangeGroup(ctx, bridge.GroupChange{Conversation: conv, Action: bridge.ChatRenamed, Name: "x"})
	_, _, errs["CreateGroup"] = r.b.CreateGroup(ctx, bridge.NewGroup{Line: rigLine, Service: "imessage", Participants: []string{alice, bob}, Text: "hi"})
	for name, err := range errs {
		if !bridge.IsNotSent(err) || bridge.IsPermanent(err) {
			t.Errorf("%s without the helper: %v", name, err)
		}
	}
}

// Tapbacks, typing, reading, edits, unsends and group changes are the
// helper's frames, on the chat's GUID in the form the helper knows.
func TestHelperActions(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.db.ChatWithGUID("any;-;"+alice, "iMessage", alice)
	group := r.db.GroupChat("imessage", "Crew", alice, bob)
	fh := serveHelper(t, r.b.helper, nil)
	ctx := t.Context()
	conv := conversation(dm.GUID, alice, false)
	groupConv := conversation(group.GUID, group.Identifier, true)

	fh.answer(func(f map[string]any) map[string]any { return map[string]any{"identifier": "TAPBACK-1"} })
	rc, err := r.b.React(ctx, bridge.Reaction{Conversation: conv, TargetGUID: "TARGET", Type: "love"})
	if err != nil || rc.GUID != "TAPBACK-1" || rc.SentAt.IsZero() {
		t.Fatalf("React: %+v, %v", rc, err)
	}
	if f := fh.seen(t, 1)[0]; f["action"] != "send-reaction" || frameData(f)["reactionType"] != "love" || frameData(f)["chatGuid"] != dm.GUID {
		t.Errorf("tapback frame %v", f)
	}
	// An emoji tapback needs a helper that declares it.
	_, err = r.b.React(ctx, bridge.Reaction{Conversation: conv, TargetGUID: "TARGET", Type: bridge.ReactionEmoji, Emoji: "🎉"})
	if !bridge.IsPermanent(err) || !bridge.IsNotSent(err) {
		t.Fatalf("emoji tapback to a stock helper: %v", err)
	}
	fh.seen(t, 0)
	fh.peer.send(map[string]any{"event": "capabilities", "capabilities": []string{HelperEmojiReactions}})
	if ev := nextEvent(t, r.b.helper); ev.Name != "capabilities" {
		t.Fatalf("event %q", ev.Name)
	}
	if _, err := r.b.React(ctx, bridge.Reaction{Conversation: conv, TargetGUID: "TARGET", Type: bridge.ReactionEmoji, Emoji: "🎉", Remove: true}); err != nil {
		t.Fatalf("emoji tapback: %v", err)
	}
	if f := fh.seen(t, 1)[0]; frameData(f)["reactionType"] != "-emoji" || frameData(f)["emoji"] != "🎉" {
		t.Errorf("emoji tapback frame %v", f)
	}

	// Notifications: no answer.
	for _, c := range []struct {
		action string
		do     func() error
	}{
		{"start-typing", func() error { return r.b.SetTyping(ctx, bridge.Typing{Conversation: conv, On: true}) }},
		{"stop-typing", func() error { return r.b.SetTyping(ctx, bridge.Typing{Conversation: conv}) }},
		{"mark-chat-read", func() error { return r.b.MarkRead(ctx, bridge.Read{Conversation: conv}) }},
	} {
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.action, err)
		}
		if f := fh.seen(t, 1)[0]; f["action"] != c.action || frameData(f)["chatGuid"] != dm.GUID || f["transactionId"] != nil {
			t.Errorf("%s frame %v", c.action, f)
		}
	}

	// An edit the helper cannot place under the first GUID goes to the
	// next form.
	fh.answer(func(f map[string]any) map[string]any {
		if frameData(f)["chatGuid"] == dm.GUID {
			return map[string]any{"error": "Chat does not exist!"}
		}
		return nil
	})
	if err := r.b.Edit(ctx, bridge.Edit{Conversation: conv, TargetGUID: "TARGET", Text: "fixed"}); err != nil {
		t.Fatalf("Edit: %v", err)
	}
	frames := fh.seen(t, 2)
	if frames[0]["action"] != "edit-message" || frameData(frames[0])["chatGuid"] != dm.GUID || frameData(frames[1])["chatGuid"] != "any;-;"+alice ||
		frameData(frames[1])["editedMessage"] != "fixed" {
		t.Errorf("edit frames %v", frames)
	}
	// Refused in every form: final.
	fh.answer(func(map[string]any) map[string]any { return map[string]any{"error": "Chat does not exist!"} })
	var he *HelperError
	if err := r.b.Unsend(ctx, bridge.Unsend{Conversation: conv, TargetGUID: "TARGET"}); !bridge.IsPermanent(err) || !errors.As(err, &he) ||
		he.Action != "unsend-message" {
		t.Fatalf("Unsend refused: %v", err)
	}
	fh.seen(t, 2)
	fh.answer(nil)
	if err := r.b.Unsend(ctx, bridge.Unsend{Conversation: conv, TargetGUID: "TARGET"}); err != nil {
		t.Fatalf("Unsend: %v", err)
	}
	fh.seen(t, 1)

	for _, c := range []struct {
		change bridge.GroupChange
		action string
		field  string
		value  string
	}{
		{bridge.GroupChange{Action: bridge.ChatRenamed, Name: "Crag crew"}, "set-display-name", "newName", "Crag crew"},
		{bridge.GroupChange{Action: bridge.ChatParticipantAdded, Participant: carol}, "add-participant", "address", carol},
		{bridge.GroupChange{Action: bridge.ChatParticipantRemoved, Participant: carol}, "remove-participant", "address", carol},
		{bridge.GroupChange{Action: bridge.ChatParticipantLeft}, "leave-chat", "chatGuid", group.GUID},
	} {
		c.change.Conversation = groupConv
		if err := r.b.ChangeGroup(ctx, c.change); err != nil {
			t.Fatalf("%s: %v", c.action, err)
		}
		if f := fh.seen(t, 1)[0]; f["action"] != c.action || frameData(f)["chatGuid"] != group.GUID || frameData(f)[c.field] != c.value {
			t.Errorf("%s frame %v", c.action, f)
		}
	}
	if err := r.b.ChangeGroup(ctx, bridge.GroupChange{Conversation: groupConv, Action: "explode"}); !bridge.IsPermanent(err) {
		t.Fatalf("unknown group change: %v", err)
	}
	fh.seen(t, 0)
}

// A new group is created by the helper, which sends its first message: the
// bridge follows that message in chat.db, and names the group after.
func TestCreateGroup(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TextTimeout = 300 * time.Millisecond })
	fh := serveHelper(t, r.b.helper, nil)
	ctx := t.Context()
	var group chatdbtest.ChatRef
	fh.answer(func(f map[string]any) map[string]any {
		switch f["action"] {
		case "create-chat":
			group = r.db.GroupChat("imessage", "", alice, bob)
			r.db.Insert(chatdbtest.Msg{Chat: group, GUID: "FIRST-1", Text: frameData(f)["message"].(string), IsSent: true})
			return map[string]any{"identifier": "FIRST-1"}
		}
		return nil
	})
	handoffs := 0
	g := bridge.NewGroup{Line: rigLine, Service: "imessage", Participants: []string{alice, bob}, Name: "Crag crew", Text: "climbing?",
		Handoff: func(context.Context) error { handoffs++; return nil }}
	chat, rc, err := r.b.CreateGroup(ctx, g)
	frames := fh.seen(t, 2)
	if err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	if chat.GUID != group.GUID || chat.Identifier != group.Identifier || !chat.IsGroup || chat.Name != "Crag crew" ||
		!slices.Equal(chat.Participants, []string{alice, bob}) {
		t.Errorf("chat %+v, want %s", chat, group.GUID)
	}
	if rc.GUID != "FIRST-1" || rc.ChatGUID != group.GUID || handoffs != 1 {
		t.Errorf("receipt %+v, %d handoffs", rc, handoffs)
	}
	if d := frameData(frames[0]); frames[0]["action"] != "create-chat" || d["service"] != "iMessage" || d["message"] != "climbing?" {
		t.Errorf("create-chat frame %v", frames[0])
	}
	if d := frameData(frames[1]); frames[1]["action"] != "set-display-name" || d["chatGuid"] != group.GUID || d["newName"] != "Crag crew" {
		t.Errorf("set-display-name frame %v", frames[1])
	}

	// An older helper answers with the chat's GUID: the first message is
	// found by its text. A name it refuses leaves the group unnamed.
	fh.answer(func(f map[string]any) map[string]any {
		switch f["action"] {
		case "create-chat":
			group = r.db.GroupChat("imessage", "", alice, carol)
			sendRow(r.db, group, "bouldering?")
			return map[string]any{"identifier": group.GUID}
		}
		return map[string]any{"error": "Chat does not exist!"}
	})
	g.Participants, g.Text = []string{alice, carol}, "bouldering?"
	chat, _, err = r.b.CreateGroup(ctx, g)
	fh.seen(t, 3) // create-chat, set-display-name in both forms
	if err != nil || chat.GUID != group.GUID || chat.Name != "" {
		t.Fatalf("CreateGroup with an older helper: %+v, %v", chat, err)
	}
	if !strings.Contains(r.logs.String(), "the new group could not be named") {
		t.Errorf("log:\n%s", r.logs)
	}

	// The first message in a one-to-one chat: not a group.
	dm := r.db.DirectChat("imessage", alice)
	fh.answer(func(f map[string]any) map[string]any {
		r.db.Insert(chatdbtest.Msg{Chat: dm, GUID: "NOT-A-GROUP", Text: "hi", IsSent: true})
		return map[string]any{"identifier": "NOT-A-GROUP"}
	})
	g.Name, g.Text = "", "hi"
	if _, _, err := r.b.CreateGroup(ctx, g); !bridge.IsPermanent(err) || !strings.Contains(err.Error(), "is not a group") {
		t.Fatalf("CreateGroup answered with a one-to-one chat: %v", err)
	}
	fh.seen(t, 1)

	// A first message that never shows, by GUID or by chat.
	for _, answer := range []string{"NEVER-WRITTEN", "iMessage;+;chat000000000000000001"} {
		fh.answer(func(map[string]any) map[string]any { return map[string]any{"identifier": answer} })
		if _, _, err := r.b.CreateGroup(ctx, g); !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) {
			t.Fatalf("CreateGroup answered %s: %v", answer, err)
		}
		fh.seen(t, 1)
	}

	// Refused by the helper: final, as it may have done it.
	fh.answer(func(map[string]any) map[string]any { return map[string]any{"error": "Could not create chat"} })
	if _, _, err := r.b.CreateGroup(ctx, g); !bridge.IsPermanent(err) {
		t.Fatalf("refused CreateGroup: %v", err)
	}
	fh.seen(t, 1)

	// Resumed after a stop, or on an unknown service: refused before the
	// helper hears of it.
	resumed := g
	resumed.HandedAt = time.Now()
	if _, _, err := r.b.CreateGroup(ctx, resumed); !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) {
		t.Fatalf("resumed CreateGroup: %v", err)
	}
	other := g
	other.Service = "fax"
	if _, _, err := r.b.CreateGroup(ctx, other); !bridge.IsPermanent(err) {
		t.Fatalf("CreateGroup on an unknown service: %v", err)
	}
	failing := g
	failing.Handoff = func(context.Context) error { return errors.New("outbox closed") }
	if _, _, err := r.b.CreateGroup(ctx, failing); err == nil || !strings.Contains(err.Error(), "outbox closed") {
		t.Fatalf("CreateGroup with a failing Handoff: %v", err)
	}
	fh.seen(t, 0)
}
