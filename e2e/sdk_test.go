package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/apitest"
)

// The official SDK (messages-dev/sdk) parses every response with a schema
// and throws on a mismatch. These are its rules, restated: which fields are
// required, their types, which may be null, which values an enum allows.
// An app built on the SDK works against Blueline only if they hold.

type kind int

const (
	kString kind = iota
	kNumber
	kBool
	kArray
	kObject
)

type field struct {
	kind     kind
	nullable bool     // null allowed (zod nullish/nullable)
	optional bool     // may be absent
	enum     []string // allowed string values
	items    *schema  // for arrays of objects
	strings  bool     // for arrays of strings
}

type schema map[string]field

var (
	sdkAttachment = schema{
		"filename": {kind: kString, nullable: true, optional: true}, "mime_type": {kind: kString, nullable: true, optional: true},
		"size": {kind: kNumber, nullable: true, optional: true}, "url": {kind: kString, nullable: true, optional: true},
		"transcription": {kind: kString, nullable: true, optional: true},
	}
	sdkLine = schema{
		"id": {kind: kString}, "handle": {kind: kString}, "label": {kind: kString, nullable: true, optional: true},
		"service": {kind: kString, enum: []string{"imessage", "sms", "auto"}}, "is_active": {kind: kBool},
	}
	sdkChat = schema{
		"id": {kind: kString}, "line_id": {kind: kString}, "identifier": {kind: kString}, "service": {kind: kString},
		"name": {kind: kString, nullable: true, optional: true}, "last_message_at": {kind: kNumber, nullable: true, optional: true},
		"is_group": {kind: kBool, nullable: true, optional: true}, "participants": {kind: kArray, nullable: true, optional: true, strings: true},
	}
	sdkMessage = schema{
		"id": {kind: kString}, "line_id": {kind: kString}, "chat_id": {kind: kString}, "guid": {kind: kString}, "sender": {kind: kString},
		"text": {kind: kString, nullable: true, optional: true}, "attachments": {kind: kArray, items: &sdkAttachment},
		"service": {kind: kString, nullable: true, optional: true}, "is_from_me": {kind: kBool},
		"is_audio_message": {kind: kBool, nullable: true, optional: true}, "sent_at": {kind: kNumber}, "synced_at": {kind: kNumber},
		"outbox_id": {kind: kString, nullable: true, optional: true}, "reply_to_guid": {kind: kString, nullable: true, optional: true},
	}
	sdkOutboxItem = schema{
		"id": {kind: kString}, "status": {kind: kString, enum: []string{"pending", "claimed", "sent", "failed"}},
		"error": {kind: kString, nullable: true, optional: true}, "created_at": {kind: kNumber, optional: true},
		"completed_at": {kind: kNumber, nullable: true, optional: true}, "request_id": {kind: kString},
	}
	sdkErrorDetail = schema{
		"type": {kind: kString}, "code": {kind: kString}, "message": {kind: kString}, "param": {kind: kString, optional: true},
	}
	sdkError = schema{"error": {kind: kObject, items: &sdkErrorDetail}, "request_id": {kind: kString}}
	sdkFile  = schema{
		"id": {kind: kString}, "url": {kind: kString, nullable: true, optional: true},
		"filename": {kind: kString, nullable: true, optional: true}, "mime_type": {kind: kString},
		"size": {kind: kNumber}, "request_id": {kind: kString},
	}
	sdkReaction = schema{
		"id": {kind: kString}, "message_id": {kind: kString}, "type": {kind: kString}, "sender": {kind: kString},
		"is_from_me": {kind: kBool}, "added": {kind: kBool}, "sent_at": {kind: kNumber}, "synced_at": {kind: kNumber},
	}
	sdkTypingIndicator = schema{
		"id": {kind: kString}, "chat_id": {kind: kString}, "handle": {kind: kString}, "is_typing": {kind: kBool},
		"updated_at": {kind: kNumber},
	}
	sdkReadReceipt = schema{
		"id": {kind: kString}, "chat_id": {kind: kString}, "handle": {kind: kString}, "last_read_at": {kind: kNumber},
		"synced_at": {kind: kNumber},
	}
)

func sdkList(item schema) schema {
	return schema{
		"data": {kind: kArray, items: &item}, "has_more": {kind: kBool},
		"next_cursor": {kind: kString, nullable: true}, "request_id": {kind: kString},
	}
}

