package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
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
		{"typing, missing from", "/v1/typing", apitest.WithFields(ok, "from", nil), 400, "missing_required_parameter", "from"},
		{"typing, missing to", "/v1/typing", apitest.WithFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"typing, unknown state", "/v1/typing", apitest.WithFields(ok, "state", "maybe"), 400, "invalid_parameter_value", "state"},
		{"typing, state not a string", "/v1/typing", apitest.WithFields(ok, "state", true), 400, "invalid_parameter_value", "state"},
		{"typing, no advanced features", "/v1/typing", apitest.WithFields(ok, "from", plainLine), 400, "advanced_features_required", "from"},
		{"typing, contact never wrote", "/v1/typing", apitest.WithFields(ok, "to", carol), 403, "contact_has_not_messaged", "to"},
		{"receipt, missing to", "/v1/receipts", apitest.WithFields(ok, "to", nil), 400, "missing_required_parameter", "to"},
		{"receipt, unknown line", "/v1/receipts", apitest.WithFields(ok, "from", "+15559999999"), 404, "line_not_found", "from"},
		{"receipt, SMS line", "/v1/receipts", apitest.WithFields(ok, "from", smsLine), 400, "advanced_features_required", "from"},
		{"receipt, unknown chat", "/v1/receipts", apitest.WithFields(ok, "to", "cht_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 404, "chat_not_found", "to"},
	} {
		r := e.call("POST", c.path, key, c.body)
		if r.Status != c.status || r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("%s: got %d %s param %q, want %d %s param %q: %s", c.name, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param, r.Raw)
		}
		apitest.CheckErrorType(t, c.name, r)
	}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/typing", ok},
		{"/v1/typing", apitest.WithFields(ok, "state", "off", "to", in.ChatID)},
		{"/v1/receipts", ok},
	} {
		r := e.call("POST", c.path, key, c.body)
		if id, _ := r.Body["id"].(string); r.Status != 201 || r.Body["status"] != "pending" || !strings.HasPrefix(id, "obx_") {
			t.Errorf("POST %s %v: %d %s", c.path, c.body, r.Status, r.Raw)
		}
	}

	// Reads: a contact's indicator once it types; nothing for a stranger.
	if _, err := e.recv.RecordTyping(context.Background(), bridge.InboundTyping{Line: mainLine,
		Chat: sim.OneToOne("imessage", alice), Sender: alice, On: true, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r := e.call("GET", "/v1/typing?from="+mainLine+"&to="+alice, key, nil)
	var typing bool
	for _, ind := range r.Data() {
		if ind["handle"] == alice && ind["chat_id"] == in.ChatID {
			typing, _ = ind["is_typing"].(bool)
		}
	}
	if r.Status != 200 || !typing || r.Body["has_more"] != false {
		t.Errorf("typing of alice: %d %s", r.Status, r.Raw)
	}
	for _, path := range []string{"/v1/typing", "/v1/receipts"} {
		if r := e.call("GET", path+"?from="+mainLine+"&to="+carol, key, nil); r.Status != 200 || len(r.Data()) != 0 {
			t.Errorf("GET %s with a stranger: %d %s", path, r.Status, r.Raw)
		}
		if r := e.call("GET", path+"?from="+mainLine, key, nil); r.Status != 400 || r.ErrCode() != "missing_required_parameter" || r.ErrParam() != "to" {
			t.Errorf("GET %s without to: %d %s", path, r.Status, r.Raw)
		}
		if r := e.call("GET", path+"?to="+alice, key, nil); r.Status != 400 || r.ErrParam() != "from" {
			t.Errorf("GET %s without from: %d %s", path, r.Status, r.Raw)
		}
	}
	if r := e.call("GET", "/v1/receipts?from="+mainLine+"&to="+alice, key, nil); r.Status != 200 || r.Body["has_more"] != false {
		t.Errorf("receipts: %d %s", r.Status, r.Raw)
	}
}
