package server_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
)

// A contact who texts STOP is refused every write but an unsend until it
// texts START; a keyword inside a longer message is no keyword.
func TestOptOutAPI(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	m := e.inbound(mainLine, alice, "hello")
	e.inbound(mainLine, bob, "hello")
	e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "hi"})

	e.inbound(mainLine, alice, "please stop writing") // not a keyword
	e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "still allowed"})

	e.inbound(mainLine, alice, " Arrêt ")
	for _, w := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "hi"}},
		{"/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": m.ID, "type": "love"}},
		{"/v1/typing", map[string]any{"from": mainLine, "to": alice, "state": "on"}},
		{"/v1/groups", map[string]any{"from": mainLine, "participants": []string{alice, bob}, "text": "hi"}},
	} {
		r := e.call("POST", w.path, key, w.body)
		if r.Status != 403 || r.ErrCode() != "contact_opted_out" || !strings.Contains(string(r.Raw), alice) {
			t.Errorf("POST %s to an opted-out contact: %d %s", w.path, r.Status, r.Raw)
		}
		apitest.CheckErrorType(t, w.path, r)
	}
	// Listed, with the word it wrote; the sandbox's opt-outs are not.
	if r := e.call("GET", "/v1/contacts/opted-out?from="+mainLine, key, nil); r.Status != 200 || len(r.Data()) != 1 ||
		r.Data()[0]["handle"] != alice || r.Data()[0]["word"] != "Arrêt" || r.Data()[0]["line_id"] != e.lines[mainLine].ID || r.Data()[0]["opted_out_at"] == 0.0 {
		t.Errorf("opted-out list: %d %s", r.Status, r.Raw)
	}
	for _, c := range []struct {
		r     response
		code  string
		param string
	}{
		{e.call("GET", "/v1/contacts/opted-out?from="+sandboxLine, e.key(keyOpts{Owner: "acme"}), nil), "invalid_parameter_value", "from"},
		{e.call("GET", "/v1/contacts/opted-out?from="+mainLine+"&cursor=Yg", key, nil), "invalid_parameter_value", "cursor"},
		{e.call("GET", "/v1/contacts/opted-out", key, nil), "missing_required_parameter", "from"},
	} {
		if c.r.Status != 400 || c.r.ErrCode() != c.code || c.r.ErrParam() != c.param {
			t.Errorf("want 400 %s (%s): %d %s", c.code, c.param, c.r.Status, c.r.Raw)
		}
	}
	if r := e.call("GET", "/v1/contacts/opted-out?from="+mainLine, e.key(keyOpts{Scopes: []string{"messages:read"}}), nil); r.Status != 403 {
		t.Errorf("opted-out list without chats:read: %d %s", r.Status, r.Raw)
	}
	// The other line is not the one it opted out of.
	e.inbound(smsLine, alice, "hello")
	e.send(key, map[string]any{"from": smsLine, "to": alice, "text": "hi"})

	e.inbound(mainLine, alice, "start")
	e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "welcome back"})
	if r := e.call("GET", "/v1/contacts/opted-out?from="+mainLine, key, nil); r.Status != 200 || len(r.Data()) != 0 {
		t.Errorf("opted-out list after opting in: %d %s", r.Status, r.Raw)
	}
}

// A blocked contact's typing is not listed; once unblocked, it is.
func TestBlockedTyping(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hello")
	e.call("POST", "/v1/contacts/blocked", key, map[string]any{"from": mainLine, "handle": alice})
	if _, err := e.recv.RecordTyping(context.Background(), bridge.InboundTyping{Line: mainLine, Chat: sim.OneToOne("imessage", alice), Sender: alice, On: true}); err != nil {
		t.Fatal(err)
	}
	typing := "/v1/typing?from=" + url.QueryEscape(mainLine) + "&to=" + url.QueryEscape(alice)
	if r := e.call("GET", typing, key, nil); r.Status != 200 || len(r.Data()) != 0 {
		t.Errorf("a blocked contact's typing: %d %s", r.Status, r.Raw)
	}
	e.call("DELETE", "/v1/contacts/blocked/"+alice+"?from="+mainLine, key, nil)
	if r := e.call("GET", typing, key, nil); r.Status != 200 || len(r.Data()) != 1 || r.Data()[0]["handle"] != alice {
		t.Errorf("typing after unblocking: %d %s", r.Status, r.Raw)
	}
}

