package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// withFields copies m with each key, value pair of kv set (a nil value
// removes the key).
func withFields(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// checkErrorType reports an error whose type is not the one the spec's
// table gives its status and code, or that has no message.
func checkErrorType(t *testing.T, what string, r response) {
	t.Helper()
	want := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "authorization_error",
		404: "not_found_error", 413: "invalid_request_error", 429: "rate_limit_error"}[r.status]
	if r.errCode() == "contact_has_not_messaged" {
		want = "invalid_request_error"
	}
	e, _ := r.body["error"].(map[string]any)
	if msg, _ := e["message"].(string); e["type"] != want || msg == "" {
		t.Errorf("%s: error type %v, want %s (or no message): %s", what, e["type"], want, r.raw)
	}
}

// Every response carries a request ID, in the body and the X-Request-Id header.
func TestRequestIDs(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	for _, r := range []response{
		e.call("GET", "/v1/lines", key, nil),
		e.call("GET", "/v1/lines", "", nil),
		e.call("GET", "/v1/nothing", key, nil),
		e.call("GET", "/v1/outbox?id=obx_aaaaaaaaaaaaaaaaaaaaaaaaaa", key, nil),
	} {
		id, _ := r.body["request_id"].(string)
		if !strings.HasPrefix(id, "req_") || r.header.Get("X-Request-Id") != id {
			t.Errorf("request_id %q, header %q in %s", id, r.header.Get("X-Request-Id"), r.raw)
		}
	}
}

