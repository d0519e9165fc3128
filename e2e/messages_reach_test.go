package e2e

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// On a Mac, edits, unsends, emoji tapbacks, groups and availability go
// through the private-API helper: these are the frames it is handed, one
// per request, and what chat.db then records reaches the API.
func TestMessagesReachThroughTheHelper(t *testing.T) {
	mac := newFakeMac(t)
	const alice, bob = "+15551230001", "+15551230002"
	const newGroup = "iMessage;+;chat998877665544332211"
	dm := mac.db.DirectChat("imessage", alice)
	bobDM := mac.db.DirectChat("imessage", bob)
	helperPort := freeTCPPort(t)
	td := startTestDaemon(t, mac.config(helperPort))
	key := td.key()
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hi"})
	mac.db.Insert(chatdbtest.Msg{Chat: bobDM, From: bob, Text: "hey"})
	// A message the line sent (from the owner's iPhone), to edit.
	_, mineGUID := mac.db.Insert(chatdbtest.Msg{Chat: dm, Text: "see you at 5", IsSent: true})
	var mine map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range td.messagesOf(key, alice) {
			if m["guid"] == mineGUID {
				mine = m
			}
		}
		return mine != nil
	})
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(key, bob)) == 1 })

	macCaps := func() map[string]any {
		for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
			if l["handle"] == macLine {
				return l["capabilities"].(map[string]any)
			}
		}
		t.Fatal("no Mac line")
		return nil
	}
	// Without the helper: each refused, with the reason in capabilities.
	for f, c := range macCaps() {
		if c := c.(map[string]any); c["available"] != false || c["reason"] != "the private-API helper is not connected" {
			t.Errorf("capability %s without the helper: %v", f, c)
		}
	}
	edit := map[string]any{"from": macLine, "message_id": mineGUID, "text": "see you at 6"}
	for _, c := range []struct {
		method, path string
		body         map[string]any
	}{
		{"POST", "/v1/edits", edit},
		{"POST", "/v1/unsends", map[string]any{"from": macLine, "message_id": mineGUID}},
		{"POST", "/v1/groups", map[string]any{"from": macLine, "participants": []string{alice, bob}, "text": "x"}},
		{"POST", "/v1/reactions", map[string]any{"from": macLine, "to": alice, "message_id": mineGUID, "type": "emoji", "emoji": "🎉"}},
		{"GET", "/v1/availability?from=" + macLine + "&handle=" + alice, nil},
	} {
		if r := td.call(c.method, c.path, key, c.body); r.Status != 400 || r.ErrCode() != "advanced_features_required" {
			t.Fatalf("%s %s without the helper: %d %s", c.method, c.path, r.Status, r.Raw)
		}
	}

	// The helper creates the group as Messages does (the chat, its first
	// message), and answers with that message's GUID, as the BlueBubbles
	// helper's create-chat does.
	var g chatdbtest.ChatRef
	var firstGUID string
	helper := connectHelperDeclaring(t, helperPort, []string{"emoji-reactions"}, func(f map[string]any) string {
		switch f["action"] {
		case "create-chat":
			g = mac.db.ChatWithGUID(newGroup, "iMessage", alice, bob)
			_, firstGUID = mac.db.Insert(chatdbtest.Msg{Chat: g, Text: "climbing?", IsSent: true})
			return fmt.Sprintf(`"identifier":%q`, firstGUID)
		case "check-imessage-availability":
			return `"data":{"available":false}`
		}
		return ""
	})
	testkit.Eventually(t, 5*time.Second, func() bool { return macCaps()["edit"].(map[string]any)["available"] == true })
	frame := func(action string, data map[string]any) {
		t.Helper()
		f := helper.next(t)
		if f["action"] != action || !reflect.DeepEqual(f["data"], data) {
			t.Fatalf("frame %v, want %s %v", f, action, data)
		}
	}
	sent := func(path string, body map[string]any) map[string]any {
		t.Helper()
		r := td.call("POST", path, key, body)
		if r.Status != 201 {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Raw)
		}
		return r.Body
	}
	waitSent := func(item map[string]any) map[string]any {
		t.Helper()
		done := td.waitOutbox(key, item["id"].(string))
		if done["status"] != "sent" {
			t.Fatalf("item %v", done)
		}
		return done
	}

	// Edit: the frame, then what Messages records.
	waitSent(sent("/v1/edits", edit))
	frame("edit-message", map[string]any{"chatGuid": dm.GUID, "messageGuid": mineGUID, "editedMessage": "see you at 6",
		"backwardsCompatibilityMessage": "Edited to “see you at 6”", "partIndex": float64(0)})
	mac.db.Edit(mineGUID, "see you at 6", time.Now())
	testkit.Eventually(t, 10*time.Second, func() bool {
		m := td.messageByGUID(key, alice, mineGUID)
		return m["text"] == "see you at 6" && isTimestamp(m["edited_at"])
	})

	// An emoji tapback.
	waitSent(sent("/v1/reactions", map[string]any{"from": macLine, "to": alice, "message_id": mineGUID, "type": "emoji", "emoji": "👍🏽"}))
	frame("send-reaction", map[string]any{"chatGuid": dm.GUID, "selectedMessageGuid": mineGUID, "reactionType": "emoji", "emoji": "👍🏽", "partIndex": float64(0)})

	// Unsend.
	waitSent(sent("/v1/unsends", map[string]any{"from": macLine, "message_id": mineGUID}))
	frame("unsend-message", map[string]any{"chatGuid": dm.GUID, "messageGuid": mineGUID, "partIndex": float64(0)})
	mac.db.Unsend(mineGUID, time.Now())
	testkit.Eventually(t, 10*time.Second, func() bool { return isTimestamp(td.messageByGUID(key, alice, mineGUID)["unsent_at"]) })

	// A group: create-chat names it; its first message is found in chat.db;
	// then it is named.
	item := sent("/v1/groups", map[string]any{"from": macLine, "participants": []string{alice, bob}, "name": "Climbers", "text": "climbing?"})
	frame("create-chat", map[string]any{"addresses": []any{alice, bob}, "message": "climbing?", "service": "iMessage",
		"attributedBody": nil, "effectId": nil, "subject": nil})
	frame("set-display-name", map[string]any{"chatGuid": newGroup, "newName": "Climbers"})
	done := waitSent(item)
	chatID, _ := done["chat_id"].(string)
	if chatID == "" || done["chat_guid"] != newGroup {
		t.Fatalf("group item: %v", done)
	}
	msgs := td.call("GET", "/v1/messages?from="+macLine+"&to="+chatID, key, nil).Data()
	if len(msgs) != 1 || msgs[0]["guid"] != firstGUID || msgs[0]["outbox_id"] != item["id"] || msgs[0]["text"] != "climbing?" {
		t.Fatalf("the group's messages: %v", msgs)
	}

	// Its changes, one frame each.
	for _, c := range []struct {
		path   string
		body   map[string]any
		action string
		data   map[string]any
	}{
		{"/v1/groups/rename", map[string]any{"name": "Crag crew"}, "set-display-name", map[string]any{"newName": "Crag crew"}},
		{"/v1/groups/participants", map[string]any{"remove": bob}, "remove-participant", map[string]any{"address": bob}},
		{"/v1/groups/participants", map[string]any{"add": bob}, "add-participant", map[string]any{"address": bob}},
		{"/v1/groups/leave", map[string]any{}, "leave-chat", map[string]any{}},
	} {
		body := map[string]any{"from": macLine, "to": chatID}
		for k, v := range c.body {
			body[k] = v
		}
		waitSent(sent(c.path, body))
		c.data["chatGuid"] = newGroup
		frame(c.action, c.data)
		if c.action == "set-display-name" {
			// What Messages records: the rename, by the line's owner.
			mac.db.Rename(g, "", "Crag crew")
			testkit.Eventually(t, 10*time.Second, func() bool { return td.chatOf2(key, macLine, chatID)["name"] == "Crag crew" })
		}
		if c.action == "remove-participant" {
			mac.db.RemoveMember(g, "", bob)
			testkit.Eventually(t, 10*time.Second, func() bool {
				return reflect.DeepEqual(td.chatOf2(key, macLine, chatID)["participants"], []any{alice})
			})
		}
	}

	// Availability: asked once, then kept.
	for range 2 {
		r := td.call("GET", "/v1/availability?from="+macLine+"&handle="+alice, key, nil)
		if r.Status != 200 || r.Body["imessage"] != false {
			t.Fatalf("availability: %d %s", r.Status, r.Raw)
		}
	}
	frame("check-imessage-availability", map[string]any{"aliasType": "phone", "address": alice})
	// Nothing more was handed to the helper: the next frame is the next
	// request's.
	td.call("POST", "/v1/typing", key, map[string]any{"from": macLine, "to": alice})
	frame("start-typing", map[string]any{"chatGuid": dm.GUID})
	select {
	case f := <-helper.frames:
		t.Fatalf("an extra frame: %v", f)
	default:
	}
}

// chatOf2 is a line's chat id, as GET /v1/chats lists it.
func (td *testDaemon) chatOf2(key, line, id string) map[string]any {
	td.t.Helper()
	for _, c := range td.listAll(key, "/v1/chats?from="+line+"&limit=100") {
		if c["id"] == id {
			return c
		}
	}
	return nil
}
