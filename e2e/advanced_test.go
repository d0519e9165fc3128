package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// Reactions, typing indicators, read receipts and audio messages: the writes
// that need a line with advanced features, and the reads that show their
// effect.

// postItem makes a write that must be accepted and returns the outbox item
// of the answer.
func (td *testDaemon) postItem(key, path string, body map[string]any, headers ...string) map[string]any {
	td.t.Helper()
	r := td.call("POST", path, key, body, headers...)
	if id, _ := r.Body["id"].(string); r.Status != 201 || r.Body["status"] != "pending" || !strings.HasPrefix(id, "obx_") {
		td.t.Fatalf("POST %s %v: %d %s", path, body, r.Status, r.Raw)
	}
	return r.Body
}

// postSent makes a write and waits for its delivery, which must succeed.
func (td *testDaemon) postSent(key, path string, body map[string]any) map[string]any {
	td.t.Helper()
	item := td.waitOutbox(key, td.postItem(key, path, body)["id"].(string))
	if item["status"] != "sent" {
		td.t.Fatalf("POST %s %v was not delivered: %v", path, body, item)
	}
	return item
}

// listAll reads a list that must come whole: the SDK asks for reactions,
// typing indicators and receipts again without a cursor.
func (td *testDaemon) listAll(key, path string) []map[string]any {
	td.t.Helper()
	r := td.call("GET", path, key, nil)
	if r.Status != 200 || r.Body["has_more"] != false || r.Body["next_cursor"] != nil {
		td.t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
	}
	return r.Data()
}

// simJSON runs a sim command that must succeed and decodes what it prints.
func (td *testDaemon) simJSON(args ...string) map[string]any {
	td.t.Helper()
	var v map[string]any
	decodeJSON(td.t, td.mustCLI(append([]string{"sim"}, args...)...), &v)
	return v
}

// uploadedFile uploads a file and returns its ID.
func (td *testDaemon) uploadedFile(key string, data []byte, contentType, filename string) string {
	td.t.Helper()
	r := td.call("POST", "/v1/files", key, string(data), "Content-Type", contentType, "X-Filename", filename)
	if r.Status != 201 {
		td.t.Fatalf("upload %s: %d %s", filename, r.Status, r.Raw)
	}
	return r.Body["id"].(string)
}

// networkActions counts what the simulated network did for an outbox item.
func (td *testDaemon) networkActions(obxID string) int {
	n := 0
	for _, o := range td.d.Sim().Delivered() {
		if o.OutboxID == obxID {
			n++
		}
	}
	for _, o := range td.d.Sim().Reactions() {
		if o.OutboxID == obxID {
			n++
		}
	}
	for _, o := range td.d.Sim().Typing() {
		if o.OutboxID == obxID {
			n++
		}
	}
	for _, o := range td.d.Sim().Reads() {
		if o.OutboxID == obxID {
			n++
		}
	}
	return n
}

func isTimestamp(v any) bool {
	n, ok := v.(float64)
	return ok && n > 0
}

var fakeM4A = bytes.Repeat([]byte("\x00\x00\x00\x18ftypM4A \x00\x01\x02"), 40)