// The blocked list: add, list in pages, CSV out and in, remove; writes to
// a blocked contact are refused.
func TestBlockedContactsAPI(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hello")

	add := func(h string) apitest.Response {
		return e.call("POST", "/v1/contacts/blocked", key, map[string]any{"from": mainLine, "handle": h})
	}
	if r := add("+1 (555) 111-0001"); r.Status != 201 || r.Body["handle"] != alice || r.Body["line_id"] != e.lines[mainLine].ID {
		t.Fatalf("block: %d %s", r.Status, r.Raw)
	}
	if r := add(alice); r.Status != 200 || r.Body["handle"] != alice {
		t.Errorf("block again: %d %s", r.Status, r.Raw)
	}
	add(carol)
	r := e.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "text": "hi"})
	if r.Status != 403 || r.ErrCode() != "contact_blocked" {
		t.Errorf("send to a blocked contact: %d %s", r.Status, r.Raw)
	}

	// Bad input, each with its parameter.
	for _, c := range []struct {
		r     apitest.Response
		code  string
		param string
	}{
		{add("not a handle"), "invalid_parameter_value", "handle"},
		{e.call("POST", "/v1/contacts/blocked", key, map[string]any{"from": mainLine}), "missing_required_parameter", "handle"},
		{e.call("POST", "/v1/contacts/blocked", e.key(keyOpts{Owner: "acme"}), map[string]any{"from": sandboxLine, "handle": alice}), "invalid_parameter_value", "from"},
		{e.call("GET", "/v1/contacts/blocked?from="+mainLine+"&cursor=nope", key, nil), "invalid_parameter_value", "cursor"},
		{e.call("GET", "/v1/contacts/blocked", key, nil), "missing_required_parameter", "from"},
	} {
		if c.r.Status != 400 || c.r.ErrCode() != c.code || c.r.ErrParam() != c.param {
			t.Errorf("want 400 %s (%s): %d %s", c.code, c.param, c.r.Status, c.r.Raw)
		}
	}

	// Pages of one, in handle order.
	var got []string
	for cursor := ""; ; {
		r := e.call("GET", "/v1/contacts/blocked?from="+mainLine+"&limit=1&cursor="+cursor, key, nil)
		for _, bc := range r.Data() {
			got = append(got, bc["handle"].(string))
		}
		next, _ := r.Body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(got, " ") != alice+" "+carol {
		t.Errorf("pages: %q", got)
	}

	// CSV out, by its path and by Accept.
	want := "handle\n" + alice + "\n" + carol + "\n"
	for _, req := range [][]string{{"/v1/contacts/blocked.csv?from=%2B15550000001"}, {"/v1/contacts/blocked?from=%2B15550000001", "Accept", "text/csv"}} {
		resp, body := apitest.Client{TB: t}.Fetch("GET", e.base+req[0], append([]string{"Authorization", "Bearer " + key}, req[1:]...)...)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") || string(body) != want {
			t.Errorf("GET %s: %d %s %q", req[0], resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}

	// CSV in: the header's handle column, normalised, each once; bad rows
	// reported by number.
	csv := "name,handle\nBob,+1 555 111 0002\nAlice,+15551110001\nNobody,12\nBob again,+15551110002\nEmpty,\n"
	r = e.call("POST", "/v1/contacts/blocked.csv?from="+mainLine, key, csv, "Content-Type", "text/csv")
	if r.Status != 200 || r.Body["added"] != 1.0 || r.Body["blocked"] != 2.0 {
		t.Fatalf("import: %d %s", r.Status, r.Raw)
	}
	rejected, _ := r.Body["rejected"].([]any)
	if len(rejected) != 2 || rejected[0].(map[string]any)["row"] != 4.0 || rejected[0].(map[string]any)["value"] != "12" ||
		rejected[1].(map[string]any)["row"] != 6.0 {
		t.Errorf("rejected: %v", rejected)
	}
	if r := e.call("POST", "/v1/contacts/blocked.csv?from="+mainLine, key, "handle\n\"unterminated\n", "Content-Type", "text/csv"); r.Status != 400 || r.ErrCode() != "invalid_csv" {
		t.Errorf("import of a broken file: %d %s", r.Status, r.Raw)
	}
	if r := e.call("POST", "/v1/contacts/blocked.csv?from="+mainLine, key, "handle\n"+bob+"\n"); r.Status != 400 || r.ErrCode() != "invalid_csv" {
		t.Errorf("import as JSON: %d %s", r.Status, r.Raw)
	}
	if r := e.call("GET", "/v1/contacts/blocked?from="+mainLine, key, nil); len(r.Data()) != 3 {
		t.Errorf("after the import: %s", r.Raw)
	}

	// Remove.
	if r := e.call("DELETE", "/v1/contacts/blocked/"+alice+"?from="+mainLine, key, nil); r.Status != 200 || r.Body["deleted"] != true || r.Body["handle"] != alice {
		t.Errorf("unblock: %d %s", r.Status, r.Raw)
	}
	if r := e.call("DELETE", "/v1/contacts/blocked/"+alice+"?from="+mainLine, key, nil); r.Status != 404 || r.ErrCode() != "contact_not_blocked" {
		t.Errorf("unblock again: %d %s", r.Status, r.Raw)
	}
	e.send(key, map[string]any{"from": mainLine, "to": alice, "text": "hi again"})

	// Scopes: reading needs chats:read, changing messages:write.
	reader := e.key(keyOpts{Scopes: []string{"chats:read"}})
	if r := e.call("GET", "/v1/contacts/blocked?from="+mainLine, reader, nil); r.Status != 200 {
		t.Errorf("list with chats:read: %d %s", r.Status, r.Raw)
	}
	if r := e.call("POST", "/v1/contacts/blocked", reader, map[string]any{"from": mainLine, "handle": bob}); r.Status != 403 || r.ErrCode() != "insufficient_scope" {
		t.Errorf("block with chats:read: %d %s", r.Status, r.Raw)
	}
}
