package e2e

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// activateSandbox starts the sandbox of key's owner and pairs it with phone,
// which texts the code; it returns the code's message as stored.
func (td *testDaemon) activateSandbox(key, phone string) map[string]any {
	td.t.Helper()
	r := td.call("POST", "/v1/sandbox", key, nil)
	code, _ := r.Body["activation_code"].(string)
	if r.Status/100 != 2 || code == "" {
		td.t.Fatalf("POST /v1/sandbox: %d %s", r.Status, r.Raw)
	}
	return td.inbound(sandboxLine, phone, code)
}

// fileAnswer is the status of GET /v1/files?id= without following its
// redirect, and the error code of a refusal.
func (td *testDaemon) fileAnswer(key, id string) (int, string) {
	td.t.Helper()
	resp := td.fileRedirect(key, id)
	if resp.StatusCode == http.StatusFound {
		return resp.StatusCode, ""
	}
	r := td.call("GET", "/v1/files?id="+url.QueryEscape(id), key, nil)
	return r.Status, r.ErrCode()
}

// fileIDOf is the file ID in an attachment's download URL.
func fileIDOf(t *testing.T, att any) string {
	t.Helper()
	u, err := url.Parse(att.(map[string]any)["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/files/")
}

// Two owners share the sandbox line and see nothing of each other there:
// chats, messages, reactions, outbox items, webhooks with their secrets,
// events, quota. A key of owner B restricted to another line sees no more
// than B's other key does.
func TestSandboxOwnersIsolated(t *testing.T) {
	rcA, rcB := newReceiver(t, nil), newReceiver(t, nil)
	// httptest's servers share one certificate: rcA's trusts both.
	td := startTestDaemon(t, webhookConfig(t, rcA, ""))
	keyA := td.key("--owner", "a@example.com")
	keyB := td.key("--owner", "b@example.com")
	keyBLine := td.key("--owner", "b@example.com", "--lines", plainLine)
	noOwner := td.key()

	for _, method := range []string{"GET", "POST"} {
		if r := td.call(method, "/v1/sandbox", noOwner, nil); r.Status != 403 || r.ErrCode() != "sandbox_requires_owner" {
			t.Fatalf("%s /v1/sandbox without an owner: %d %s", method, r.Status, r.Raw)
		}
	}
	hookA := td.register(keyA, sandboxLine, rcA, "message.received", "message.sent")
	hookB := td.register(keyB, sandboxLine, rcB, "message.received", "message.sent")
	td.activateSandbox(keyA, alice)
	td.activateSandbox(keyB, bob)
	if r := td.call("GET", "/v1/sandbox", keyBLine, nil); r.Body["contact_identifier"] != bob || r.Body["status"] != "active" {
		t.Fatalf("owner B's sandbox through its line-restricted key: %s", r.Raw)
	}

	inA := td.inbound(sandboxLine, alice, "for A only")
	obxA := td.send(keyA, map[string]any{"from": sandboxLine, "to": alice, "text": "A's answer"})["id"].(string)
	if item := td.waitOutbox(keyA, obxA); item["status"] != "sent" {
		t.Fatalf("A's send: %v", item)
	}
	chatA := inA["chat_id"].(string)

	for name, key := range map[string]string{"B": keyB, "B restricted to another line": keyBLine} {
		chats := td.call("GET", "/v1/chats?from="+sandboxLine, key, nil).Data()
		if len(chats) != 1 || chats[0]["identifier"] != bob {
			t.Errorf("%s: sandbox chats %v, want only the chat with bob", name, chats)
		}
		if r := td.call("GET", "/v1/messages?from="+sandboxLine+"&to="+alice, key, nil); r.Status != 200 || len(r.Data()) != 0 {
			t.Errorf("%s reads A's messages: %d %s", name, r.Status, r.Raw)
		}
		checks := []struct {
			what          string
			r             response
			status        int
			code          string
			leaksFromBody string
		}{
			{"messages by A's chat ID", td.call("GET", "/v1/messages?from="+sandboxLine+"&to="+chatA, key, nil), 404, "chat_not_found", "for A only"},
			{"a send to A's phone", td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": alice, "text": "x"}), 400, "sandbox_contact_mismatch", ""},
			{"a send to A's chat", td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": chatA, "text": "x"}), 404, "chat_not_found", ""},
			{"a reply to A's message", td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": bob, "text": "x", "reply_to": inA["id"]}), 404, "message_not_found", ""},
			{"A's outbox item", td.call("GET", "/v1/outbox?id="+obxA, key, nil), 404, "outbox_item_not_found", "A's answer"},
			{"reactions of A's message", td.call("GET", "/v1/reactions?message_id="+inA["id"].(string), key, nil), 404, "message_not_found", ""},
			{"reactions of A's message by GUID", td.call("GET", "/v1/reactions?message_id="+inA["guid"].(string), key, nil), 404, "message_not_found", ""},
			{"typing in A's chat", td.call("GET", "/v1/typing?from="+sandboxLine+"&to="+chatA, key, nil), 404, "chat_not_found", ""},
			{"receipts of A's chat", td.call("GET", "/v1/receipts?from="+sandboxLine+"&to="+chatA, key, nil), 404, "chat_not_found", ""},
			{"deleting A's webhook", td.call("DELETE", "/v1/webhooks", key, map[string]any{"id": hookA["id"]}), 404, "webhook_not_found", ""},
		}
		for _, c := range checks {
			if c.r.Status != c.status || c.r.ErrCode() != c.code {
				t.Errorf("%s, %s: %d %s; want %d %s", name, c.what, c.r.Status, c.r.Raw, c.status, c.code)
			}
			if c.leaksFromBody != "" && strings.Contains(string(c.r.Raw), c.leaksFromBody) {
				t.Errorf("%s, %s: the answer shows %q", name, c.what, c.leaksFromBody)
			}
		}
		hooks := td.call("GET", "/v1/webhooks?from="+sandboxLine, key, nil)
		if list := hooks.Data(); len(list) != 1 || list[0]["id"] != hookB["id"] || strings.Contains(string(hooks.Raw), hookA["secret"].(string)) {
			t.Errorf("%s lists the sandbox webhooks %s, want only B's", name, hooks.Raw)
		}
	}
	// A's webhook is still there, and A sees its own things.
	if r := td.call("GET", "/v1/webhooks?from="+sandboxLine, keyA, nil); len(r.Data()) != 1 || r.Data()[0]["id"] != hookA["id"] {
		t.Fatalf("A's webhooks: %s", r.Raw)
	}
	if r := td.call("GET", "/v1/messages?from="+sandboxLine+"&to="+alice, keyA, nil); len(r.Data()) != 3 {
		t.Fatalf("A's history: %s", r.Raw)
	}

	// Each receiver gets its owner's events only: A's three (the code, the
	// inbound, the send), B's two (the code, then bob's message).
	td.inbound(sandboxLine, bob, "for B only")
	gotB := rcB.waitRequests(2)
	gotA := rcA.waitRequests(3)
	for _, got := range gotB {
		if d := got.Data(); d["chat_id"] == chatA || d["text"] == "for A only" || d["text"] == "A's answer" {
			t.Errorf("B's webhook got A's event: %s", got.Raw)
		}
	}
	for _, got := range gotA {
		if got.Data()["text"] == "for B only" {
			t.Errorf("A's webhook got B's event: %s", got.Raw)
		}
	}
	if n := len(rcB.Requests()); n != 2 {
		t.Errorf("B's webhook got %d events, want 2", n)
	}

	// The daily quota (5 in the test configuration) is each owner's own.
	for range 4 {
		td.send(keyA, map[string]any{"from": sandboxLine, "to": alice, "text": "more"})
	}
	if r := td.call("POST", "/v1/messages", keyA, map[string]any{"from": sandboxLine, "to": alice, "text": "sixth"}); r.Status != 429 || r.ErrCode() != "sandbox_quota_exceeded" {
		t.Fatalf("A's sixth send: %d %s", r.Status, r.Raw)
	}
	if r := td.call("POST", "/v1/messages", keyB, map[string]any{"from": sandboxLine, "to": bob, "text": "B's first"}); r.Status != 201 {
		t.Fatalf("B's first send after A's quota ran out: %d %s", r.Status, r.Raw)
	}
	sb := td.call("GET", "/v1/sandbox", keyA, nil).Body
	if usage := sb["usage"].(map[string]any); usage["used"] != 5.0 || usage["limit"] != 5.0 || usage["remaining"] != 0.0 {
		t.Errorf("A's usage: %v", usage)
	}
	sb = td.call("GET", "/v1/sandbox", keyB, nil).Body
	if usage := sb["usage"].(map[string]any); usage["used"] != 1.0 || usage["remaining"] != 4.0 ||
		int64(usage["resets_at"].(float64)) != time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour).UnixMilli() {
		t.Errorf("B's usage: %v", usage)
	}
}

// A file belongs to the line it arrived on (and on the sandbox, to its
// owner) or to the owner of the key that uploaded it. A key that cannot
// reach it gets 404 and cannot send it.
func TestFilesBelong(t *testing.T) {
	td := startTestDaemon(t, "")
	keyA := td.key("--owner", "a@example.com")
	keyA2 := td.key("--owner", "a@example.com", "--lines", plainLine)
	keyB := td.key("--owner", "b@example.com")
	keyPlain := td.key("--lines", plainLine)
	td.inbound(mainLine, alice, "hi")

	uploaded := td.mustUpload(keyA, []byte("A's notes"), "text/plain", "notes.txt")
	pic := filepath.Join(t.TempDir(), "cat.jpg")
	if err := os.WriteFile(pic, []byte("jpeg bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", mainLine, "--from", alice, "--attach", pic), &m)
	onMain := fileIDOf(t, m["attachments"].([]any)[0])
	td.activateSandbox(keyA, carol)
	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", sandboxLine, "--from", carol, "--attach", pic), &m)
	onSandbox := fileIDOf(t, m["attachments"].([]any)[0])

	for _, c := range []struct {
		what, key, id string
		found         bool
	}{
		{"A's upload, by A", keyA, uploaded, true},
		{"A's upload, by another key of A", keyA2, uploaded, true},
		{"A's upload, by B", keyB, uploaded, false},
		{"A's upload, by an ownerless key", keyPlain, uploaded, false},
		{"an attachment of the main line, by a key of every line", keyB, onMain, true},
		{"an attachment of the main line, by a key of another line", keyPlain, onMain, false},
		{"an attachment of A's sandbox, by A", keyA, onSandbox, true},
		{"an attachment of A's sandbox, by B", keyB, onSandbox, false},
		{"an attachment of A's sandbox, by an ownerless key", keyPlain, onSandbox, false},
	} {
		status, code := td.fileAnswer(c.key, c.id)
		if c.found && status != 302 || !c.found && (status != 404 || code != "file_not_found") {
			t.Errorf("%s: %d %s", c.what, status, code)
		}
	}
	// B cannot send A's file, whatever it names it by.
	for _, path := range []string{"/v1/messages", "/v1/audio-messages"} {
		body := map[string]any{"from": mainLine, "to": alice, "attachments": []string{uploaded}, "audio_message": uploaded}
		if r := td.call("POST", path, keyB, body); r.Status != 404 || r.ErrCode() != "file_not_found" {
			t.Errorf("B sends A's file through %s: %d %s", path, r.Status, r.Raw)
		}
	}
	if r := td.call("POST", "/v1/messages", keyA, map[string]any{"from": mainLine, "to": alice, "attachments": []string{uploaded}}); r.Status != 201 {
		t.Errorf("A sends its own file: %d %s", r.Status, r.Raw)
	}
}

// An outbox item of a line removed from the configuration is not found
// after a restart (the rest of the not-found rule is tested in package
// server).
func TestOutboxOfRemovedLineNotFound(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	td.inbound(mainLine, alice, "hello")
	obx := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "hi"})["id"].(string)
	td.inbound(smsLine, bob, "hello sms")
	obxSMS := td.send(key, map[string]any{"from": smsLine, "to": bob, "text": "hi"})["id"].(string)
	td.waitOutbox(key, obxSMS)

	// An outbox item of a line removed from the configuration.
	td.stop()
	cfg, err := os.ReadFile(td.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	smsBlock := "[[lines]]\nhandle = \"" + smsLine + "\"\nlabel = \"SMS line\"\nservice = \"sms\"\n"
	if !strings.Contains(string(cfg), smsBlock) {
		t.Fatalf("the test configuration has no SMS line block:\n%s", cfg)
	}
	if err := os.WriteFile(td.cfgPath, []byte(strings.Replace(string(cfg), smsBlock, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	td.start()
	if r := td.call("GET", "/v1/outbox?id="+obxSMS, key, nil); r.Status != 404 || r.ErrCode() != "outbox_item_not_found" {
		t.Errorf("an outbox item of a removed line: %d %s", r.Status, r.Raw)
	}
	if r := td.call("GET", "/v1/outbox?id="+obx, key, nil); r.Status != 200 {
		t.Errorf("an outbox item of a line still configured: %d %s", r.Status, r.Raw)
	}
}