func TestReactions(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	in := td.inbound(mainLine, alice, "lunch?")
	msgID, guid, chatID := in["id"].(string), in["guid"].(string), in["chat_id"].(string)
	react := func(message, typ string, remove bool) map[string]any {
		t.Helper()
		body := map[string]any{"from": mainLine, "to": alice, "message_id": message, "type": typ}
		if remove {
			body["remove"] = true
		}
		return td.postSent(key, "/v1/reactions", body)
	}
	list := func() []map[string]any { return td.listAll(key, "/v1/reactions?message_id="+msgID) }

	item := react(msgID, "love", false)
	got := td.d.Sim().Reactions()
	if len(got) != 1 || got[0].TargetGUID != guid || got[0].Type != "love" || got[0].Remove || got[0].Line != mainLine ||
		got[0].Chat.Identifier != alice || got[0].Service != "imessage" || got[0].OutboxID != item["id"] {
		t.Fatalf("the network got %+v", got)
	}
	if p := item["payload"].(map[string]any); p["message_id"] != msgID || p["type"] != "love" || item["attempts"] != 1.0 {
		t.Errorf("outbox item %v", item)
	}
	recs := list()
	if len(recs) != 1 {
		t.Fatalf("reactions after one: %v", recs)
	}
	rec := recs[0]
	if !storage.ValidID(rec["id"].(string), "rxn_") || rec["message_id"] != msgID || rec["chat_id"] != chatID || rec["type"] != "love" ||
		rec["sender"] != mainLine || rec["is_from_me"] != true || rec["added"] != true || !isTimestamp(rec["sent_at"]) || !isTimestamp(rec["synced_at"]) {
		t.Fatalf("reaction record %v", rec)
	}
	if byGUID := td.listAll(key, "/v1/reactions?message_id="+guid); fmt.Sprint(byGUID) != fmt.Sprint(recs) {
		t.Fatalf("by GUID %v, by ID %v", byGUID, recs)
	}

	// One record per (sender, type): it changes state, never multiplies.
	for _, step := range []struct {
		name, message string
		remove, added bool
	}{
		{"the same again, by GUID", guid, false, true},
		{"removed", msgID, true, false},
		{"removed again", msgID, true, false},
		{"added back", guid, false, true},
	} {
		react(step.message, "love", step.remove)
		if recs := list(); len(recs) != 1 || recs[0]["id"] != rec["id"] || recs[0]["added"] != step.added {
			t.Fatalf("%s: %v", step.name, recs)
		}
	}
	// A sender has one current tapback on a message: like replaces love.
	react(msgID, "like", false)
	recs = list()
	byType := map[any]map[string]any{}
	for _, r := range recs {
		byType[r["type"]] = r
	}
	if len(recs) != 2 || byType["like"]["added"] != true || byType["love"]["added"] != false ||
		byType["love"]["id"] != rec["id"] || byType["like"]["id"] == rec["id"] {
		t.Fatalf("love then like: %v", recs)
	}

	// A contact's tapbacks, from the simulator: stored, not sent anywhere.
	theirs := td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", guid, "--type", "laugh")
	if !storage.ValidID(theirs["id"].(string), "rxn_") || theirs["sender"] != alice || theirs["is_from_me"] != false || theirs["added"] != true ||
		theirs["type"] != "laugh" || theirs["message_id"] != msgID || theirs["chat_id"] != chatID {
		t.Fatalf("sim reaction printed %v", theirs)
	}
	removed := td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", msgID, "--type", "laugh", "--remove")
	if removed["id"] != theirs["id"] || removed["added"] != false {
		t.Fatalf("sim reaction --remove printed %v", removed)
	}
	if recs := list(); len(recs) != 3 || recs[2]["id"] != theirs["id"] || recs[2]["added"] != false {
		t.Fatalf("after the contact's tapback: %v", recs)
	}
	if n := len(td.d.Sim().Reactions()); n != 6 {
		t.Fatalf("the network got %d reactions, want the line's 6", n)
	}

	// The contact reacts to the line's own message.
	td.postSent(key, "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "noon"})
	mine := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&limit=1", key, nil).Data()[0]
	if r := td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", mine["id"].(string), "--type", "emphasize"); r["message_id"] != mine["id"] {
		t.Fatalf("reaction to the line's message: %v", r)
	}

	// In a group, the `to` is the chat and any member may react.
	g := td.inbound(mainLine, bob, "climbing?", "--group", "Climbers", "--participants", bob+","+carol)
	td.postSent(key, "/v1/reactions", map[string]any{"from": mainLine, "to": g["chat_id"], "message_id": g["id"], "type": "question"})
	if last := td.d.Sim().Reactions()[6]; !last.Chat.IsGroup || last.TargetGUID != g["guid"] || last.Type != "question" {
		t.Fatalf("group reaction reached %+v", last)
	}
	td.simJSON("reaction", "--line", mainLine, "--from", carol, "--message", g["guid"].(string), "--type", "like")
	if recs := td.listAll(key, "/v1/reactions?message_id="+g["id"].(string)); len(recs) != 2 || recs[0]["sender"] != mainLine || recs[1]["sender"] != carol {
		t.Fatalf("group message reactions: %v", recs)
	}
}

