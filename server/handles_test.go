package server_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/apitest"
)

// A handle that hides characters, reorders what is shown, holds controls or
// is not UTF-8 is refused wherever the API takes one: 400
// invalid_parameter_value naming the parameter, what is wrong and the
// forms a handle takes. A contact-first send would otherwise open a chat
// with a handle that looks like another's.
func TestHandlesRefused(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	bad := []struct{ name, handle, why string }{
		{"zero-width space", "ja\u200bne@example.com", "U+200B, an invisible character"},
		{"zero-width space in a number", "+1555\u200b0102000", "U+200B, an invisible character"},
		{"bidi override", "\u202emoc.elpmaxe@enaj", "U+202E, a bidirectional control"},
		{"C1 control", "jane\u009b@example.com", "U+009B, a control character"},
		{"bare CR", "jane\r@example.com", "U+000D, a control character"},
		{"mixed scripts", "jane@pаypal.com", "mixes scripts"},
		{"non-ASCII digits", "+١٥٥٥٠١٠٢٠٠٠", "U+0661, a digit other than 0 to 9"},
	}
	check := func(t *testing.T, what string, r response, param, why string) {
		t.Helper()
		msg, _ := r.Body["error"].(map[string]any)["message"].(string)
		if r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != param ||
			!strings.Contains(msg, why) || !strings.Contains(msg, "E.164") || !strings.Contains(msg, "e-mail address") {
			t.Errorf("%s: %d %s; want 400 invalid_parameter_value, param %s, saying %q and the forms", what, r.Status, r.Raw, param, why)
		}
		apitest.CheckErrorType(t, what, r)
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			send := e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": c.handle, "text": "hi"})
			check(t, "POST /v1/messages to", send, "to", c.why)
			from := e.call("POST", "/v1/messages", key, map[string]any{"from": c.handle, "to": alice, "text": "hi"})
			check(t, "POST /v1/messages from", from, "from", c.why)
			group := e.call("POST", "/v1/groups", key, map[string]any{"from": mainLine, "participants": []string{alice, c.handle}, "text": "hi"})
			check(t, "POST /v1/groups", group, "participants", c.why)
			list := e.call("GET", "/v1/messages?from="+url.PathEscape(mainLine)+"&to="+url.PathEscape(c.handle), key, nil)
			check(t, "GET /v1/messages", list, "to", c.why)
		})
	}
	// Invalid UTF-8 cannot be in a JSON body (that is invalid_json): a
	// query string can carry it.
	r := e.call("GET", "/v1/messages?from="+url.PathEscape(mainLine)+"&to=jane%FF%FE@example.com", key, nil)
	check(t, "GET /v1/messages, to not UTF-8", r, "to", "not valid UTF-8")
	if msg := r.Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `"jane\xff\xfe@example.com"`) {
		t.Errorf("the value is not quoted with escapes: %q", msg)
	}

	// Handles in their every form name the same contact.
	for contact, to := range map[string]string{"+15550102000": "+1 (555) 010-2000", "jane.doe@example.com": "Jane.Doe@Example.com", "anna@bücher.de": "anna@xn--bcher-kva.de"} {
		e.inbound(mainLine, contact, "hi")
		if r := e.call("GET", "/v1/messages?from="+url.PathEscape(mainLine)+"&to="+url.PathEscape(to), key, nil); r.Status != 200 || len(r.Data()) != 1 {
			t.Errorf("GET /v1/messages to %q: %d %s", to, r.Status, r.Raw)
		}
	}
}

// A number without a + is a short code, which a line may answer once it
// has written: one that never wrote is a phone number without its country
// code ("555-1234"), refused at once with the forms a handle takes rather
// than later by the contact-first rule, wherever a contact comes in.
func TestLocalNumberRefused(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	const service = "56249"
	e.inbound(mainLine, service, "Your code is 123456")
	e.inbound(mainLine, alice, "hi")
	e.inbound(mainLine, bob, "hi")
	check := func(what string, r response, param string) {
		t.Helper()
		msg, _ := r.Body["error"].(map[string]any)["message"].(string)
		if r.Status != 400 || r.ErrCode() != "invalid_parameter_value" || r.ErrParam() != param ||
			!strings.Contains(msg, "short code 5551234, which has not written to line "+mainLine) ||
			!strings.Contains(msg, "a phone number needs a + and its country code") || !strings.Contains(msg, "E.164") {
			t.Errorf("%s: %d %s; want 400 invalid_parameter_value, param %s, naming the expected forms", what, r.Status, r.Raw, param)
		}
		apitest.CheckErrorType(t, what, r)
	}
	check("POST /v1/messages", e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": "555-1234", "text": "hi"}), "to")
	check("GET /v1/messages", e.call("GET", "/v1/messages?from="+url.PathEscape(mainLine)+"&to=555-1234", key, nil), "to")
	check("GET /v1/availability", e.call("GET", "/v1/availability?from="+url.QueryEscape(mainLine)+"&handle=555-1234", key, nil), "handle")
	check("POST /v1/groups", e.call("POST", "/v1/groups", key, map[string]any{"from": mainLine, "participants": []string{alice, "555 1234"}, "text": "hi"}), "participants")

	// The short code that wrote is a contact like any other.
	if r := e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": service, "text": "STOP"}); r.Status != 201 {
		t.Errorf("an answer to a short code that wrote: %d %s", r.Status, r.Raw)
	}
	// An E.164 number that never wrote is still the contact-first rule's.
	if r := e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": "+15551234567", "text": "hi"}); r.Status != 403 || r.ErrCode() != "contact_has_not_messaged" {
		t.Errorf("an E.164 number that never wrote: %d %s", r.Status, r.Raw)
	}
}