// conform returns every way v breaks s.
func conform(path string, v map[string]any, s schema) []string {
	var bad []string
	for name, f := range s {
		p := path + "." + name
		val, present := v[name]
		switch {
		case !present && f.optional:
			continue
		case !present:
			bad = append(bad, p+" is missing")
			continue
		case val == nil && f.nullable:
			continue
		case val == nil:
			bad = append(bad, p+" is null")
			continue
		}
		ok := false
		switch f.kind {
		case kString:
			str, isStr := val.(string)
			ok = isStr && (f.enum == nil || slices.Contains(f.enum, str))
		case kNumber:
			_, ok = val.(float64)
		case kBool:
			_, ok = val.(bool)
		case kObject:
			obj, isObj := val.(map[string]any)
			if ok = isObj; ok && f.items != nil {
				bad = append(bad, conform(p, obj, *f.items)...)
			}
		case kArray:
			items, isArr := val.([]any)
			ok = isArr
			for i, it := range items {
				ip := fmt.Sprintf("%s[%d]", p, i)
				if f.strings {
					if _, isStr := it.(string); !isStr {
						bad = append(bad, ip+" is not a string")
					}
				} else if f.items != nil {
					obj, isObj := it.(map[string]any)
					if !isObj {
						bad = append(bad, ip+" is not an object")
						continue
					}
					bad = append(bad, conform(ip, obj, *f.items)...)
				}
			}
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has the wrong type or value: %v", p, val))
		}
	}
	return bad
}

func assertConforms(t *testing.T, what string, r response, s schema) {
	t.Helper()
	for _, problem := range conform("$", r.Body, s) {
		t.Errorf("%s: %s\n%s", what, problem, r.Raw)
	}
}

// Every kind of answer of the endpoints built so far, checked against the
// SDK's schemas: an SDK app would throw on any of these failures.
func TestResponsesMatchSDKSchemas(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key("--owner", "dev")
	td.activateSandbox(key, alice)
	in := td.inbound(mainLine, alice, "hello")
	td.inbound(mainLine, bob, "group", "--group", "G", "--participants", bob+","+carol)
	td.inbound(plainLine, alice, "hi")

	obx := td.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "text": "reply", "reply_to": in["id"]})
	if obx.Status != 201 {
		t.Fatalf("send: %d %s", obx.Status, obx.Raw)
	}
	assertConforms(t, "POST /v1/messages", obx, sdkOutboxItem)
	td.waitOutbox(key, obx.Body["id"].(string))
	assertConforms(t, "GET /v1/outbox", td.call("GET", "/v1/outbox?id="+obx.Body["id"].(string), key, nil), sdkOutboxItem)
	assertConforms(t, "GET /v1/lines", td.call("GET", "/v1/lines", key, nil), sdkList(sdkLine))
	for _, line := range []string{mainLine, sandboxLine, plainLine} {
		assertConforms(t, "GET /v1/chats", td.call("GET", "/v1/chats?from="+line, key, nil), sdkList(sdkChat))
	}
	assertConforms(t, "GET /v1/messages", td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil), sdkList(sdkMessage))
	assertConforms(t, "GET /v1/messages (empty)", td.call("GET", "/v1/messages?from="+mainLine+"&to="+carol, key, nil), sdkList(sdkMessage))
	assertConforms(t, "GET /v1/messages (paged)", td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&limit=1", key, nil), sdkList(sdkMessage))

	for _, r := range []response{
		td.call("GET", "/v1/lines", "", nil),
		td.call("GET", "/v1/chats", key, nil),
		td.call("POST", "/v1/messages", key, "{"),
		td.call("GET", "/v1/nowhere", key, nil),
		td.call("DELETE", "/v1/lines", key, nil),
	} {
		assertConforms(t, "error", r, sdkError)
	}

	// The checker itself catches what the SDK would reject.
	if len(conform("$", map[string]any{"id": "x", "status": "done", "request_id": "r"}, sdkOutboxItem)) == 0 {
		t.Fatal("conform accepted an unknown status")
	}
	if len(conform("$", map[string]any{"data": []any{}, "has_more": false, "request_id": "r"}, sdkList(sdkLine))) == 0 {
		t.Fatal("conform accepted a list without next_cursor")
	}
}