// Reactions of every type are delivered, contacts react on any line, and
// the simulator refuses what a contact could not do (the API's refusals
// are tested in package server).
func TestReactionVariantsAndSimRefusals(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	in := td.inbound(mainLine, alice, "hi")
	td.inbound(mainLine, bob, "hi")
	plain := td.inbound(plainLine, alice, "hi")
	onlyPlain := td.key("--lines", plainLine)
	ok := map[string]any{"from": mainLine, "to": alice, "message_id": in["id"], "type": "like"}
	// Valid variants: the chat by ID, every type, remove false, unknown fields.
	var last string
	for _, typ := range []string{"love", "like", "dislike", "laugh", "emphasize", "question"} {
		last = td.postItem(key, "/v1/reactions", apitest.WithFields(ok, "type", typ, "to", in["chat_id"], "remove", false, "colour", "blue"))["id"].(string)
	}
	td.waitOutbox(key, last)
	testkit.Eventually(t, 5*time.Second, func() bool { return len(td.d.Sim().Reactions()) == 6 })
	if recs := td.listAll(key, "/v1/reactions?message_id="+in["id"].(string)); len(recs) != 6 {
		t.Fatalf("six types: %v", recs)
	}

	// Reading works on a line without advanced features: contacts react there too.
	if recs := td.listAll(key, "/v1/reactions?message_id="+plain["id"].(string)); len(recs) != 0 {
		t.Fatalf("reactions before any: %v", recs)
	}
	td.simJSON("reaction", "--line", plainLine, "--from", alice, "--message", plain["guid"].(string), "--type", "love")
	if recs := td.listAll(onlyPlain, "/v1/reactions?message_id="+plain["id"].(string)); len(recs) != 1 || recs[0]["sender"] != alice {
		t.Fatalf("reactions on a line without advanced features: %v", recs)
	}

	// The simulator's refusals.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--from", bob, "--message", in["id"].(string), "--type", "like"}, 1, "invalid_parameter_value"},
		{[]string{"--from", alice, "--message", plain["id"].(string), "--type", "like"}, 1, "message_not_found"},
		{[]string{"--from", alice, "--message", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--type", "like"}, 1, "message_not_found"},
		{[]string{"--from", alice, "--message", in["id"].(string), "--type", "wink"}, 1, "invalid_parameter_value"},
		{[]string{"--from", alice, "--message", in["id"].(string)}, 2, "--type"},
		{[]string{"--from", alice, "--type", "like"}, 2, "--message"},
	} {
		args := append([]string{"sim", "reaction", "--line", mainLine}, c.args...)
		if out, errOut, code := td.cli(args...); code != c.code || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errOut)
		}
	}
	if recs := td.listAll(key, "/v1/reactions?message_id="+in["id"].(string)); len(recs) != 6 {
		t.Fatalf("a refused sim reaction was stored: %v", recs)
	}
}

