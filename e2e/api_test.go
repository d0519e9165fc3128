package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/testkit"
)

// The offline walkthrough of the README, end to end: a key, the sandbox
// activated from a "phone", an inbound message, a reply, the history.
func TestWalkthrough(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key("--owner", "dev@example.com")
	if !strings.HasPrefix(key, "sk_live_") || len(key) < len("sk_live_")+32 {
		t.Fatalf("key %q is not sk_live_ + 32 or more characters", key)
	}

	// The key's owner has no sandbox yet; POST /v1/sandbox starts it.
	sb := td.call("GET", "/v1/sandbox", key, nil)
	if sb.Status != 200 || sb.Body["status"] != "missing" || sb.Body["activation_code"] != nil || sb.Body["sandbox_line_handle"] != sandboxLine {
		t.Fatalf("sandbox before activation: %d %s", sb.Status, sb.Raw)
	}
	sb = td.call("POST", "/v1/sandbox", key, nil)
	code, _ := sb.Body["activation_code"].(string)
	if sb.Status != 201 || sb.Body["status"] != "pending" || !strings.HasPrefix(code, "BL-") {
		t.Fatalf("sandbox started: %d %s", sb.Status, sb.Raw)
	}
	var all map[string]any
	decodeJSON(t, td.mustCLI("sandbox"), &all)
	owners, _ := all["owners"].([]any)
	if all["handle"] != sandboxLine || !strings.HasPrefix(all["line_id"].(string), "ln_") || len(owners) != 1 ||
		owners[0].(map[string]any)["owner"] != "dev@example.com" || owners[0].(map[string]any)["activation_code"] != code {
		t.Fatalf("blueline sandbox: %v", all)
	}

	r := td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": alice, "text": "hi"})
	if r.Status != 403 || r.ErrCode() != "sandbox_not_activated" {
		t.Fatalf("send before activation: %d %s", r.Status, r.Raw)
	}

	td.inbound(sandboxLine, alice, "my code is "+strings.ToLower(code))
	sb = td.call("GET", "/v1/sandbox", key, nil)
	if sb.Body["status"] != "active" || sb.Body["contact_identifier"] != alice || sb.Body["activated_at"] == nil {
		t.Fatalf("sandbox after activation: %s", sb.Raw)
	}

	r = td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": bob, "text": "hi"})
	if r.Status != 400 || r.ErrCode() != "sandbox_contact_mismatch" {
		t.Fatalf("send to unpaired number: %d %s", r.Status, r.Raw)
	}

	in := td.inbound(sandboxLine, alice, "Are you there?")
	if in["is_from_me"] != false || in["sender"] != alice || in["text"] != "Are you there?" || !strings.HasPrefix(in["id"].(string), "msg_") {
		t.Fatalf("inbound message: %v", in)
	}
	obx := td.send(key, map[string]any{"from": sandboxLine, "to": alice, "text": "Yes!", "reply_to": in["guid"]})
	if obx["status"] != "pending" || !strings.HasPrefix(obx["id"].(string), "obx_") {
		t.Fatalf("send answer: %v", obx)
	}
	item := td.waitOutbox(key, obx["id"].(string))
	if item["status"] != "sent" || item["completed_at"] == nil || item["attempts"] != 1.0 || item["error"] != nil {
		t.Fatalf("outbox item: %v", item)
	}

	hist := td.call("GET", "/v1/messages?from="+sandboxLine+"&to="+alice, key, nil)
	msgs := hist.Data()
	if hist.Status != 200 || len(msgs) != 3 {
		t.Fatalf("history: %d %s", hist.Status, hist.Raw)
	}
	sent := msgs[0]
	if sent["is_from_me"] != true || sent["text"] != "Yes!" || sent["outbox_id"] != obx["id"] ||
		sent["reply_to_guid"] != in["guid"] || sent["sender"] != sandboxLine || sent["service"] != "imessage" {
		t.Fatalf("sent message: %v", sent)
	}
	if msgs[1]["id"] != in["id"] {
		t.Fatalf("history is not most recent first: %v", msgs)
	}

	chats := td.call("GET", "/v1/chats?from="+sandboxLine, key, nil).Data()
	if len(chats) != 1 || chats[0]["identifier"] != alice || chats[0]["has_received_inbound"] != true ||
		chats[0]["is_group"] != false || chats[0]["last_message_at"] != sent["sent_at"] {
		t.Fatalf("chats: %v", chats)
	}
}

