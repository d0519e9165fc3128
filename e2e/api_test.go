package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
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
	if sb.status != 200 || sb.body["status"] != "missing" || sb.body["activation_code"] != nil || sb.body["sandbox_line_handle"] != sandboxLine {
		t.Fatalf("sandbox before activation: %d %s", sb.status, sb.raw)
	}
	sb = td.call("POST", "/v1/sandbox", key, nil)
	code, _ := sb.body["activation_code"].(string)
	if sb.status != 201 || sb.body["status"] != "pending" || !strings.HasPrefix(code, "BL-") {
		t.Fatalf("sandbox started: %d %s", sb.status, sb.raw)
	}
	var all map[string]any
	decodeJSON(t, td.mustCLI("sandbox"), &all)
	owners, _ := all["owners"].([]any)
	if all["handle"] != sandboxLine || !strings.HasPrefix(all["line_id"].(string), "ln_") || len(owners) != 1 ||
		owners[0].(map[string]any)["owner"] != "dev@example.com" || owners[0].(map[string]any)["activation_code"] != code {
		t.Fatalf("blueline sandbox: %v", all)
	}

	r := td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": alice, "text": "hi"})
	if r.status != 403 || r.errCode() != "sandbox_not_activated" {
		t.Fatalf("send before activation: %d %s", r.status, r.raw)
	}

	td.inbound(sandboxLine, alice, "my code is "+strings.ToLower(code))
	sb = td.call("GET", "/v1/sandbox", key, nil)
	if sb.body["status"] != "active" || sb.body["contact_identifier"] != alice || sb.body["activated_at"] == nil {
		t.Fatalf("sandbox after activation: %s", sb.raw)
	}

	r = td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": bob, "text": "hi"})
	if r.status != 400 || r.errCode() != "sandbox_contact_mismatch" {
		t.Fatalf("send to unpaired number: %d %s", r.status, r.raw)
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
	msgs := hist.data()
	if hist.status != 200 || len(msgs) != 3 {
		t.Fatalf("history: %d %s", hist.status, hist.raw)
	}
	sent := msgs[0]
	if sent["is_from_me"] != true || sent["text"] != "Yes!" || sent["outbox_id"] != obx["id"] ||
		sent["reply_to_guid"] != in["guid"] || sent["sender"] != sandboxLine || sent["service"] != "imessage" {
		t.Fatalf("sent message: %v", sent)
	}
	if msgs[1]["id"] != in["id"] {
		t.Fatalf("history is not most recent first: %v", msgs)
	}

	chats := td.call("GET", "/v1/chats?from="+sandboxLine, key, nil).data()
	if len(chats) != 1 || chats[0]["identifier"] != alice || chats[0]["has_received_inbound"] != true ||
		chats[0]["is_group"] != false || chats[0]["last_message_at"] != sent["sent_at"] {
		t.Fatalf("chats: %v", chats)
	}
}

// Every response carries a request ID, in the body and the X-Request-Id header.
func TestRequestIDs(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	for _, r := range []response{
		td.call("GET", "/v1/lines", key, nil),
		td.call("GET", "/v1/lines", "", nil),
		td.call("GET", "/v1/nothing", key, nil),
		td.call("GET", "/v1/outbox?id=obx_aaaaaaaaaaaaaaaaaaaaaaaaaa", key, nil),
	} {
		id, _ := r.body["request_id"].(string)
		if !strings.HasPrefix(id, "req_") || r.header.Get("X-Request-Id") != id {
			t.Errorf("request_id %q, header %q in %s", id, r.header.Get("X-Request-Id"), r.raw)
		}
	}
}

func TestLines(t *testing.T) {
	td := startTestDaemon(t, "")
	all := td.call("GET", "/v1/lines", td.key(), nil)
	lines := all.data()
	if all.status != 200 || len(lines) != 4 || all.body["has_more"] != false || all.body["next_cursor"] != nil {
		t.Fatalf("lines: %d %s", all.status, all.raw)
	}
	byHandle := map[string]map[string]any{}
	for _, l := range lines {
		byHandle[l["handle"].(string)] = l
		if !strings.HasPrefix(l["id"].(string), "ln_") || l["is_active"] != true {
			t.Errorf("line %v", l)
		}
	}
	if byHandle[smsLine]["service"] != "sms" || byHandle[mainLine]["service"] != "imessage" || byHandle[mainLine]["label"] != "Main line" {
		t.Errorf("lines: %v", lines)
	}
	if byHandle[plainLine]["label"] != nil {
		t.Errorf("a line without a label has label %v, want null", byHandle[plainLine]["label"])
	}

	// A restricted key sees its lines and the sandbox.
	restricted := td.call("GET", "/v1/lines", td.key("--lines", smsLine), nil).data()
	var handles []string
	for _, l := range restricted {
		handles = append(handles, l["handle"].(string))
	}
	slices.Sort(handles)
	if !slices.Equal(handles, []string{sandboxLine, smsLine}) {
		t.Fatalf("restricted key sees %v", handles)
	}
}