func TestTyping(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	chatID := td.inbound(mainLine, alice, "hi")["chat_id"].(string)
	td.inbound(mainLine, bob, "hi")
	listPath := "/v1/typing?from=" + mainLine + "&to=" + alice
	byHandle := func(inds []map[string]any, h string) map[string]any {
		for _, ind := range inds {
			if ind["handle"] == h {
				return ind
			}
		}
		return nil
	}
	// The line's indicator, once it shows typing; the indicator is kept in
	// memory and may be updated just after the item is recorded sent.
	lineIndicator := func(typing bool) map[string]any {
		t.Helper()
		var ind map[string]any
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if ind = byHandle(td.listAll(key, listPath), mainLine); ind != nil && ind["is_typing"] == typing {
				break
			}
		}
		return ind
	}

	// state defaults to on; a typing item is tried once.
	accepted := td.postItem(key, "/v1/typing", map[string]any{"from": mainLine, "to": alice})
	if accepted["max_attempts"] != 1.0 || accepted["payload"].(map[string]any)["state"] != "on" {
		t.Errorf("typing item %v", accepted)
	}
	if item := td.waitOutbox(key, accepted["id"].(string)); item["status"] != "sent" || item["attempts"] != 1.0 {
		t.Fatalf("typing item after delivery: %v", item)
	}
	if got := td.d.Sim().Typing(); len(got) != 1 || !got[0].On || got[0].Chat.Identifier != alice || got[0].Line != mainLine || got[0].OutboxID != accepted["id"] {
		t.Fatalf("the network got %+v", got)
	}
	on := lineIndicator(true)
	if on == nil || !storage.ValidID(fmt.Sprint(on["id"]), "ind_") || on["chat_id"] != chatID || on["is_typing"] != true || !isTimestamp(on["updated_at"]) {
		t.Errorf("the line's indicator after state on: %v (all: %s)", on, td.call("GET", listPath, key, nil).Raw)
	}
	td.postSent(key, "/v1/typing", map[string]any{"from": mainLine, "to": alice, "state": "off"})
	if got := td.d.Sim().Typing(); len(got) != 2 || got[1].On {
		t.Fatalf("the network got %+v", got)
	}
	off := lineIndicator(false)
	if off == nil || on != nil && off["id"] != on["id"] || off["is_typing"] != false {
		t.Errorf("the line's indicator after state off: %v, before: %v", off, on)
	}

	for _, c := range []struct {
		body   map[string]any
		status int
		code   string
		param  string
	}{
		{map[string]any{"from": mainLine, "to": alice, "state": "sideways"}, 400, "invalid_parameter_value", "state"},
		{map[string]any{"from": mainLine, "to": alice, "state": "ON"}, 400, "invalid_parameter_value", "state"},
		{map[string]any{"from": mainLine, "to": alice, "state": true}, 400, "invalid_parameter_value", "state"},
		{map[string]any{"from": mainLine, "state": "on"}, 400, "missing_required_parameter", "to"},
		{map[string]any{"from": mainLine, "to": carol}, 403, "contact_has_not_messaged", "to"},
		{map[string]any{"from": plainLine, "to": alice, "state": "up"}, 400, "invalid_parameter_value", "state"},
	} {
		if r := td.call("POST", "/v1/typing", key, c.body); r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("POST /v1/typing %v: %d %s", c.body, r.Status, r.Raw)
		}
	}
	for _, c := range []struct {
		key, query string
		status     int
		code       string
	}{
		{key, "?from=" + mainLine, 400, "missing_required_parameter"},
		{key, "?to=" + alice, 400, "missing_required_parameter"},
		{key, "?from=+15559999999&to=" + alice, 404, "line_not_found"},
		{td.key("--lines", plainLine), "?from=" + mainLine + "&to=" + alice, 403, "line_not_accessible"},
		{td.key("--scopes", "typing:write"), "?from=" + mainLine + "&to=" + alice, 403, "insufficient_scope"},
	} {
		if r := td.call("GET", "/v1/typing"+c.query, c.key, nil); r.Status != c.status || r.ErrCode() != c.code {
			t.Errorf("GET /v1/typing%s: %d %s", c.query, r.Status, r.Raw)
		}
	}
	if inds := td.listAll(key, "/v1/typing?from="+mainLine+"&to="+carol); len(inds) != 0 {
		t.Fatalf("indicators with a stranger: %v", inds)
	}

	// A contact types, from the simulator.
	theirs := td.simJSON("typing", "--line", mainLine, "--from", alice)
	if !storage.ValidID(fmt.Sprint(theirs["id"]), "ind_") || theirs["handle"] != alice || theirs["is_typing"] != true || theirs["chat_id"] != chatID {
		t.Fatalf("sim typing printed %v", theirs)
	}
	if listed := byHandle(td.listAll(key, listPath), alice); listed == nil || listed["id"] != theirs["id"] {
		t.Fatalf("the contact's indicator is not listed: %v", td.call("GET", listPath, key, nil).Raw)
	}
	stopped := td.simJSON("typing", "--line", mainLine, "--from", alice, "--state", "off")
	if stopped["id"] != theirs["id"] || stopped["is_typing"] != false {
		t.Fatalf("sim typing --state off printed %v", stopped)
	}
	if listed := byHandle(td.listAll(key, listPath), alice); listed == nil || listed["is_typing"] != false {
		t.Fatalf("the contact's stopped indicator, listed until it expires: %v", listed)
	}
	g := td.inbound(mainLine, bob, "hi all", "--group", "G", "--participants", bob+","+carol)
	if ind := td.simJSON("typing", "--line", mainLine, "--from", carol, "--chat", g["chat_id"].(string)); ind["chat_id"] != g["chat_id"] || ind["handle"] != carol {
		t.Fatalf("typing in a group: %v", ind)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--from", carol}, 1, "chat_not_found"},
		{[]string{"--from", bob, "--chat", chatID}, 1, "invalid_parameter_value"},
		{[]string{"--from", alice, "--chat", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, 1, "chat_not_found"},
		{[]string{"--from", alice, "--state", "maybe"}, 2, "--state"},
		{[]string{}, 2, "--from"},
	} {
		args := append([]string{"sim", "typing", "--line", mainLine}, c.args...)
		if out, errOut, code := td.cli(args...); code != c.code || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("sim typing %v: exit %d, stdout %q, stderr %q", c.args, code, out, errOut)
		}
	}

	// Indicators last TypingTTL after their last change.
	later := time.Now().Add(storage.TypingTTL + time.Second)
	if inds := td.d.TypingIndicators(chatID, later); len(inds) != 0 {
		t.Fatalf("indicators a minute later: %v", inds)
	}
}

// A transient network failure is retried, except for typing: a late
// indicator is worse than none.
func TestAdvancedDeliveryFailures(t *testing.T) {
	td := startTestDaemon(t, "") // max_attempts = 3
	key := td.key()
	in := td.inbound(mainLine, alice, "hi")
	audio := td.uploadedFile(key, fakeM4A, "audio/mp4", "memo.m4a")
	for _, c := range []struct {
		path     string
		body     map[string]any
		status   string
		attempts float64
		errText  any
	}{
		{"/v1/reactions", map[string]any{"message_id": in["id"], "type": "like"}, "sent", 2, nil},
		{"/v1/receipts", map[string]any{}, "sent", 2, nil},
		{"/v1/audio-messages", map[string]any{"audio_message": audio}, "sent", 2, nil},
		{"/v1/typing", map[string]any{"state": "on"}, "failed", 1, "network busy"},
	} {
		td.d.Sim().FailSends(alice, errors.New("network busy"))
		body := apitest.WithFields(c.body, "from", mainLine, "to", alice)
		item := td.waitOutbox(key, td.postItem(key, c.path, body)["id"].(string))
		if item["status"] != c.status || item["attempts"] != c.attempts || item["error"] != c.errText || item["completed_at"] == nil {
			t.Errorf("%s after a transient failure: %v", c.path, item)
		}
		if n := td.networkActions(item["id"].(string)); c.status == "sent" && n != 1 || c.status == "failed" && n != 0 {
			t.Errorf("%s: the network did it %d times", c.path, n)
		}
	}
	if inds := td.listAll(key, "/v1/typing?from="+mainLine+"&to="+alice); len(inds) != 0 {
		t.Errorf("a failed typing item shows an indicator: %v", inds)
	}
	// Failures up to max_attempts fail the item.
	td.d.Sim().FailSends(alice, errors.New("busy"), errors.New("busy"), errors.New("busy"))
	item := td.waitOutbox(key, td.postItem(key, "/v1/receipts", map[string]any{"from": mainLine, "to": alice})["id"].(string))
	if item["status"] != "failed" || item["attempts"] != 3.0 || item["error"] != "busy" {
		t.Errorf("receipt after max_attempts failures: %v", item)
	}
}

