package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
)

// POST /v1/typing and /v1/receipts queue an outbox item or say what is
// wrong; their GETs list a chat's indicators and receipts.
func TestTypingAndReceipts(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	in := e.inbound(mainLine, alice, "hi")
	e.inbound(plainLine, alice, "hi")
	ok := map[string]any{"from": mainLine, "to": alice}
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
		param      string
	}{
		{"typing, malformed json", "/v1/typing", `{"from":`, 400, "invalid_json", ""},
		{"typing, missing from", "/v1/typing", withFields(ok, "from", nil), 400, "missing_required_parameter", "from"},
		{"typing, missing to", "/v1/typing", withFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"typing, unknown state", "/v1/typing", withFields(ok, "state", "maybe"), 400, "invalid_parameter_value", "state"},
		{"typing, state not a string", "/v1/typing", withFields(ok, "state", true), 400, "invalid_parameter_value", "state"},
		{"typing, no advanced features", "/v1/typing", withFields(ok, "from", plainLine), 400, "advanced_features_required", "from"},
		{"typing, contact never wrote", "/v1/typing", withFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"receipt, missing to", "/v1/receipts", withFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"receipt, unknown line", "/v1/receipts", withFields(ok, "from", "+15559999999"), 404, "line_not_found", "from"},
		{"receipt, SMS line", "/v1/receipts", withFields(ok, "from", smsLine), 400, "advanced_features_required", "from"},
		{"receipt, unknown chat", "/v1/receipts", withFields(ok, "to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
	} {
		r := e.call("POST", c.path, key, c.body)
		if r.status != c.status || r.errCode() != c.code || r.errParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.status, r.errCode(), r.errParam(), c.status, c.code, c.param, r.raw)
		}
		checkErrorType(t, c.name, r)
	}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/typing", ok},
		{"/v1/typing", withFields(ok, "state", "off", "to", in.ChatID)},
		{"/v1/receipts", ok},
	} {
		r := e.call("POST", c.path, key, c.body)
		if id, _ := r.body["id"].(string); r.status != 201 || r.body["status"] != "pending" || !strings.HasPrefix(id, "obx_") {
			t.Errorf("POST %s %v: %d %s", c.path, c.body, r.status, r.raw)
		}
	}

	// Reads: a contact's indicator once it types; nothing for a stranger.
	if _, err := e.recv.RecordTyping(context.Background(), bridge.InboundTyping{Line: mainLine,
		Chat: sim.OneToOne("imessage", alice), Sender: alice, On: true, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r := e.call("GET", "/v1/typing?from="+mainLine+"&to="+alice, key, nil)
	var typing bool
	for _, ind := range r.data() {
		if ind["handle"] == alice && ind["chat_id"] == in.ChatID {
			typing, _ = ind["is_typing"].(bool)
		}
	}
	if r.status != 200 || !typing || r.body["has_more"] != false {
		t.Errorf("typing of alice: %d %s", r.status, r.raw)
	}
	for _, path := range []string{"/v1/typing", "/v1/receipts"} {
		if r := e.call("GET", path+"?from="+mainLine+"&to="+carol, key, nil); r.status != 200 || len(r.data()) != 0 {
			t.Errorf("GET %s with a stranger: %d %s", path, r.status, r.raw)
		}
		if r := e.call("GET", path+"?from="+mainLine, key, nil); r.status != 400 || r.errCode() != "missing_required_parameter" || r.errParam() != "to" {
			t.Errorf("GET %s without to: %d %s", path, r.status, r.raw)
		}
		if r := e.call("GET", path+"?to="+alice, key, nil); r.status != 400 || r.errParam() != "from" {
			t.Errorf("GET %s without from: %d %s", path, r.status, r.raw)
		}
	}
	if r := e.call("GET", "/v1/receipts?from="+mainLine+"&to="+alice, key, nil); r.status != 200 || r.body["has_more"] != false {
		t.Errorf("receipts: %d %s", r.status, r.raw)
	}
}