// Files, reactions, typing indicators, read receipts and audio messages, as
// the SDK parses them.
func TestAdvancedResponsesMatchSDKSchemas(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key("--owner", "dev")
	in := td.inbound(mainLine, alice, "hello")
	msgID, guid := in["id"].(string), in["guid"].(string)
	td.inbound(plainLine, alice, "hi")

	up := td.call("POST", "/v1/files", key, string(fakeM4A), "Content-Type", "audio/mp4", "X-Filename", "memo.m4a")
	if up.Status != 201 {
		t.Fatalf("upload: %d %s", up.Status, up.Raw)
	}
	assertConforms(t, "POST /v1/files", up, sdkFile)
	unnamed := td.call("POST", "/v1/files", key, "plain bytes", "Content-Type", "text/plain")
	assertConforms(t, "POST /v1/files (no filename)", unnamed, sdkFile)
	audio := up.Body["id"].(string)

	// getFileUrl: redirect "manual", then the Location header.
	resp := td.fileRedirect(key, audio)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || !strings.Contains(loc, "/files/"+audio) {
		t.Errorf("GET /v1/files: %d, Location %q", resp.StatusCode, loc)
	}

	for _, w := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/reactions", map[string]any{"message_id": msgID, "type": "love"}},
		{"/v1/typing", map[string]any{"state": "on"}},
		{"/v1/receipts", map[string]any{}},
		{"/v1/audio-messages", map[string]any{"audio_message": audio}},
		{"/v1/voice-notes", map[string]any{"voice_note": audio, "reply_to": guid}},
	} {
		r := td.call("POST", w.path, key, apitest.WithFields(w.body, "from", mainLine, "to", alice))
		if r.Status != 201 {
			t.Fatalf("POST %s: %d %s", w.path, r.Status, r.Raw)
		}
		assertConforms(t, "POST "+w.path, r, sdkOutboxItem)
		td.waitOutbox(key, r.Body["id"].(string))
		assertConforms(t, "GET /v1/outbox ("+w.path+")", td.call("GET", "/v1/outbox?id="+r.Body["id"].(string), key, nil), sdkOutboxItem)
	}
	td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", guid, "--type", "question", "--remove")
	td.simJSON("typing", "--line", mainLine, "--from", alice)

	for _, c := range []struct {
		path string
		item schema
	}{
		{"/v1/reactions?message_id=" + msgID, sdkReaction},
		{"/v1/reactions?message_id=" + guid, sdkReaction},
		{"/v1/typing?from=" + mainLine + "&to=" + alice, sdkTypingIndicator},
		{"/v1/receipts?from=" + mainLine + "&to=" + alice, sdkReadReceipt},
		{"/v1/messages?from=" + mainLine + "&to=" + alice, sdkMessage},
	} {
		r := td.call("GET", c.path, key, nil)
		assertConforms(t, "GET "+c.path, r, sdkList(c.item))
		if len(r.Data()) == 0 {
			t.Errorf("GET %s: an empty list checks no item", c.path)
		}
	}
	withAttachment := 0
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data() {
		if atts, _ := m["attachments"].([]any); len(atts) > 0 {
			withAttachment++
		}
	}
	if withAttachment != 2 {
		t.Errorf("%d messages with an attachment, want the 2 audio messages", withAttachment)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/reactions", "{"},
		{"POST", "/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": msgID}},
		{"POST", "/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", "type": "like"}},
		{"POST", "/v1/typing", map[string]any{"from": mainLine, "to": alice, "state": "sideways"}},
		{"POST", "/v1/receipts", map[string]any{"from": plainLine, "to": alice}},
		{"POST", "/v1/audio-messages", map[string]any{"from": mainLine, "to": alice, "audio_message": unnamed.Body["id"]}},
		{"POST", "/v1/voice-notes", map[string]any{"from": mainLine, "to": carol, "voice_note": audio}},
		{"POST", "/v1/files", ""},
		{"GET", "/v1/reactions", nil},
		{"GET", "/v1/reactions?message_id=0000-NO-SUCH-GUID", nil},
		{"GET", "/v1/typing?from=" + mainLine, nil},
		{"GET", "/v1/receipts?from=+15559999999&to=" + alice, nil},
		{"GET", "/v1/files?id=file_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil},
	} {
		r := td.call(c.method, c.path, key, c.body)
		if r.Status < 400 {
			t.Errorf("%s %s %v: %d, want an error", c.method, c.path, c.body, r.Status)
		}
		assertConforms(t, c.method+" "+c.path, r, sdkError)
	}
}