func TestReadReceipts(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	chatID := td.inbound(mainLine, alice, "hi")["chat_id"].(string)
	listPath := "/v1/receipts?from=" + mainLine + "&to=" + alice
	if recs := td.listAll(key, listPath); len(recs) != 0 {
		t.Fatalf("receipts before any: %v", recs)
	}
	item := td.postSent(key, "/v1/receipts", map[string]any{"from": mainLine, "to": alice})
	if got := td.d.Sim().Reads(); len(got) != 1 || got[0].Chat.Identifier != alice || got[0].Line != mainLine || got[0].OutboxID != item["id"] {
		t.Fatalf("the network got %+v", got)
	}
	recs := td.listAll(key, listPath)
	if len(recs) != 1 || !storage.ValidID(fmt.Sprint(recs[0]["id"]), "rcp_") || recs[0]["chat_id"] != chatID || recs[0]["handle"] != mainLine ||
		!isTimestamp(recs[0]["last_read_at"]) || !isTimestamp(recs[0]["synced_at"]) {
		t.Fatalf("receipts: %v", recs)
	}
	first := recs[0]
	td.postSent(key, "/v1/receipts", map[string]any{"from": mainLine, "to": chatID})
	recs = td.listAll(key, listPath)
	if len(recs) != 1 || recs[0]["id"] != first["id"] || recs[0]["last_read_at"].(float64) < first["last_read_at"].(float64) {
		t.Fatalf("read again: %v, first %v", recs, first)
	}
	if len(td.d.Sim().Reads()) != 2 {
		t.Fatalf("the network got %d receipts", len(td.d.Sim().Reads()))
	}
	for _, c := range []struct {
		method, path, key string
		body              any
		status            int
		code              string
	}{
		{"POST", "/v1/receipts", key, map[string]any{"from": mainLine}, 400, "missing_required_parameter"},
		{"POST", "/v1/receipts", key, map[string]any{"from": mainLine, "to": bob}, 403, "contact_has_not_messaged"},
		{"POST", "/v1/receipts", td.key("--scopes", "receipts:read"), map[string]any{"from": mainLine, "to": alice}, 403, "insufficient_scope"},
		{"GET", "/v1/receipts?from=" + mainLine, key, nil, 400, "missing_required_parameter"},
		{"GET", "/v1/receipts?from=+15559999999&to=" + alice, key, nil, 404, "line_not_found"},
		{"GET", listPath, td.key("--scopes", "receipts:write"), nil, 403, "insufficient_scope"},
	} {
		if r := td.call(c.method, c.path, c.key, c.body); r.Status != c.status || r.ErrCode() != c.code {
			t.Errorf("%s %s %v: %d %s", c.method, c.path, c.body, r.Status, r.Raw)
		}
	}
	if recs := td.listAll(key, "/v1/receipts?from="+mainLine+"&to="+bob); len(recs) != 0 {
		t.Fatalf("receipts with a stranger: %v", recs)
	}

	// Receipts and reactions are kept on disk.
	in := td.inbound(mainLine, alice, "again")
	td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", in["id"].(string), "--type", "like")
	reactionsPath := "/v1/reactions?message_id=" + in["id"].(string)
	before := fmt.Sprint(td.listAll(key, listPath), td.listAll(key, reactionsPath))
	td.stop()
	td.start()
	if after := fmt.Sprint(td.listAll(key, listPath), td.listAll(key, reactionsPath)); after != before {
		t.Fatalf("after a restart: %s, before: %s", after, before)
	}
}