func TestAuthentication(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	cases := []struct {
		name, header string
		status       int
		code, typ    string
	}{
		{"no header", "", 401, "missing_api_key", "authentication_error"},
		{"not bearer", "Basic " + key, 401, "invalid_api_key", "authentication_error"},
		{"no prefix", "Bearer abc", 401, "invalid_api_key", "authentication_error"},
		{"unknown", "Bearer sk_live_" + strings.Repeat("x", 40), 401, "invalid_api_key", "authentication_error"},
		{"lower-case scheme", "bearer " + key, 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", td.base+"/v1/lines", nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
		})
	}
	r := td.call("GET", "/v1/lines", "", nil)
	if e := r.body["error"].(map[string]any); e["type"] != "authentication_error" || e["code"] != "missing_api_key" || e["message"] == "" {
		t.Fatalf("error shape: %s", r.raw)
	}

	// Revocation is immediate.
	out := td.mustCLI("keys", "list")
	fields := strings.Split(strings.TrimSpace(out), "\t")
	if len(fields) != 6 || !strings.HasPrefix(fields[0], "key_") || fields[1] != "test" || fields[2] != "all" || fields[3] != "all" || fields[4] != "-" {
		t.Fatalf("keys list: %q", out)
	}
	if strings.Contains(out, key) || strings.Contains(out, strings.TrimPrefix(key, "sk_live_")) {
		t.Fatal("keys list shows the key itself")
	}
	td.mustCLI("keys", "revoke", fields[0])
	if r := td.call("GET", "/v1/lines", key, nil); r.status != 401 || r.errCode() != "invalid_api_key" {
		t.Fatalf("revoked key: %d %s", r.status, r.raw)
	}
	if out := td.mustCLI("keys", "list"); out != "" {
		t.Fatalf("keys list after revoke: %q", out)
	}
	if _, errOut, code := td.cli("keys", "revoke", fields[0]); code != 1 || !strings.Contains(errOut, "key_not_found") {
		t.Fatalf("revoking twice: exit %d %q", code, errOut)
	}
}