func TestLines(t *testing.T) {
	e := newAPI(t, defaultOptions())
	all := e.call("GET", "/v1/lines", e.key(keyOpts{}), nil)
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
	restricted := e.call("GET", "/v1/lines", e.key(keyOpts{Lines: []string{smsLine}}), nil).data()
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
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	cases := []struct {
		name, header string
		status       int
	}{
		{"no header", "", 401},
		{"not bearer", "Basic " + key, 401},
		{"no prefix", "Bearer abc", 401},
		{"unknown", "Bearer sk_live_" + strings.Repeat("x", 40), 401},
		{"too long", "Bearer sk_live_" + strings.Repeat("x", 200), 401},
		{"lower-case scheme", "bearer " + key, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.base+"/v1/lines", nil)
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
	r := e.call("GET", "/v1/lines", "", nil)
	if r.errType() != "authentication_error" || r.errCode() != "missing_api_key" {
		t.Fatalf("error shape: %s", r.raw)
	}
	checkErrorType(t, "no key", r)
	if r := e.call("GET", "/v1/lines", "sk_live_nope", nil); r.errCode() != "invalid_api_key" {
		t.Fatalf("unknown key: %s", r.raw)
	}
}

func TestScopesAndLineRestrictions(t *testing.T) {
	e := newAPI(t, defaultOptions())
	e.inbound(mainLine, alice, "hello")
	e.inbound(smsLine, alice, "hello")
	readOnly := e.key(keyOpts{Scopes: []string{"messages:read", "lines:read"}})
	restricted := e.key(keyOpts{Lines: []string{mainLine}})
	noOwner := e.key(keyOpts{})

	for _, c := range []struct {
		method, path string
		body         any
		scope        string
	}{
		{"GET", "/v1/chats?from=" + mainLine, nil, "chats:read"},
		{"POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "x"}, "messages:write"},
		{"GET", "/v1/outbox?id=obx_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil, "outbox:read"},
	} {
		r := e.call(c.method, c.path, readOnly, c.body)
		if r.status != 403 || r.errCode() != "insufficient_scope" || !strings.Contains(r.body["error"].(map[string]any)["message"].(string), c.scope) {
			t.Errorf("%s %s without %s: %d %s", c.method, c.path, c.scope, r.status, r.raw)
		}
	}
	if r := e.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, readOnly, nil); r.status != 200 {
		t.Errorf("messages:read key reading messages: %d %s", r.status, r.raw)
	}

	if r := e.call("GET", "/v1/chats?from="+smsLine, restricted, nil); r.status != 403 || r.errCode() != "line_not_accessible" {
		t.Errorf("restricted key on another line: %d %s", r.status, r.raw)
	}
	if r := e.call("POST", "/v1/messages", restricted, map[string]any{"from": smsLine, "to": alice, "text": "x"}); r.status != 403 || r.errCode() != "line_not_accessible" {
		t.Errorf("restricted key sending on another line: %d %s", r.status, r.raw)
	}
	if r := e.call("GET", "/v1/chats?from="+mainLine, restricted, nil); r.status != 200 {
		t.Errorf("restricted key on its line: %d %s", r.status, r.raw)
	}
	obx := e.send(noOwner, map[string]any{"from": smsLine, "to": alice, "text": "x"})
	if r := e.call("GET", "/v1/outbox?id="+obx["id"].(string), restricted, nil); r.status != 404 || r.errCode() != "outbox_item_not_found" {
		t.Errorf("restricted key reading another line's outbox item: %d %s", r.status, r.raw)
	}
	if r := e.call("GET", "/v1/outbox?id="+obx["id"].(string), noOwner, nil); r.status != 200 || r.body["id"] != obx["id"] || r.body["status"] != "pending" {
		t.Errorf("reading the outbox item: %d %s", r.status, r.raw)
	}

	// The sandbox is open to every key, but only to keys with an owner.
	if r := e.call("GET", "/v1/chats?from="+sandboxLine, noOwner, nil); r.status != 403 || r.errCode() != "sandbox_requires_owner" {
		t.Errorf("ownerless key on the sandbox: %d %s", r.status, r.raw)
	}
	owned := e.key(keyOpts{Lines: []string{mainLine}, Owner: "ops"})
	if r := e.call("GET", "/v1/chats?from="+sandboxLine, owned, nil); r.status != 200 {
		t.Errorf("restricted key with owner on the sandbox: %d %s", r.status, r.raw)
	}
}

func TestSendValidation(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hello")
	other := e.inbound(mainLine, bob, "hello from bob")
	carols := e.inbound(smsLine, carol, "hello")
	ok := map[string]any{"from": mainLine, "to": alice, "text": "hi"}
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
		{"missing from", withFields(ok, "from", nil), 400, "missing_required_parameter", "from"},
		{"blank from", withFields(ok, "from", " "), 400, "missing_required_parameter", "from"},
		{"missing to", withFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"no text nor attachments", withFields(ok, "text", nil), 400, "missing_required_parameter", "text"},
		{"empty text", withFields(ok, "text", ""), 400, "missing_required_parameter", "text"},
		{"from not a string", withFields(ok, "from", 15550000001), 400, "invalid_parameter_value", "from"},
		{"text not a string", withFields(ok, "text", true), 400, "invalid_parameter_value", "text"},
		{"attachments not an array", withFields(ok, "attachments", "file_x"), 400, "invalid_parameter_value", "attachments"},
		{"two attachments", withFields(ok, "attachments", []string{"file_aaaaaaaaaaaaaaaaaaaaaaaaaa", "file_bbbbbbbbbbbbbbbbbbbbbbbbbb"}), 400, "invalid_parameter_value", "attachments"},
		{"attachment with wrong prefix", withFields(ok, "attachments", []string{"msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), 400, "invalid_parameter_value", "attachments"},
		{"unknown file", withFields(ok, "attachments", []string{"file_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), 404, "file_not_found", "attachments"},
		{"bad recipient", withFields(ok, "to", "not a number"), 400, "invalid_parameter_value", "to"},
		{"a chat ID naming nothing", withFields(ok, "to", "cht_123"), 404, "chat_not_found", "to"},
		{"malformed chat ID", withFields(ok, "to", "cht_1 2"), 400, "invalid_parameter_value", "to"},
		{"unknown chat", withFields(ok, "to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
		{"chat of another line", withFields(ok, "to", carols.ChatID), 404, "chat_not_found", "to"},
		{"unknown line", withFields(ok, "from", "+15559999999"), 404, "line_not_found", "from"},
		{"bad line handle", withFields(ok, "from", "main line"), 400, "invalid_parameter_value", "from"},
		{"contact never wrote", withFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"unknown reply_to ID", withFields(ok, "reply_to", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "reply_to"},
		{"unknown reply_to GUID", withFields(ok, "reply_to", "0000-GUID"), 404, "message_not_found", "reply_to"},
		{"a reply_to ID naming nothing", withFields(ok, "reply_to", "msg_1"), 404, "message_not_found", "reply_to"},
		{"malformed reply_to ID", withFields(ok, "reply_to", "msg_1-2"), 400, "invalid_parameter_value", "reply_to"},
		{"reply_to in another chat", withFields(ok, "reply_to", other.ID), 400, "invalid_parameter_value", "reply_to"},
		{"too large", `{"from":"` + mainLine + `","to":"` + alice + `","text":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "request_too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/v1/messages", key, c.body)
			if r.status != c.status || r.errCode() != c.code || r.errParam() != c.param {
				t.Fatalf("got %d %s param %q, want %d %s param %q: %s", r.status, r.errCode(), r.errParam(), c.status, c.code, c.param, r.raw)
			}
			checkErrorType(t, c.name, r)
		})
	}
}

func TestListValidation(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hello")
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
		r := e.call("GET", c.path, key, nil)
		if r.status != c.status || r.errCode() != c.code || r.errParam() != c.param {
			t.Errorf("GET %s: %d %s param %q, want %d %s %q", c.path, r.status, r.errCode(), r.errParam(), c.status, c.code, c.param)
		}
	}
	// A contact with no chat has no history: an empty list, not an error.
	if r := e.call("GET", "/v1/messages?from="+mainLine+"&to="+carol, key, nil); r.status != 200 || len(r.data()) != 0 || r.body["has_more"] != false {
		t.Errorf("history with a stranger: %d %s", r.status, r.raw)
	}
	// "+" typed unencoded in a query (curl by hand) decodes as a space; a
	// handle parameter still finds the line and the contact.
	req, _ := http.NewRequest("GET", e.base+"/v1/messages?from="+mainLine+"&to="+alice, nil)
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
	e.inbound(mainLine, bob, "hi")
	chats := e.call("GET", "/v1/chats?from="+mainLine+"&limit=1", key, nil)
	cursor, _ := chats.body["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("no cursor with two chats and limit 1: %s", chats.raw)
	}
	if r := e.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&cursor="+cursor, key, nil); r.errCode() != "invalid_parameter_value" || r.errParam() != "cursor" {
		t.Errorf("chat cursor on messages: %d %s", r.status, r.raw)
	}
}

func TestRoutesMethodsAndCORS(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	if r := e.call("GET", "/v1/nothing", key, nil); r.status != 404 || r.errCode() != "route_not_found" || r.errType() != "not_found_error" {
		t.Errorf("unknown route: %d %s", r.status, r.raw)
	}
	if r := e.call("GET", "/v1/lines/", key, nil); r.status != 404 || r.errCode() != "route_not_found" {
		t.Errorf("trailing slash: %d %s", r.status, r.raw)
	}
	if r := e.call("PUT", "/v1/messages", key, nil); r.status != 405 || r.errCode() != "method_not_allowed" || !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Errorf("wrong method: %d %s %v", r.status, r.raw, r.header)
	}
	req, _ := http.NewRequest("OPTIONS", e.base+"/v1/messages", nil)
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
	if r := e.call("GET", "/v1/lines", key, nil); r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("no CORS header on a GET: %v", r.header)
	}
}

func TestSandboxQuota(t *testing.T) {
	e := newAPI(t, defaultOptions()) // SandboxQuota: 5
	key := e.key(keyOpts{Owner: "dev"})
	e.activateSandbox(key, alice)
	for i := range 5 {
		e.send(key, map[string]any{"from": sandboxLine, "to": alice, "text": fmt.Sprint(i)})
	}
	r := e.call("POST", "/v1/messages", key, map[string]any{"from": sandboxLine, "to": alice, "text": "one too many"})
	if r.status != 429 || r.errCode() != "sandbox_quota_exceeded" || r.errType() != "rate_limit_error" {
		t.Fatalf("sixth send: %d %s", r.status, r.raw)
	}
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
	// Rejected sends are not counted, and other lines are not limited.
	e.inbound(mainLine, alice, "hi")
	e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "fine"})
}

func TestRateLimit(t *testing.T) {
	opts := defaultOptions()
	opts.RequestsPerHour = 3
	e := newAPI(t, opts)
	key, other := e.key(keyOpts{}), e.key(keyOpts{})
	for range 3 {
		if r := e.call("GET", "/v1/lines", key, nil); r.status != 200 {
			t.Fatalf("within the limit: %d %s", r.status, r.raw)
		}
	}
	r := e.call("GET", "/v1/lines", key, nil)
	if r.status != 429 || r.errCode() != "rate_limit_exceeded" {
		t.Fatalf("over the limit: %d %s", r.status, r.raw)
	}
	// 3 per hour: the next token comes in 20 minutes.
	if ra := r.header.Get("Retry-After"); ra != "1200" {
		t.Fatalf("Retry-After %q, want 1200", ra)
	}
	if r := e.call("GET", "/v1/lines", other, nil); r.status != 200 {
		t.Fatalf("another key is limited too: %d", r.status)
	}
}

// Whatever a key cannot see answers as if it did not exist: 404 with the
// resource's code, an ID-shaped value naming nothing included; 400 stays
// for a value that is not such an ID at all.
func TestOneNotFoundRule(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	keyPlain := e.key(keyOpts{Lines: []string{plainLine}})
	in := e.inbound(mainLine, alice, "hello")
	obx := e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "hi"})["id"].(string)

	const missing = "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, c := range []struct {
		what   string
		r      response
		status int
		code   string
	}{
		{"an outbox ID naming nothing", e.call("GET", "/v1/outbox?id=obx_"+missing, key, nil), 404, "outbox_item_not_found"},
		{"an outbox ID of another shape naming nothing", e.call("GET", "/v1/outbox?id=obx_doesnotexist", key, nil), 404, "outbox_item_not_found"},
		{"an outbox ID with the wrong prefix", e.call("GET", "/v1/outbox?id=msg_"+missing, key, nil), 400, "invalid_parameter_value"},
		{"not an outbox ID at all", e.call("GET", "/v1/outbox?id=obx_!!", key, nil), 400, "invalid_parameter_value"},
		{"a file ID naming nothing", e.call("GET", "/v1/files?id=file_nothing", key, nil), 404, "file_not_found"},
		{"not a file ID", e.call("GET", "/v1/files?id=nothing", key, nil), 400, "invalid_parameter_value"},
		{"a webhook ID naming nothing", e.call("DELETE", "/v1/webhooks", key, map[string]any{"id": "wh_nothing"}), 404, "webhook_not_found"},
		{"a message ID naming nothing", e.call("GET", "/v1/reactions?message_id=msg_nothing", key, nil), 404, "message_not_found"},
		{"a reply to a message ID naming nothing", e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "text": "x", "reply_to": "msg_nothing"}), 404, "message_not_found"},
		{"a chat ID naming nothing", e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": "cht_nothing", "text": "x"}), 404, "chat_not_found"},
		{"a file attachment naming nothing", e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "attachments": []string{"file_nothing"}}), 404, "file_not_found"},
		{"a line ID naming nothing", e.call("GET", "/v1/chats?from=ln_nothing", key, nil), 404, "line_not_found"},
		{"a message on a line the key may not use", e.call("GET", "/v1/reactions?message_id="+in.ID, keyPlain, nil), 404, "message_not_found"},
		{"an outbox item on a line the key may not use", e.call("GET", "/v1/outbox?id="+obx, keyPlain, nil), 404, "outbox_item_not_found"},
		{"a line the key names directly", e.call("GET", "/v1/chats?from="+mainLine, keyPlain, nil), 403, "line_not_accessible"},
	} {
		if c.r.status != c.status || c.r.errCode() != c.code {
			t.Errorf("%s: %d %s; want %d %s", c.what, c.r.status, c.r.raw, c.status, c.code)
		}
		checkErrorType(t, c.what, c.r)
	}
}

func TestReactionValidation(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	in := e.inbound(mainLine, alice, "hi")
	bobs := e.inbound(mainLine, bob, "hi")
	plain := e.inbound(plainLine, alice, "hi")
	e.inbound(smsLine, alice, "hi")
	readOnly := e.key(keyOpts{Scopes: []string{"messages:read", "reactions:read"}})
	onlyPlain := e.key(keyOpts{Lines: []string{plainLine}})
	onlyMain := e.key(keyOpts{Lines: []string{mainLine}})
	ok := map[string]any{"from": mainLine, "to": alice, "message_id": in.ID, "type": "like"}
	cases := []struct {
		name   string
		key    string
		body   any
		status int
		code   string
		param  string // checked when set
	}{
		{"no key", "", ok, 401, "missing_api_key", ""},
		{"no scope, bad body", readOnly, withFields(ok, "type", "wink"), 403, "insufficient_scope", ""},
		{"malformed json", key, `{"from":`, 400, "invalid_json", ""},
		{"missing from", key, withFields(ok, "from", nil), 400, "missing_required_parameter", "from"},
		{"missing to", key, withFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"missing message_id", key, withFields(ok, "message_id", nil), 400, "missing_required_parameter", "message_id"},
		{"missing type", key, withFields(ok, "type", nil), 400, "missing_required_parameter", "type"},
		{"blank type", key, withFields(ok, "type", " "), 400, "missing_required_parameter", "type"},
		{"unknown type", key, withFields(ok, "type", "wink"), 400, "invalid_parameter_value", "type"},
		{"upper-case type", key, withFields(ok, "type", "LOVE"), 400, "invalid_parameter_value", "type"},
		{"type not a string", key, withFields(ok, "type", 2000), 400, "invalid_parameter_value", "type"},
		{"remove not a bool", key, withFields(ok, "remove", "yes"), 400, "invalid_parameter_value", "remove"},
		{"bad type on an unknown line", key, withFields(ok, "type", "wink", "from", "+15559999999"), 400, "invalid_parameter_value", "type"},
		{"unknown line", key, withFields(ok, "from", "+15559999999"), 404, "line_not_found", "from"},
		{"line of another key", onlyPlain, ok, 403, "line_not_accessible", ""},
		{"access before advanced features", onlyMain, withFields(ok, "from", plainLine, "message_id", plain.ID), 403, "line_not_accessible", ""},
		{"no advanced features", key, withFields(ok, "from", plainLine, "message_id", plain.ID), 400, "advanced_features_required", "from"},
		{"SMS line", key, withFields(ok, "from", smsLine), 400, "advanced_features_required", "from"},
		{"advanced features before recipient", key, withFields(ok, "from", plainLine, "to", carol), 400, "advanced_features_required", "from"},
		{"contact never wrote", key, withFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"recipient before message", key, withFields(ok, "to", carol, "message_id", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 403, "contact_has_not_messaged", "to"},
		{"unknown chat", key, withFields(ok, "to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
		{"unknown message ID", key, withFields(ok, "message_id", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "message_id"},
		{"unknown GUID", key, withFields(ok, "message_id", "0000-NO-SUCH-GUID"), 404, "message_not_found", "message_id"},
		{"a message ID of another shape naming nothing", key, withFields(ok, "message_id", "msg_1"), 404, "message_not_found", "message_id"},
		{"malformed message ID", key, withFields(ok, "message_id", "msg_!"), 400, "invalid_parameter_value", "message_id"},
		{"message of another line", key, withFields(ok, "message_id", plain.ID), 404, "message_not_found", "message_id"},
		{"message of another chat", key, withFields(ok, "message_id", bobs.ID), 400, "invalid_parameter_value", "message_id"},
		{"message of another chat, by GUID", key, withFields(ok, "message_id", bobs.GUID), 400, "invalid_parameter_value", "message_id"},
	}
	for _, c := range cases {
		r := e.call("POST", "/v1/reactions", c.key, c.body)
		if r.status != c.status || r.errCode() != c.code || c.param != "" && r.errParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.status, r.errCode(), r.errParam(), c.status, c.code, c.param, r.raw)
		}
		checkErrorType(t, c.name, r)
	}

	// Reading reactions.
	for _, c := range []struct {
		name, key, query string
		status           int
		code             string
	}{
		{"missing message_id", key, "", 400, "missing_required_parameter"},
		{"unknown message", key, "?message_id=msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", 404, "message_not_found"},
		{"unknown GUID", key, "?message_id=0000-NO-SUCH-GUID", 404, "message_not_found"},
		{"an ID of another shape naming nothing", key, "?message_id=msg_1", 404, "message_not_found"},
		{"malformed ID", key, "?message_id=msg_%21", 400, "invalid_parameter_value"},
		// Not found, as if it did not exist (not 403: that would say it does).
		{"line of another key", onlyMain, "?message_id=" + plain.ID, 404, "message_not_found"},
		{"no reactions:read", e.key(keyOpts{Scopes: []string{"reactions:write"}}), "?message_id=" + in.ID, 403, "insufficient_scope"},
	} {
		r := e.call("GET", "/v1/reactions"+c.query, c.key, nil)
		if r.status != c.status || r.errCode() != c.code || c.status != 403 && r.errParam() != "message_id" {
			t.Errorf("GET %s: %d %s", c.name, r.status, r.raw)
		}
	}
	// Reading works on a line without advanced features: contacts react there too.
	if r := e.call("GET", "/v1/reactions?message_id="+plain.ID, onlyPlain, nil); r.status != 200 || len(r.data()) != 0 || r.body["has_more"] != false {
		t.Fatalf("reactions before any: %d %s", r.status, r.raw)
	}
}

// The rate limit is checked before the scope.
func TestRateLimitBeforeScope(t *testing.T) {
	opts := defaultOptions()
	opts.RequestsPerHour = 1
	e := newAPI(t, opts)
	noScope := e.key(keyOpts{Scopes: []string{"messages:read"}})
	body := map[string]any{"from": mainLine, "to": alice, "message_id": "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", "type": "like"}
	if r := e.call("POST", "/v1/reactions", noScope, body); r.status != 403 || r.errCode() != "insufficient_scope" {
		t.Fatalf("first request: %d %s", r.status, r.raw)
	}
	if r := e.call("POST", "/v1/reactions", noScope, body); r.status != 429 || r.errCode() != "rate_limit_exceeded" {
		t.Fatalf("second request: %d %s", r.status, r.raw)
	}
}

// Registering, listing and deleting webhooks, and what registration refuses.
func TestWebhookRegistration(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	all := []string{"message.received", "message.sent", "reaction.added", "reaction.removed"}
	bad := []struct {
		name  string
		body  map[string]any
		code  string
		param string
	}{
		{"no url", map[string]any{"from": plainLine, "events": all}, "missing_required_parameter", "url"},
		{"no events", map[string]any{"from": plainLine, "url": "https://93.184.215.14/h"}, "missing_required_parameter", "events"},
		{"empty events", map[string]any{"from": plainLine, "url": "https://93.184.215.14/h", "events": []string{}}, "invalid_parameter_value", "events"},
		{"unknown event", map[string]any{"from": plainLine, "url": "https://93.184.215.14/h", "events": []string{"message.deleted"}}, "invalid_parameter_value", "events"},
		{"typing", map[string]any{"from": plainLine, "url": "https://93.184.215.14/h", "events": []string{"typing.started"}}, "invalid_parameter_value", "events"},
		{"typing stopped", map[string]any{"from": plainLine, "url": "https://93.184.215.14/h", "events": []string{"typing.stopped"}}, "invalid_parameter_value", "events"},
		{"http", map[string]any{"from": plainLine, "url": "http://93.184.215.14/h", "events": all}, "invalid_parameter_value", "url"},
		{"not a URL", map[string]any{"from": plainLine, "url": "::nope", "events": all}, "invalid_parameter_value", "url"},
		{"credentials", map[string]any{"from": plainLine, "url": "https://u:p@93.184.215.14/h", "events": all}, "invalid_parameter_value", "url"},
		{"loopback", map[string]any{"from": plainLine, "url": "https://127.0.0.1/h", "events": all}, "invalid_parameter_value", "url"},
		{"private", map[string]any{"from": plainLine, "url": "https://10.0.0.1/h", "events": all}, "invalid_parameter_value", "url"},
		{"metadata", map[string]any{"from": plainLine, "url": "https://169.254.169.254/latest/meta-data", "events": all}, "invalid_parameter_value", "url"},
		{"ipv6 loopback", map[string]any{"from": plainLine, "url": "https://[::1]:8443/h", "events": all}, "invalid_parameter_value", "url"},
		{"mapped loopback", map[string]any{"from": plainLine, "url": "https://[::ffff:127.0.0.1]/h", "events": all}, "invalid_parameter_value", "url"},
		{"name of loopback", map[string]any{"from": plainLine, "url": "https://localhost:8443/h", "events": all}, "invalid_parameter_value", "url"},
		{"unknown line", map[string]any{"from": "+15559999999", "url": "https://93.184.215.14/h", "events": all}, "line_not_found", "from"},
	}
	for _, c := range bad {
		r := e.call("POST", "/v1/webhooks", key, c.body)
		if r.errCode() != c.code || r.errParam() != c.param {
			t.Errorf("%s: %d %s", c.name, r.status, r.raw)
		}
	}
	if r := e.call("POST", "/v1/webhooks", key, bad[11].body); !strings.Contains(r.body["error"].(map[string]any)["message"].(string), "169.254.169.254 is not a public address") {
		t.Errorf("the refusal does not say why: %s", r.raw)
	}

	// A public address is accepted. (No event happens on this line, so
	// nothing is ever sent to it.)
	created := e.call("POST", "/v1/webhooks", key, map[string]any{"from": plainLine, "url": "https://93.184.215.14/hook",
		"events": []string{"message.received", "message.received", "reaction.added"}})
	if created.status != 201 {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	id, secret := created.body["id"].(string), created.body["secret"].(string)
	plain := e.lines[plainLine]
	if !strings.HasPrefix(id, "wh_") || !strings.HasPrefix(secret, "whsec_") || len(secret) < 40 || created.body["is_active"] != true ||
		created.body["request_id"] == nil || len(created.body["events"].([]any)) != 2 || created.body["line_ids"].([]any)[0] != plain.ID {
		t.Fatalf("created %s", created.raw)
	}

	list := e.call("GET", "/v1/webhooks?from="+plainLine, key, nil)
	if items := list.data(); len(items) != 1 || items[0]["secret"] != secret || list.body["has_more"] != false {
		t.Fatalf("list: %s", list.raw)
	}
	if items := e.call("GET", "/v1/webhooks?from="+mainLine, key, nil).data(); len(items) != 0 {
		t.Errorf("another line lists %v", items)
	}

	// Keys limited to other lines, or without the scopes, are refused.
	other := e.key(keyOpts{Lines: []string{mainLine}})
	if r := e.call("GET", "/v1/webhooks?from="+plainLine, other, nil); r.errCode() != "line_not_accessible" {
		t.Errorf("restricted list: %d %s", r.status, r.raw)
	}
	if r := e.call("DELETE", "/v1/webhooks", other, map[string]any{"id": id}); r.status != 404 || r.errCode() != "webhook_not_found" {
		t.Errorf("restricted delete: %d %s", r.status, r.raw)
	}
	readOnly := e.key(keyOpts{Scopes: []string{"webhooks:read"}})
	if r := e.call("POST", "/v1/webhooks", readOnly, created.body); r.errCode() != "insufficient_scope" {
		t.Errorf("create without webhooks:write: %d %s", r.status, r.raw)
	}

	del := e.call("DELETE", "/v1/webhooks", key, map[string]any{"id": id})
	if del.status != 200 || del.body["id"] != id || del.body["deleted"] != true || del.body["request_id"] == nil {
		t.Fatalf("delete: %d %s", del.status, del.raw)
	}
	for _, c := range []struct {
		body  any
		code  string
		param string
	}{
		{map[string]any{"id": id}, "webhook_not_found", "id"},
		{map[string]any{}, "missing_required_parameter", "id"},
		{map[string]any{"id": "msg_x"}, "invalid_parameter_value", "id"},
		{"nope", "invalid_json", ""},
	} {
		if r := e.call("DELETE", "/v1/webhooks", key, c.body); r.errCode() != c.code || r.errParam() != c.param {
			t.Errorf("delete %v: %d %s", c.body, r.status, r.raw)
		}
	}
	if items := e.call("GET", "/v1/webhooks?from="+plainLine, key, nil).data(); len(items) != 0 {
		t.Errorf("deleted webhook still listed: %v", items)
	}
}