func TestAudioMessages(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	in := td.inbound(mainLine, alice, "send me a voice memo")
	other := td.inbound(mainLine, bob, "hi")
	td.inbound(plainLine, alice, "hi")

	up := td.call("POST", "/v1/files", key, string(fakeM4A), "Content-Type", "audio/mp4", "X-Filename", "memo.m4a")
	if id, _ := up.Body["id"].(string); up.Status != 201 || !storage.ValidID(id, "file_") || up.Body["filename"] != "memo.m4a" ||
		up.Body["mime_type"] != "audio/mp4" || up.Body["size"] != float64(len(fakeM4A)) || !strings.HasPrefix(fmt.Sprint(up.Body["url"]), "http") {
		t.Fatalf("upload: %d %s", up.Status, up.Raw)
	}
	audio := up.Body["id"].(string)
	mp3 := []byte("ID3\x03\x00\x00\x00 some mp3 frames")
	note := td.uploadedFile(key, mp3, "audio/mpeg", "note.mp3")
	text := td.uploadedFile(key, []byte("not audio"), "text/plain", "notes.txt")
	video := td.uploadedFile(key, fakeM4A, "video/mp4", "clip.mp4")

	item := td.postSent(key, "/v1/audio-messages", map[string]any{"from": mainLine, "to": alice, "audio_message": audio})
	sent := td.d.Sim().Delivered()
	if len(sent) != 1 {
		t.Fatalf("the network got %d messages", len(sent))
	}
	out := sent[0]
	if !out.IsAudioMessage || out.Text != "" || out.OutboxID != item["id"] || out.Attachment == nil ||
		out.Attachment.Filename != "memo.m4a" || out.Attachment.MimeType != "audio/mp4" || out.Attachment.Size != int64(len(fakeM4A)) {
		t.Fatalf("the network got %+v (attachment %+v)", out, out.Attachment)
	}
	if blob, err := os.ReadFile(out.Attachment.Path); err != nil || !bytes.Equal(blob, fakeM4A) {
		t.Fatalf("the attachment's file: %v (%d bytes)", err, len(blob))
	}
	m := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&limit=1", key, nil).Data()[0]
	atts, _ := m["attachments"].([]any)
	if m["is_audio_message"] != true || m["text"] != nil || m["is_from_me"] != true || m["outbox_id"] != item["id"] || len(atts) != 1 {
		t.Fatalf("stored audio message: %v", m)
	}
	att := atts[0].(map[string]any)
	if tr, present := att["transcription"]; att["filename"] != "memo.m4a" || att["mime_type"] != "audio/mp4" || att["size"] != float64(len(fakeM4A)) ||
		!present || tr != nil {
		t.Fatalf("stored attachment: %v", att)
	}
	resp, body := get(t, "GET", fmt.Sprint(att["url"]))
	if resp.StatusCode != 200 || !bytes.Equal(body, fakeM4A) {
		t.Fatalf("download of the attachment: %d, %d bytes", resp.StatusCode, len(body))
	}

	// The voice-notes alias, replying by GUID.
	item = td.postSent(key, "/v1/voice-notes", map[string]any{"from": mainLine, "to": alice, "voice_note": note, "reply_to": in["guid"]})
	if out := td.d.Sim().Delivered()[1]; !out.IsAudioMessage || out.ReplyToGUID != in["guid"] || out.Attachment == nil || out.Attachment.MimeType != "audio/mpeg" {
		t.Fatalf("voice note reached the network as %+v", out)
	}
	if m := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&limit=1", key, nil).Data()[0]; m["is_audio_message"] != true ||
		m["reply_to_guid"] != in["guid"] || m["outbox_id"] != item["id"] {
		t.Fatalf("stored voice note: %v", m)
	}

	ok := map[string]any{"from": mainLine, "to": alice, "audio_message": audio}
	okNote := map[string]any{"from": mainLine, "to": alice, "voice_note": note}
	for _, c := range []struct {
		name, path string
		body       map[string]any
		status     int
		code       string
		param      string
	}{
		{"text file", "/v1/audio-messages", apitest.WithFields(ok, "audio_message", text), 400, "invalid_parameter_value", "audio_message"},
		{"video file", "/v1/voice-notes", apitest.WithFields(okNote, "voice_note", video), 400, "invalid_parameter_value", "voice_note"},
		{"unknown file", "/v1/audio-messages", apitest.WithFields(ok, "audio_message", "file_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "file_not_found", "audio_message"},
		{"unknown file, alias", "/v1/voice-notes", apitest.WithFields(okNote, "voice_note", "file_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "file_not_found", "voice_note"},
		{"not a file ID", "/v1/audio-messages", apitest.WithFields(ok, "audio_message", in["id"]), 400, "invalid_parameter_value", "audio_message"},
		{"file ID not a string", "/v1/audio-messages", apitest.WithFields(ok, "audio_message", []string{audio}), 400, "invalid_parameter_value", "audio_message"},
		{"missing file", "/v1/audio-messages", apitest.WithFields(ok, "audio_message", nil), 400, "missing_required_parameter", "audio_message"},
		{"alias field on the main path", "/v1/audio-messages", apitest.WithFields(ok, "audio_message", nil, "voice_note", audio), 400, "missing_required_parameter", "audio_message"},
		{"main field on the alias", "/v1/voice-notes", apitest.WithFields(okNote, "voice_note", nil, "audio_message", note), 400, "missing_required_parameter", "voice_note"},
		{"no advanced features", "/v1/audio-messages", apitest.WithFields(ok, "from", plainLine), 400, "advanced_features_required", "from"},
		{"no advanced features, alias", "/v1/voice-notes", apitest.WithFields(okNote, "from", plainLine), 400, "advanced_features_required", "from"},
		{"contact never wrote", "/v1/audio-messages", apitest.WithFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"reply_to in another chat", "/v1/audio-messages", apitest.WithFields(ok, "reply_to", other["id"]), 400, "invalid_parameter_value", "reply_to"},
		{"unknown reply_to", "/v1/voice-notes", apitest.WithFields(okNote, "reply_to", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "reply_to"},
	} {
		r := td.call("POST", c.path, key, c.body)
		if r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param, r.Raw)
		}
		apitest.CheckErrorType(t, c.name, r)
	}
	if n := len(td.d.Sim().Delivered()); n != 2 {
		t.Fatalf("the network got %d messages after the refusals", n)
	}
}

// Every advanced write follows the rules of POST /v1/messages: scopes, line
// restrictions, the contact-first rule, the sandbox's rules, idempotency.
// The sandbox's daily quota counts messages and audio messages only.
func TestAdvancedWritesFollowTheSendRules(t *testing.T) {
	td := startTestDaemon(t, "") // sandbox daily_quota = 5
	key := td.key("--owner", "dev")
	in := td.inbound(mainLine, alice, "hi")
	td.inbound(plainLine, alice, "hi")
	audio := td.uploadedFile(key, fakeM4A, "audio/mp4", "memo.m4a")
	noSuchMessage := "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	type write struct {
		path string
		body func(from, to, message string) map[string]any
	}
	reaction := write{"/v1/reactions", func(from, to, message string) map[string]any {
		return map[string]any{"from": from, "to": to, "message_id": message, "type": "like"}
	}}
	typing := write{"/v1/typing", func(from, to, _ string) map[string]any { return map[string]any{"from": from, "to": to, "state": "on"} }}
	receipt := write{"/v1/receipts", func(from, to, _ string) map[string]any { return map[string]any{"from": from, "to": to} }}
	audioMessage := write{"/v1/audio-messages", func(from, to, _ string) map[string]any {
		return map[string]any{"from": from, "to": to, "audio_message": audio}
	}}
	voiceNote := write{"/v1/voice-notes", func(from, to, _ string) map[string]any {
		return map[string]any{"from": from, "to": to, "voice_note": audio}
	}}
	writes := []write{reaction, typing, receipt, audioMessage, voiceNote}

	readOnly := td.key("--scopes", "messages:read", "--owner", "dev")
	onlyPlain := td.key("--lines", plainLine)
	noOwner := td.key()
	refused := func(when string, w write, key string, body map[string]any, status int, code string) {
		t.Helper()
		r := td.call("POST", w.path, key, body)
		if r.Status != status || r.ErrCode() != code {
			t.Errorf("%s %s: got %d %s, want %d %s: %s", w.path, when, r.Status, r.ErrCode(), status, code, r.Raw)
		}
		apitest.CheckErrorType(t, w.path+" "+when, r)
	}
	msg := in["id"].(string)
	for _, w := range writes {
		refused("without the scope", w, readOnly, w.body(mainLine, alice, msg), 403, "insufficient_scope")
		refused("on a line the key may not use", w, onlyPlain, w.body(mainLine, alice, msg), 403, "line_not_accessible")
		refused("on a line without advanced features", w, key, w.body(plainLine, alice, msg), 400, "advanced_features_required")
		refused("to a contact who never wrote", w, key, w.body(mainLine, carol, msg), 403, "contact_has_not_messaged")
		refused("on the sandbox with an ownerless key", w, noOwner, w.body(sandboxLine, alice, noSuchMessage), 403, "sandbox_requires_owner")
		refused("on the sandbox before activation", w, key, w.body(sandboxLine, alice, noSuchMessage), 403, "sandbox_not_activated")

		// Idempotency: the same key and body answer the first item.
		idem := "retry-" + w.path
		first := td.postItem(key, w.path, w.body(mainLine, alice, msg), "Idempotency-Key", idem)
		again := td.call("POST", w.path, key, w.body(mainLine, alice, msg), "Idempotency-Key", idem)
		if again.Status != 201 || again.Body["id"] != first["id"] || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s replayed: %d %s %v", w.path, again.Status, again.Raw, again.Header)
		}
		if r := td.call("POST", w.path, key, w.body(mainLine, in["chat_id"].(string), msg), "Idempotency-Key", idem); r.Status != 400 ||
			r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "Idempotency-Key" {
			t.Errorf("%s with the key of another body: %d %s", w.path, r.Status, r.Raw)
		}
		if item := td.waitOutbox(key, first["id"].(string)); item["status"] != "sent" {
			t.Errorf("%s: %v", w.path, item)
		}
		if n := td.networkActions(first["id"].(string)); n != 1 {
			t.Errorf("%s sent with an Idempotency-Key twice: the network acted %d times", w.path, n)
		}
	}

	// The sandbox, paired with alice.
	act := td.activateSandbox(key, alice)["id"].(string)
	for _, w := range writes {
		refused("on the sandbox to another number", w, key, w.body(sandboxLine, bob, act), 400, "sandbox_contact_mismatch")
	}
	var ids []string
	post := func(w write) string {
		t.Helper()
		id := td.postItem(key, w.path, w.body(sandboxLine, alice, act))["id"].(string)
		ids = append(ids, id)
		return id
	}
	// More reactions, typing changes and receipts than the quota: none count.
	for range 2 {
		for _, w := range []write{reaction, typing, receipt} {
			post(w)
		}
	}
	// 5 messages: 3 texts, an audio message and a voice note fill the quota.
	for i := range 3 {
		ids = append(ids, td.send(key, map[string]any{"from": sandboxLine, "to": alice, "text": fmt.Sprint(i)})["id"].(string))
	}
	memo := td.postItem(key, audioMessage.path, audioMessage.body(sandboxLine, alice, ""), "Idempotency-Key", "memo")["id"].(string)
	ids = append(ids, memo)
	post(voiceNote)
	for _, w := range []write{audioMessage, voiceNote} {
		refused("over the sandbox quota", w, key, w.body(sandboxLine, alice, act), 429, "sandbox_quota_exceeded")
	}
	if r := td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": alice, "text": "6"}); r.ErrCode() != "sandbox_quota_exceeded" {
		t.Errorf("sixth message: %d %s", r.Status, r.Raw)
	}
	// A replay is no new send: still answered.
	if r := td.call("POST", audioMessage.path, key, audioMessage.body(sandboxLine, alice, ""), "Idempotency-Key", "memo"); r.Status != 201 || r.Body["id"] != memo {
		t.Errorf("replay over the quota: %d %s", r.Status, r.Raw)
	}
	for _, w := range []write{reaction, typing, receipt} {
		post(w)
	}
	for _, id := range ids {
		if item := td.waitOutbox(key, id); item["status"] != "sent" {
			t.Errorf("sandbox item %v", item)
		}
	}
}

