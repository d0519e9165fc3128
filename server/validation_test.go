package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/storage"
)

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
		id, _ := r.Body["request_id"].(string)
		if !strings.HasPrefix(id, "req_") || r.Header.Get("X-Request-Id") != id {
			t.Errorf("request_id %q, header %q in %s", id, r.Header.Get("X-Request-Id"), r.Raw)
		}
	}
}

func TestLines(t *testing.T) {
	e := newAPI(t, defaultOptions())
	all := e.call("GET", "/v1/lines", e.key(keyOpts{}), nil)
	lines := all.Data()
	if all.Status != 200 || len(lines) != 4 || all.Body["has_more"] != false || all.Body["next_cursor"] != nil {
		t.Fatalf("lines: %d %s", all.Status, all.Raw)
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
	restricted := e.call("GET", "/v1/lines", e.key(keyOpts{Lines: []string{smsLine}}), nil).Data()
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
			var header []string
			if c.header != "" {
				header = []string{"Authorization", c.header}
			}
			if r := (apitest.Client{TB: t, Base: e.base}).Call("GET", "/v1/lines", "", nil, header...); r.Status != c.status {
				t.Fatalf("status %d, want %d", r.Status, c.status)
			}
		})
	}
	r := e.call("GET", "/v1/lines", "", nil)
	if r.ErrType() != "authentication_error" || r.ErrCode() != "missing_api_key" {
		t.Fatalf("error shape: %s", r.Raw)
	}
	apitest.CheckErrorType(t, "no key", r)
	if r := e.call("GET", "/v1/lines", "sk_live_nope", nil); r.ErrCode() != "invalid_api_key" {
		t.Fatalf("unknown key: %s", r.Raw)
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
		if r.Status != 403 || r.ErrCode() != "insufficient_scope" || !strings.Contains(r.Body["error"].(map[string]any)["message"].(string), c.scope) {
			t.Errorf("%s %s without %s: %d %s", c.method, c.path, c.scope, r.Status, r.Raw)
		}
	}
	if r := e.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, readOnly, nil); r.Status != 200 {
		t.Errorf("messages:read key reading messages: %d %s", r.Status, r.Raw)
	}

	if r := e.call("GET", "/v1/chats?from="+smsLine, restricted, nil); r.Status != 403 || r.ErrCode() != "line_not_accessible" {
		t.Errorf("restricted key on another line: %d %s", r.Status, r.Raw)
	}
	if r := e.call("POST", "/v1/messages", restricted, map[string]any{"from": smsLine, "to": alice, "text": "x"}); r.Status != 403 || r.ErrCode() != "line_not_accessible" {
		t.Errorf("restricted key sending on another line: %d %s", r.Status, r.Raw)
	}
	if r := e.call("GET", "/v1/chats?from="+mainLine, restricted, nil); r.Status != 200 {
		t.Errorf("restricted key on its line: %d %s", r.Status, r.Raw)
	}
	obx := e.send(noOwner, map[string]any{"from": smsLine, "to": alice, "text": "x"})
	if r := e.call("GET", "/v1/outbox?id="+obx["id"].(string), restricted, nil); r.Status != 404 || r.ErrCode() != "outbox_item_not_found" {
		t.Errorf("restricted key reading another line's outbox item: %d %s", r.Status, r.Raw)
	}
	if r := e.call("GET", "/v1/outbox?id="+obx["id"].(string), noOwner, nil); r.Status != 200 || r.Body["id"] != obx["id"] || r.Body["status"] != "pending" {
		t.Errorf("reading the outbox item: %d %s", r.Status, r.Raw)
	}

	// The sandbox is open to every key, but only to keys with an owner.
	if r := e.call("GET", "/v1/chats?from="+sandboxLine, noOwner, nil); r.Status != 403 || r.ErrCode() != "sandbox_requires_owner" {
		t.Errorf("ownerless key on the sandbox: %d %s", r.Status, r.Raw)
	}
	owned := e.key(keyOpts{Lines: []string{mainLine}, Owner: "ops"})
	if r := e.call("GET", "/v1/chats?from="+sandboxLine, owned, nil); r.Status != 200 {
		t.Errorf("restricted key with owner on the sandbox: %d %s", r.Status, r.Raw)
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
		{"missing from", apitest.WithFields(ok, "from", nil), 400, "missing_required_parameter", "from"},
		{"blank from", apitest.WithFields(ok, "from", " "), 400, "missing_required_parameter", "from"},
		{"missing to", apitest.WithFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"no text nor attachments", apitest.WithFields(ok, "text", nil), 400, "missing_required_parameter", "text"},
		{"empty text", apitest.WithFields(ok, "text", ""), 400, "missing_required_parameter", "text"},
		{"from not a string", apitest.WithFields(ok, "from", 15550000001), 400, "invalid_parameter_value", "from"},
		{"text not a string", apitest.WithFields(ok, "text", true), 400, "invalid_parameter_value", "text"},
		{"attachments not an array", apitest.WithFields(ok, "attachments", "file_x"), 400, "invalid_parameter_value", "attachments"},
		{"two attachments", apitest.WithFields(ok, "attachments", []string{"file_aaaaaaaaaaaaaaaaaaaaaaaaaa", "file_bbbbbbbbbbbbbbbbbbbbbbbbbb"}), 400, "invalid_parameter_value", "attachments"},
		{"attachment with wrong prefix", apitest.WithFields(ok, "attachments", []string{"msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), 400, "invalid_parameter_value", "attachments"},
		{"unknown file", apitest.WithFields(ok, "attachments", []string{"file_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), 404, "file_not_found", "attachments"},
		{"bad recipient", apitest.WithFields(ok, "to", "not a number"), 400, "invalid_parameter_value", "to"},
		{"a chat ID naming nothing", apitest.WithFields(ok, "to", "cht_123"), 404, "chat_not_found", "to"},
		{"malformed chat ID", apitest.WithFields(ok, "to", "cht_1 2"), 400, "invalid_parameter_value", "to"},
		{"unknown chat", apitest.WithFields(ok, "to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
		{"chat of another line", apitest.WithFields(ok, "to", carols.ChatID), 404, "chat_not_found", "to"},
		{"unknown line", apitest.WithFields(ok, "from", "+15559999999"), 404, "line_not_found", "from"},
		{"bad line handle", apitest.WithFields(ok, "from", "main line"), 400, "invalid_parameter_value", "from"},
		{"contact never wrote", apitest.WithFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"unknown reply_to ID", apitest.WithFields(ok, "reply_to", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "reply_to"},
		{"unknown reply_to GUID", apitest.WithFields(ok, "reply_to", "0000-GUID"), 404, "message_not_found", "reply_to"},
		{"a reply_to ID naming nothing", apitest.WithFields(ok, "reply_to", "msg_1"), 404, "message_not_found", "reply_to"},
		{"malformed reply_to ID", apitest.WithFields(ok, "reply_to", "msg_1-2"), 400, "invalid_parameter_value", "reply_to"},
		{"reply_to in another chat", apitest.WithFields(ok, "reply_to", other.ID), 400, "invalid_parameter_value", "reply_to"},
		{"too large", `{"from":"` + mainLine + `","to":"` + alice + `","text":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "request_too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("POST", "/v1/messages", key, c.body)
			if r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
				t.Fatalf("got %d %s param %q, want %d %s param %q: %s", r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param, r.Raw)
			}
			apitest.CheckErrorType(t, c.name, r)
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
		if r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("GET %s: %d %s param %q, want %d %s %q", c.path, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param)
		}
	}
	// A contact with no chat has no history: an empty list, not an error.
	if r := e.call("GET", "/v1/messages?from="+mainLine+"&to="+carol, key, nil); r.Status != 200 || len(r.Data()) != 0 || r.Body["has_more"] != false {
		t.Errorf("history with a stranger: %d %s", r.Status, r.Raw)
	}
	// "+" typed unencoded in a query (curl by hand) decodes as a space; a
	// handle parameter still finds the line and the contact.
	// (Fetch, unlike call, sends the URL as it is.)
	resp, _ := apitest.Client{TB: t}.Fetch("GET", e.base+"/v1/messages?from="+mainLine+"&to="+alice, "Authorization", "Bearer "+key)
	if resp.StatusCode != 200 {
		t.Errorf("unencoded + in the query: %d", resp.StatusCode)
	}
	// A chat cursor is not a message cursor.
	e.inbound(mainLine, bob, "hi")
	chats := e.call("GET", "/v1/chats?from="+mainLine+"&limit=1", key, nil)
	cursor, _ := chats.Body["next_cursor"].(string)
	if cursor == "" {
		t.Fatalf("no cursor with two chats and limit 1: %s", chats.Raw)
	}
	if r := e.call("GET", "/v1/messages?from="+mainLine+"&to="+alice+"&cursor="+cursor, key, nil); r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != "cursor" {
		t.Errorf("chat cursor on messages: %d %s", r.Status, r.Raw)
	}
}

func TestRoutesMethodsAndCORS(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	if r := e.call("GET", "/v1/nothing", key, nil); r.Status != 404 || r.ErrCode() != "route_not_found" || r.ErrType() != "not_found_error" {
		t.Errorf("unknown route: %d %s", r.Status, r.Raw)
	}
	if r := e.call("GET", "/v1/lines/", key, nil); r.Status != 404 || r.ErrCode() != "route_not_found" {
		t.Errorf("trailing slash: %d %s", r.Status, r.Raw)
	}
	if r := e.call("PUT", "/v1/messages", key, nil); r.Status != 405 || r.ErrCode() != "method_not_allowed" || !strings.Contains(r.Header.Get("Allow"), "POST") {
		t.Errorf("wrong method: %d %s %v", r.Status, r.Raw, r.Header)
	}
	resp, _ := apitest.Client{TB: t}.Fetch("OPTIONS", e.base+"/v1/messages", "Origin", "https://app.example.com",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "*" ||
		h.Get("Access-Control-Allow-Methods") != "GET, POST, DELETE, OPTIONS" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, h)
	}
	if r := e.call("GET", "/v1/lines", key, nil); r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("no CORS header on a GET: %v", r.Header)
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
	if r.Status != 429 || r.ErrCode() != "sandbox_quota_exceeded" || r.ErrType() != "rate_limit_error" {
		t.Fatalf("sixth send: %d %s", r.Status, r.Raw)
	}
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
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
		if r := e.call("GET", "/v1/lines", key, nil); r.Status != 200 {
			t.Fatalf("within the limit: %d %s", r.Status, r.Raw)
		}
	}
	r := e.call("GET", "/v1/lines", key, nil)
	if r.Status != 429 || r.ErrCode() != "rate_limit_exceeded" {
		t.Fatalf("over the limit: %d %s", r.Status, r.Raw)
	}
	// 3 per hour: the next token comes in 20 minutes.
	if ra := r.Header.Get("Retry-After"); ra != "1200" {
		t.Fatalf("Retry-After %q, want 1200", ra)
	}
	if r := e.call("GET", "/v1/lines", other, nil); r.Status != 200 {
		t.Fatalf("another key is limited too: %d", r.Status)
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
		if c.r.Status != c.status || c.r.ErrCode() != c.code {
			t.Errorf("%s: %d %s; want %d %s", c.what, c.r.Status, c.r.Raw, c.status, c.code)
		}
		apitest.CheckErrorType(t, c.what, c.r)
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
		{"no scope, bad body", readOnly, apitest.WithFields(ok, "type", "wink"), 403, "insufficient_scope", ""},
		{"malformed json", key, `{"from":`, 400, "invalid_json", ""},
		{"missing from", key, apitest.WithFields(ok, "from", nil), 400, "missing_required_parameter", "from"},
		{"missing to", key, apitest.WithFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"missing message_id", key, apitest.WithFields(ok, "message_id", nil), 400, "missing_required_parameter", "message_id"},
		{"missing type", key, apitest.WithFields(ok, "type", nil), 400, "missing_required_parameter", "type"},
		{"blank type", key, apitest.WithFields(ok, "type", " "), 400, "missing_required_parameter", "type"},
		{"unknown type", key, apitest.WithFields(ok, "type", "wink"), 400, "invalid_parameter_value", "type"},
		{"upper-case type", key, apitest.WithFields(ok, "type", "LOVE"), 400, "invalid_parameter_value", "type"},
		{"type not a string", key, apitest.WithFields(ok, "type", 2000), 400, "invalid_parameter_value", "type"},
		{"remove not a bool", key, apitest.WithFields(ok, "remove", "yes"), 400, "invalid_parameter_value", "remove"},
		{"bad type on an unknown line", key, apitest.WithFields(ok, "type", "wink", "from", "+15559999999"), 400, "invalid_parameter_value", "type"},
		{"unknown line", key, apitest.WithFields(ok, "from", "+15559999999"), 404, "line_not_found", "from"},
		{"line of another key", onlyPlain, ok, 403, "line_not_accessible", ""},
		{"access before advanced features", onlyMain, apitest.WithFields(ok, "from", plainLine, "message_id", plain.ID), 403, "line_not_accessible", ""},
		{"no advanced features", key, apitest.WithFields(ok, "from", plainLine, "message_id", plain.ID), 400, "advanced_features_required", "from"},
		{"SMS line", key, apitest.WithFields(ok, "from", smsLine), 400, "advanced_features_required", "from"},
		{"advanced features before recipient", key, apitest.WithFields(ok, "from", plainLine, "to", carol), 400, "advanced_features_required", "from"},
		{"contact never wrote", key, apitest.WithFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"recipient before message", key, apitest.WithFields(ok, "to", carol, "message_id", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 403, "contact_has_not_messaged", "to"},
		{"unknown chat", key, apitest.WithFields(ok, "to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
		{"unknown message ID", key, apitest.WithFields(ok, "message_id", "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "message_not_found", "message_id"},
		{"unknown GUID", key, apitest.WithFields(ok, "message_id", "0000-NO-SUCH-GUID"), 404, "message_not_found", "message_id"},
		{"a message ID of another shape naming nothing", key, apitest.WithFields(ok, "message_id", "msg_1"), 404, "message_not_found", "message_id"},
		{"malformed message ID", key, apitest.WithFields(ok, "message_id", "msg_!"), 400, "invalid_parameter_value", "message_id"},
		{"message of another line", key, apitest.WithFields(ok, "message_id", plain.ID), 404, "message_not_found", "message_id"},
		{"message of another chat", key, apitest.WithFields(ok, "message_id", bobs.ID), 400, "invalid_parameter_value", "message_id"},
		{"message of another chat, by GUID", key, apitest.WithFields(ok, "message_id", bobs.GUID), 400, "invalid_parameter_value", "message_id"},
	}
	for _, c := range cases {
		r := e.call("POST", "/v1/reactions", c.key, c.body)
		if r.Status != c.status || r.ErrCode() != c.code || c.param != "" && r.ErrParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param, r.Raw)
		}
		apitest.CheckErrorType(t, c.name, r)
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
		if r.Status != c.status || r.ErrCode() != c.code || c.status != 403 && r.ErrParam() != "message_id" {
			t.Errorf("GET %s: %d %s", c.name, r.Status, r.Raw)
		}
	}
	// Reading works on a line without advanced features: contacts react there too.
	if r := e.call("GET", "/v1/reactions?message_id="+plain.ID, onlyPlain, nil); r.Status != 200 || len(r.Data()) != 0 || r.Body["has_more"] != false {
		t.Fatalf("reactions before any: %d %s", r.Status, r.Raw)
	}
}

// The rate limit is checked before the scope.
func TestRateLimitBeforeScope(t *testing.T) {
	opts := defaultOptions()
	opts.RequestsPerHour = 1
	e := newAPI(t, opts)
	noScope := e.key(keyOpts{Scopes: []string{"messages:read"}})
	body := map[string]any{"from": mainLine, "to": alice, "message_id": "msg_aaaaaaaaaaaaaaaaaaaaaaaaaa", "type": "like"}
	if r := e.call("POST", "/v1/reactions", noScope, body); r.Status != 403 || r.ErrCode() != "insufficient_scope" {
		t.Fatalf("first request: %d %s", r.Status, r.Raw)
	}
	if r := e.call("POST", "/v1/reactions", noScope, body); r.Status != 429 || r.ErrCode() != "rate_limit_exceeded" {
		t.Fatalf("second request: %d %s", r.Status, r.Raw)
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
		if r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Raw)
		}
	}
	if r := e.call("POST", "/v1/webhooks", key, bad[11].body); !strings.Contains(r.Body["error"].(map[string]any)["message"].(string), "169.254.169.254 is not a public address") {
		t.Errorf("the refusal does not say why: %s", r.Raw)
	}

	// A public address is accepted. (No event happens on this line, so
	// nothing is ever sent to it.)
	created := e.call("POST", "/v1/webhooks", key, map[string]any{"from": plainLine, "url": "https://93.184.215.14/hook",
		"events": []string{"message.received", "message.received", "reaction.added"}})
	if created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Raw)
	}
	id, secret := created.Body["id"].(string), created.Body["secret"].(string)
	plain := e.lines[plainLine]
	if !strings.HasPrefix(id, "wh_") || !strings.HasPrefix(secret, "whsec_") || len(secret) < 40 || created.Body["is_active"] != true ||
		created.Body["request_id"] == nil || len(created.Body["events"].([]any)) != 2 || created.Body["line_ids"].([]any)[0] != plain.ID {
		t.Fatalf("created %s", created.Raw)
	}

	list := e.call("GET", "/v1/webhooks?from="+plainLine, key, nil)
	if items := list.Data(); len(items) != 1 || items[0]["secret"] != secret || list.Body["has_more"] != false {
		t.Fatalf("list: %s", list.Raw)
	}
	if items := e.call("GET", "/v1/webhooks?from="+mainLine, key, nil).Data(); len(items) != 0 {
		t.Errorf("another line lists %v", items)
	}

	// Keys limited to other lines, or without the scopes, are refused.
	other := e.key(keyOpts{Lines: []string{mainLine}})
	if r := e.call("GET", "/v1/webhooks?from="+plainLine, other, nil); r.ErrCode() != "line_not_accessible" {
		t.Errorf("restricted list: %d %s", r.Status, r.Raw)
	}
	if r := e.call("DELETE", "/v1/webhooks", other, map[string]any{"id": id}); r.Status != 404 || r.ErrCode() != "webhook_not_found" {
		t.Errorf("restricted delete: %d %s", r.Status, r.Raw)
	}
	readOnly := e.key(keyOpts{Scopes: []string{"webhooks:read"}})
	if r := e.call("POST", "/v1/webhooks", readOnly, created.Body); r.ErrCode() != "insufficient_scope" {
		t.Errorf("create without webhooks:write: %d %s", r.Status, r.Raw)
	}

	del := e.call("DELETE", "/v1/webhooks", key, map[string]any{"id": id})
	if del.Status != 200 || del.Body["id"] != id || del.Body["deleted"] != true || del.Body["request_id"] == nil {
		t.Fatalf("delete: %d %s", del.Status, del.Raw)
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
		if r := e.call("DELETE", "/v1/webhooks", key, c.body); r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("delete %v: %d %s", c.body, r.Status, r.Raw)
		}
	}
	if items := e.call("GET", "/v1/webhooks?from="+plainLine, key, nil).Data(); len(items) != 0 {
		t.Errorf("deleted webhook still listed: %v", items)
	}
}

// An empty from (the reference CLI's `webhooks create` without --line)
// registers one webhook for every line the key may use; it is listed
// under each, and seen only by keys that may use them all.
func TestWebhookForEveryLine(t *testing.T) {
	e := newAPI(t, defaultOptions())
	body := map[string]any{"from": "", "url": "https://93.184.215.14/hook", "events": []string{"message.received"}}
	two := e.key(keyOpts{Lines: []string{mainLine, plainLine}})
	created := e.call("POST", "/v1/webhooks", two, body)
	if created.Status != 201 {
		t.Fatalf("create: %d %s", created.Status, created.Raw)
	}
	want := []any{e.lines[mainLine].ID, e.lines[plainLine].ID}
	if got := created.Body["line_ids"].([]any); !slices.Equal(got, want) {
		t.Fatalf("line_ids %v, want %v", got, want)
	}
	id := created.Body["id"]
	for _, l := range []string{mainLine, plainLine} {
		if items := e.call("GET", "/v1/webhooks?from="+l, two, nil).Data(); len(items) != 1 || items[0]["id"] != id {
			t.Errorf("list of %s: %v", l, items)
		}
	}
	if items := e.call("GET", "/v1/webhooks?from="+smsLine, e.key(keyOpts{}), nil).Data(); len(items) != 0 {
		t.Errorf("a line it does not cover lists %v", items)
	}
	// A key that may use only one of its lines neither sees nor deletes it.
	one := e.key(keyOpts{Lines: []string{mainLine}})
	if items := e.call("GET", "/v1/webhooks?from="+mainLine, one, nil).Data(); len(items) != 0 {
		t.Errorf("a key of one of its lines lists %v", items)
	}
	if r := e.call("DELETE", "/v1/webhooks", one, map[string]any{"id": id}); r.Status != 404 || r.ErrCode() != "webhook_not_found" {
		t.Errorf("delete with a key of one of its lines: %d %s", r.Status, r.Raw)
	}

	// An owner's key without line limits: every line, the sandbox included.
	owned := e.call("POST", "/v1/webhooks", e.key(keyOpts{Owner: "ann"}), body)
	if got := owned.Body["line_ids"].([]any); owned.Status != 201 || len(got) != len(e.lines) {
		t.Fatalf("an owner's key: %d %s", owned.Status, owned.Raw)
	}

	// Absent, from is still required; empty, it names no line where one is
	// needed.
	for _, c := range []struct {
		name   string
		method string
		path   string
		body   any
		code   string
	}{
		{"register without from", "POST", "/v1/webhooks", apitest.WithFields(body, "from", nil), "missing_required_parameter"},
		{"list with an empty from", "GET", "/v1/webhooks?from=", nil, "missing_required_parameter"},
		{"send with an empty from", "POST", "/v1/messages", map[string]any{"from": "", "to": alice, "text": "hi"}, "missing_required_parameter"},
	} {
		r := e.call(c.method, c.path, two, c.body)
		if r.Status != 400 || r.ErrCode() != c.code || r.ErrParam() != "from" {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Raw)
		}
	}
	if r := e.call("DELETE", "/v1/webhooks", two, map[string]any{"id": id}); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Raw)
	}
	for _, l := range []string{mainLine, plainLine} {
		if items := e.call("GET", "/v1/webhooks?from="+l, two, nil).Data(); len(items) != 0 {
			t.Errorf("deleted, still listed on %s: %v", l, items)
		}
	}

	// A line no longer served leaves the webhook in reach of its others.
	kept := e.call("POST", "/v1/webhooks", two, body).Body["id"]
	var served []storage.Line
	for _, l := range e.lines {
		if l.Handle != plainLine {
			served = append(served, l)
		}
	}
	if _, err := e.db.SyncLines(context.Background(), served); err != nil {
		t.Fatal(err)
	}
	if items := e.call("GET", "/v1/webhooks?from="+mainLine, two, nil).Data(); len(items) != 1 || items[0]["id"] != kept {
		t.Errorf("with %s gone, %s lists %v", plainLine, mainLine, items)
	}
	if r := e.call("DELETE", "/v1/webhooks", two, map[string]any{"id": kept}); r.Status != 200 {
		t.Errorf("delete with %s gone: %d %s", plainLine, r.Status, r.Raw)
	}
}