// Keys are listed without their secret, and revocation is immediate.
func TestKeysListAndRevoke(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	if r := td.call("GET", "/v1/lines", key, nil); r.Status != 200 {
		t.Fatalf("a new key: %d %s", r.Status, r.Raw)
	}
	// Revocation is immediate.
	out := td.mustCLI("keys", "list")
	fields := strings.Split(strings.TrimSpace(out), "\t")
	if len(fields) != 8 || !strings.HasPrefix(fields[0], "key_") || fields[1] != "test" || fields[2] != "all" || fields[3] != "all" || fields[4] != "-" ||
		fields[6] != "no" || fields[7] != "none" {
		t.Fatalf("keys list: %q", out)
	}
	if strings.Contains(out, key) || strings.Contains(out, strings.TrimPrefix(key, "sk_live_")) {
		t.Fatal("keys list shows the key itself")
	}
	td.mustCLI("keys", "revoke", fields[0])
	if r := td.call("GET", "/v1/lines", key, nil); r.Status != 401 || r.ErrCode() != "invalid_api_key" {
		t.Fatalf("revoked key: %d %s", r.Status, r.Raw)
	}
	if out := td.mustCLI("keys", "list"); out != "" {
		t.Fatalf("keys list after revoke: %q", out)
	}
	if _, errOut, code := td.cli("keys", "revoke", fields[0]); code != 1 || !strings.Contains(errOut, "key_not_found") {
		t.Fatalf("revoking twice: exit %d %q", code, errOut)
	}
}

// keys create refuses what it cannot honour.
func TestKeysCreateRefusals(t *testing.T) {
	td := startTestDaemon(t, "")
	if _, errOut, code := td.cli("keys", "create", "--label", "x", "--scopes", "messages:read,everything"); code != 1 || !strings.Contains(errOut, "everything") {
		t.Errorf("unknown scope: exit %d %q", code, errOut)
	}
	if _, errOut, code := td.cli("keys", "create", "--label", "x", "--lines", "+15559999999"); code != 1 || !strings.Contains(errOut, "line_not_found") {
		t.Errorf("unknown line: exit %d %q", code, errOut)
	}
	if _, errOut, code := td.cli("keys", "create", "--label", "a\tb"); code != 1 || !strings.Contains(errOut, "control characters") {
		t.Errorf("label with a tab: exit %d %q", code, errOut)
	}
	if _, errOut, code := td.cli("keys", "create"); code != 2 || !strings.Contains(errOut, "--label") {
		t.Errorf("no label: exit %d %q", code, errOut)
	}
}

// Sends that name the chat or the reply each way the API allows are
// delivered (their refusals are tested in package server).
func TestSendVariantsDelivered(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	first := td.inbound(mainLine, alice, "hello")
	ok := map[string]any{"from": mainLine, "to": alice, "text": "hi"}
	// Valid variants: by chat ID, formatted handle, reply by msg_ ID and by
	// GUID, unknown fields ignored.
	for _, body := range []map[string]any{
		apitest.WithFields(ok, "to", td.chatID(mainLine, alice)),
		apitest.WithFields(ok, "to", "+1 (555) 111-0001"),
		apitest.WithFields(ok, "reply_to", first["id"]),
		apitest.WithFields(ok, "reply_to", first["guid"]),
		apitest.WithFields(ok, "colour", "blue"),
	} {
		obx := td.send(key, body)
		if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
			t.Errorf("send %v: %v", body, item)
		}
	}
}

// chatID finds the chat of line with contact through the API.
func (td *testDaemon) chatID(line, contact string) string {
	td.t.Helper()
	r := td.call("GET", "/v1/messages?from="+line+"&to="+contact+"&limit=1", td.key(), nil)
	msgs := r.Data()
	if len(msgs) == 0 {
		td.t.Fatalf("no chat of %s with %s", line, contact)
	}
	return msgs[0]["chat_id"].(string)
}