func TestScopesAndLineRestrictions(t *testing.T) {
	td := startTestDaemon(t, "")
	td.inbound(mainLine, alice, "hello")
	td.inbound(smsLine, alice, "hello")
	readOnly := td.key("--scopes", "messages:read,lines:read")
	restricted := td.key("--lines", mainLine)
	noOwner := td.key()

	for _, c := range []struct {
		method, path string
		body         any
		scope        string
	}{
		{"GET", "/v1/chats?from=" + mainLine, nil, "chats:read"},
		{"POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "x"}, "messages:write"},
		{"GET", "/v1/outbox?id=obx_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil, "outbox:read"},
	} {
		r := td.call(c.method, c.path, readOnly, c.body)
		if r.status != 403 || r.errCode() != "insufficient_scope" || !strings.Contains(r.body["error"].(map[string]any)["message"].(string), c.scope) {
			t.Errorf("%s %s without %s: %d %s", c.method, c.path, c.scope, r.status, r.raw)
		}
	}
	if r := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, readOnly, nil); r.status != 200 {
		t.Errorf("messages:read key reading messages: %d %s", r.status, r.raw)
	}

	if r := td.call("GET", "/v1/chats?from="+smsLine, restricted, nil); r.status != 403 || r.errCode() != "line_not_accessible" {
		t.Errorf("restricted key on another line: %d %s", r.status, r.raw)
	}
	if r := td.call("POST", "/v1/messages", restricted, map[string]any{"from": smsLine, "to": alice, "text": "x"}); r.status != 403 || r.errCode() != "line_not_accessible" {
		t.Errorf("restricted key sending on another line: %d %s", r.status, r.raw)
	}
	if r := td.call("GET", "/v1/chats?from="+mainLine, restricted, nil); r.status != 200 {
		t.Errorf("restricted key on its line: %d %s", r.status, r.raw)
	}
	obx := td.send(noOwner, map[string]any{"from": smsLine, "to": alice, "text": "x"})
	if r := td.call("GET", "/v1/outbox?id="+obx["id"].(string), restricted, nil); r.status != 404 || r.errCode() != "outbox_item_not_found" {
		t.Errorf("restricted key reading another line's outbox item: %d %s", r.status, r.raw)
	}

	// The sandbox is open to every key, but only to keys with an owner.
	if r := td.call("GET", "/v1/chats?from="+sandboxLine, noOwner, nil); r.status != 403 || r.errCode() != "sandbox_requires_owner" {
		t.Errorf("ownerless key on the sandbox: %d %s", r.status, r.raw)
	}
	owned := td.key("--lines", mainLine, "--owner", "ops")
	if r := td.call("GET", "/v1/chats?from="+sandboxLine, owned, nil); r.status != 200 {
		t.Errorf("restricted key with owner on the sandbox: %d %s", r.status, r.raw)
	}

	// keys create refuses what it cannot honour.
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

func TestSendValidation(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	first := td.inbound(mainLine, alice, "hello")
	other := td.inbound(mainLine, bob, "hello from bob")
	td.inbound(smsLine, carol, "hello")
	ok := map[string]any{"from": mainLine, "to": alice, "text": "hi"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range ok {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		param  string
	}{
		{"malformed json", `{"from": `, 400, "invalid_json", ""},
		{"empty body", ``, 400, "invalid_json", ""},
		{"array body", `[1,2]`, 400, "invalid_json", ""},
		{"missing from", with("from", nil), 400, "missing_required_parameter", "from"},
		{"blank from", with("from", " "), 400, "missing_required_parameter", "from"},
		{"missing to", with("to", nil), 400, "missing_required_parameter", "to"},
		{"no text nor attachments", with("text", nil), 400, "missing_required_parameter", "text"},
		{"empty text", with("text", ""), 400, "missing_required_parameter", "text"},
		{"from not a string", with("from", 15550000001), 400, "invalid_parameter_value", "from"},
		{"text not a string", with("text", true), 400, "invalid_parameter_value", "text"},
		{"attachments not an array", with("attachments", "file_x"), 400, "invalid_parameter_value", "attachments"},
		{"two attachments", with("attachments", []string{"file_aaaaaaaaaaaaaaaaaaaaaaaaaa", "file_bbbbbbbbbbbbbbbbbbbbbbbbbb"}), 400, "invalid_parameter_value", "attachments"},
		{"attachment with wrong prefix", with("attachments", []string{"msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), 400, "invalid_parameter_value", "attachments"},
		{"unknown file", with("attachments", []string{"file_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), 404, "file_not_found", "attachments"},
		{"bad recipient", with("to", "not a number"), 400, "invalid_parameter_value", "to"},
		{"a chat ID naming nothing", with("to", "cht_123"), 404, "chat_not_found", "to"},
		{"malformed chat ID", with("to", "cht_1 2"), 400, "invalid_parameter_value", "to"},
		{"unknown chat", with("to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
		{"chat of another line", with("to", td.chatID(smsLine, carol)), 404, "chat_not_found", "to"},
		{"unknown line", with("from", "+15559999999"), 404, "line_not_found", "from"},
		{"bad line handle", with("from", "main line"), 400, "invalid_parameter_value", "from"},
		{"contact never wrote", with("to", carol), 403, "contact_has_not_messaged", "to"},
		{"unknown reply_to ID", with("reply_to", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "reply_to"},
		{"unknown reply_to GUID", with("reply_to", "0000-GUID"), 404, "message_not_found", "reply_to"},
		{"a reply_to ID naming nothing", with("reply_to", "msg_1"), 404, "message_not_found", "reply_to"},
		{"malformed reply_to ID", with("reply_to", "msg_1-2"), 400, "invalid_parameter_value", "reply_to"},
		{"reply_to in another chat", with("reply_to", other["id"]), 400, "invalid_parameter_value", "reply_to"},
		{"too large", `{"from":"` + mainLine + `","to":"` + alice + `","text":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "request_too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := td.call("POST", "/v1/messages", key, c.body)
			if r.status != c.status || r.errCode() != c.code || r.errParam() != c.param {
				t.Fatalf("got %d %s param %q, want %d %s param %q: %s", r.status, r.errCode(), r.errParam(), c.status, c.code, c.param, r.raw)
			}
			if typ := r.body["error"].(map[string]any)["type"]; typ == "" {
				t.Fatalf("no error type: %s", r.raw)
			}
		})
	}

	// Valid variants: by chat ID, formatted handle, reply by msg_ ID and by
	// GUID, unknown fields ignored.
	for _, body := range []map[string]any{
		with("to", td.chatID(mainLine, alice)),
		with("to", "+1 (555) 111-0001"),
		with("reply_to", first["id"]),
		with("reply_to", first["guid"]),
		with("colour", "blue"),
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
	msgs := r.data()
	if len(msgs) == 0 {
		td.t.Fatalf("no chat of %s with %s", line, contact)
	}
	return msgs[0]["chat_id"].(string)
}

func TestListValidation(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	td.inbound(mainLine, alice, "hello")
	chats := td.call("GET", "/v1/chats?from="+mainLine+"&limit=1", key, nil)
	cases := []struct {
		path   string
		status int
		code   string
		param  string
	}{
		{"/v1/chats", 400, "missing_required_parameter", "from"},
		{"/v1/chats?from=" + mainLine + "&limit=0", 400, "invalid_parameter_value", "limit"},
		{"/v1/chats?from=" + mainLine + "&limit=101", 400, "invalid_parameter_value", "limit"},
		{"/v1/chats?from=" + mainLine + "&limit=ten", 400, "invalid_parameter_value", "limit"},
		{"/v1/chats?from=" + mainLine + "&cursor=garbage!", 400, "invalid_parameter_value", "cursor"},
		{"/v1/chats?from=+15559999999", 404, "line_not_found", "from"},
		{"/v1/messages?from=" + mainLine, 400, "missing_required_parameter", "to"},
		{"/v1/messages?to=" + alice, 400, "missing_required_parameter", "from"},
		{"/v1/messages?from=" + mainLine + "&to=cht_aaaaaaaaaaaaaaaaaaaaaaaaaa", 404, "chat_not_found", "to"},
		{"/v1/messages?from=" + mainLine + "&to=" + alice + "&limit=-1", 400, "invalid_parameter_value", "limit"},
		{"/v1/outbox", 400, "missing_required_parameter", "id"},
		{"/v1/outbox?id=msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", 400, "invalid_parameter_value", "id"},
		{"/v1/outbox?id=obx_aaaaaaaaaaaaaaaaaaaaaaaaaa", 404, "outbox_item_not_found", "id"},
	}
	for _, c := range cases {
		r := td.call("GET", c.path, key, nil)
		if r.status != c.status || r.errCode() != c.code || r.errParam() != c.param {
			t.Errorf("GET %s: %d %s param %q, want %d %s %q", c.path, r.status, r.errCode(), r.errParam(), c.status, c.code, c.param)
		}
	}
	// A contact with no chat has no history: an empty list, not an error.
	if r := td.call("GET", "/v1/messages?from="+mainLine+"&to="+carol, key, nil); r.status != 200 || len(r.data()) != 0 || r.body["has_more"] != false {
		t.Errorf("history with a stranger: %d %s", r.status, r.raw)
	}
	// "+" typed unencoded in a query (curl by hand) decodes as a space; a
	// handle parameter still finds the line and the contact.
	req, _ := http.NewRequest("GET", td.base+"/v1/messages?from="+mainLine+"&to="+alice, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("unencoded + in the query: %d", resp.StatusCode)
	}
	// A chat cursor is not a message cursor.
	chatsOf2 := td.inbound(mainLine, bob, "hi")
	_ = chatsOf2
	chats = td.call("GET", "/v1/chats?from="+mainLine+"&limit=1", key, nil)
	cursor, _ := chats.body["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("no cursor with two chats and limit 1: %s", chats.raw)
	}
	if r := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&cursor="+cursor, key, nil); r.errCode() != "invalid_parameter_value" || r.errParam() != "cursor" {
		t.Errorf("chat cursor on messages: %d %s", r.status, r.raw)
	}
}

func TestRoutesMethodsAndCORS(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	if r := td.call("GET", "/v1/nothing", key, nil); r.status != 404 || r.errCode() != "route_not_found" || r.body["error"].(map[string]any)["type"] != "not_found_error" {
		t.Errorf("unknown route: %d %s", r.status, r.raw)
	}
	if r := td.call("GET", "/v1/lines/", key, nil); r.status != 404 || r.errCode() != "route_not_found" {
		t.Errorf("trailing slash: %d %s", r.status, r.raw)
	}
	if r := td.call("PUT", "/v1/messages", key, nil); r.status != 405 || r.errCode() != "method_not_allowed" || !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Errorf("wrong method: %d %s %v", r.status, r.raw, r.header)
	}
	req, _ := http.NewRequest("OPTIONS", td.base+"/v1/messages", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "*" ||
		h.Get("Access-Control-Allow-Methods") != "GET, POST, DELETE, OPTIONS" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, h)
	}
	if r := td.call("GET", "/v1/lines", key, nil); r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("no CORS header on a GET: %v", r.header)
	}
}

func TestSandboxQuota(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key("--owner", "dev")
	td.activateSandbox(key, alice)
	for i := range 5 { // daily_quota = 5 in the test configuration
		td.send(key, map[string]any{"from": sandboxLine, "to": alice, "text": fmt.Sprint(i)})
	}
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": alice, "text": "one too many"})
	if r.status != 429 || r.errCode() != "sandbox_quota_exceeded" || r.body["error"].(map[string]any)["type"] != "rate_limit_error" {
		t.Fatalf("sixth send: %d %s", r.status, r.raw)
	}
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
	// Rejected sends are not counted, and other lines are not limited.
	td.inbound(mainLine, alice, "hi")
	td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "fine"})
}

func TestRateLimit(t *testing.T) {
	td := startTestDaemon(t, "[limits]\nrequests_per_hour = 3\n")
	key, other := td.key(), td.key()
	for range 3 {
		if r := td.call("GET", "/v1/lines", key, nil); r.status != 200 {
			t.Fatalf("within the limit: %d %s", r.status, r.raw)
		}
	}
	r := td.call("GET", "/v1/lines", key, nil)
	if r.status != 429 || r.errCode() != "rate_limit_exceeded" {
		t.Fatalf("over the limit: %d %s", r.status, r.raw)
	}
	// 3 per hour: the next token comes in 20 minutes.
	if ra := r.header.Get("Retry-After"); ra != "1200" {
		t.Fatalf("Retry-After %q, want 1200", ra)
	}
	if r := td.call("GET", "/v1/lines", other, nil); r.status != 200 {
		t.Fatalf("another key is limited too: %d", r.status)
	}
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
	if third.body["id"] != first["id"] || third.body["status"] != "sent" || third.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after delivery: %s", third.raw)
	}
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "text": "twice?"}, "Idempotency-Key", "order-42")
	if r.status != 400 || r.errCode() != "invalid_parameter_value" || r.errParam() != "Idempotency-Key" {
		t.Fatalf("same key, other body: %d %s", r.status, r.raw)
	}
	// Another API key has its own key space.
	if other := td.send(td.key(), body, "Idempotency-Key", "order-42"); other["id"] == first["id"] {
		t.Fatal("idempotency keys are shared between API keys")
	}
	sent := 0
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).data() {
		if m["text"] == "once" {
			sent++
		}
	}
	eventually(t, 5*time.Second, func() bool {
		n := 0
		for _, out := range td.d.Sim().Delivered() {
			if out.Text == "once" {
				n++
			}
		}
		return n == 2 // the first key's one send, and the other API key's
	})
	if sent != 1 {
		t.Fatalf("%d copies of the message in history", sent)
	}
}

func TestGroupChats(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	m := td.inbound(mainLine, alice, "welcome to the group", "--group", "Climbing", "--participants", alice+","+bob)
	chatID := m["chat_id"].(string)
	chats := td.call("GET", "/v1/chats?from="+mainLine, key, nil).data()
	if len(chats) != 1 || chats[0]["is_group"] != true || chats[0]["name"] != "Climbing" ||
		!slices.Equal(anyStrings(chats[0]["participants"]), []string{alice, bob}) || !strings.HasPrefix(chats[0]["identifier"].(string), "chat") {
		t.Fatalf("group chat: %v", chats)
	}
	td.inbound(mainLine, carol, "I'm in too", "--chat", chatID)
	chat := td.call("GET", "/v1/chats?from="+mainLine, key, nil).data()[0]
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
	if msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+chatID, key, nil).data(); len(msgs) != 3 || msgs[0]["text"] != "hello all" {
		t.Fatalf("group history: %v", msgs)
	}
	// The group's identifier names it as well as its ID.
	ident := chat["identifier"].(string)
	if msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+ident, key, nil).data(); len(msgs) != 3 {
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
	msgs := td.call("GET", "/v1/messages?from="+smsLine+"&to="+alice, key, nil).data()
	if msgs[0]["service"] != "sms" || msgs[0]["is_from_me"] != true {
		t.Fatalf("sent on an SMS line: %v", msgs[0])
	}
	if chats := td.call("GET", "/v1/chats?from="+smsLine, key, nil).data(); chats[0]["service"] != "sms" {
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