// A voice memo's transcription can arrive after the memo: the network
// reports the message again, and the stored message gains it, once.
func TestLateTranscription(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	path := t.TempDir() + "/Audio Message.caf"
	if err := os.WriteFile(path, fakeM4A, 0o600); err != nil {
		t.Fatal(err)
	}
	guid := sim.NewGUID()
	report := func(transcription *string) storage.InboundResult {
		t.Helper()
		res, err := td.d.Record(t.Context(), bridge.Inbound{
			Line: mainLine, Chat: sim.OneToOne("imessage", alice), GUID: guid, Sender: alice, IsAudioMessage: true,
			Attachments: []bridge.File{{Path: path, Transcription: transcription}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	stored := func() map[string]any {
		t.Helper()
		msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data()
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want the memo once", len(msgs))
		}
		return msgs[0]["attachments"].([]any)[0].(map[string]any)
	}
	fileOf := func(att map[string]any) string { u, _, _ := strings.Cut(fmt.Sprint(att["url"]), "?"); return u }

	if res := report(nil); res.Duplicate || res.Transcribed {
		t.Fatalf("first report: %+v", res)
	}
	first := stored()
	if first["transcription"] != nil || first["mime_type"] != "audio/x-caf" {
		t.Fatalf("memo before its transcription: %v", first)
	}
	blobs := func() int {
		entries, err := os.ReadDir(td.dataDir + "/files")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := blobs()
	late := "Running late"
	if res := report(&late); !res.Duplicate || !res.Transcribed {
		t.Fatalf("the transcription's report: %+v", res)
	}
	if att := stored(); att["transcription"] != late || fileOf(att) != fileOf(first) {
		t.Fatalf("memo after its transcription: %v (before: %v)", att, first)
	}
	other := "Running lake"
	if res := report(&other); res.Transcribed {
		t.Fatalf("a second transcription changed the memo: %+v", res)
	}
	if att := stored(); att["transcription"] != late {
		t.Fatalf("memo after a second transcription: %v", att)
	}
	if after := blobs(); after != before {
		t.Fatalf("reports of a stored memo stored its file again: %d files, then %d", before, after)
	}
}