func TestIdempotencyKey(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	td.inbound(mainLine, alice, "hi")
	body := map[string]any{"from": mainLine, "to": alice, "text": "once"}
	first := td.send(key, body, "Idempotency-Key", "order-42")
	second := td.send(key, body, "Idempotency-Key", "order-42")
	if first["id"] != second["id"] {
		t.Fatalf("retry with the same key made a second item: %v %v", first["id"], second["id"])
	}
	td.waitOutbox(key, first["id"].(string))
	third := td.call("POST", "/v1/messages", key, body, "Idempotency-Key", "order-42")
	if third.Body["id"] != first["id"] || third.Body["status"] != "sent" || third.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after delivery: %s", third.Raw)
	}
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "text": "twice?"}, "Idempotency-Key", "order-42")
	if r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "Idempotency-Key" {
		t.Fatalf("same key, other body: %d %s", r.Status, r.Raw)
	}
	// Another API key has its own key space.
	otherKey := td.key()
	other := td.send(otherKey, body, "Idempotency-Key", "order-42")
	if other["id"] == first["id"] {
		t.Fatal("idempotency keys are shared between API keys")
	}
	// Once sent, the network got the text twice (the first key's one
	// send, and the other API key's), and history holds those two only.
	testkit.Eventually(t, 5*time.Second, func() bool {
		n := 0
		for _, out := range td.d.Sim().Delivered() {
			if out.Text == "once" {
				n++
			}
		}
		return n == 2
	})
	if item := td.waitOutbox(otherKey, other["id"].(string)); item["status"] != "sent" {
		t.Fatalf("the other key's send: %v", item)
	}
	sent := 0
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data() {
		if m["text"] == "once" {
			sent++
		}
	}
	if sent != 2 {
		t.Fatalf("%d copies of the message in history, want 2 (one per API key)", sent)
	}
}

func TestGroupChats(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	m := td.inbound(mainLine, alice, "welcome to the group", "--group", "Climbing", "--participants", alice+","+bob)
	chatID := m["chat_id"].(string)
	chats := td.call("GET", "/v1/chats?from="+mainLine, key, nil).Data()
	if len(chats) != 1 || chats[0]["is_group"] != true || chats[0]["name"] != "Climbing" ||
		!slices.Equal(anyStrings(chats[0]["participants"]), []string{alice, bob}) || !strings.HasPrefix(chats[0]["identifier"].(string), "chat") {
		t.Fatalf("group chat: %v", chats)
	}
	td.inbound(mainLine, carol, "I'm in too", "--chat", chatID)
	chat := td.call("GET", "/v1/chats?from="+mainLine, key, nil).Data()[0]
	if !slices.Equal(anyStrings(chat["participants"]), []string{alice, bob, carol}) {
		t.Fatalf("participants after carol wrote: %v", chat["participants"])
	}
	obx := td.send(key, map[string]any{"from": mainLine, "to": chatID, "text": "hello all"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("group send: %v", item)
	}
	delivered := td.d.Sim().Delivered()
	if last := delivered[len(delivered)-1]; !last.Chat.IsGroup || last.Chat.GUID == "" || len(last.Chat.Participants) != 3 {
		t.Fatalf("delivered to %+v", last.Chat)
	}
	if msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+chatID, key, nil).Data(); len(msgs) != 3 || msgs[0]["text"] != "hello all" {
		t.Fatalf("group history: %v", msgs)
	}
	// The group's identifier names it as well as its ID.
	ident := chat["identifier"].(string)
	if msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+ident, key, nil).Data(); len(msgs) != 3 {
		t.Fatalf("group history by identifier: %v", msgs)
	}
	td.send(key, map[string]any{"from": mainLine, "to": ident, "text": "by identifier"})
	// A one-to-one chat with alice is a different chat.
	direct := td.inbound(mainLine, alice, "just you")
	if direct["chat_id"] == chatID {
		t.Fatal("one-to-one message landed in the group")
	}
	// Sim refusals.
	if _, errOut, code := td.cli("sim", "inbound", "--line", mainLine, "--from", alice, "--text", "x", "--group", "G"); code != 2 {
		t.Errorf("--group without --participants: exit %d %q", code, errOut)
	}
	if _, errOut, code := td.cli("sim", "inbound", "--line", "+15559999999", "--from", alice, "--text", "x"); code != 1 || !strings.Contains(errOut, "line_not_found") {
		t.Errorf("unknown line: exit %d %q", code, errOut)
	}
}

func TestSMSLine(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	m := td.inbound(smsLine, alice, "text me")
	if m["service"] != "sms" {
		t.Fatalf("inbound on an SMS line: %v", m)
	}
	obx := td.send(key, map[string]any{"from": smsLine, "to": alice, "text": "ok"})
	td.waitOutbox(key, obx["id"].(string))
	msgs := td.call("GET", "/v1/messages?from="+smsLine+"&to="+alice, key, nil).Data()
	if msgs[0]["service"] != "sms" || msgs[0]["is_from_me"] != true {
		t.Fatalf("sent on an SMS line: %v", msgs[0])
	}
	if chats := td.call("GET", "/v1/chats?from="+smsLine, key, nil).Data(); chats[0]["service"] != "sms" {
		t.Fatalf("chat: %v", chats[0])
	}
}

func anyStrings(v any) []string {
	items, _ := v.([]any)
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it.(string)
	}
	return out
}
