package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
)

// agentEnv is the API with a clock the test moves forward.
func agentEnv(t *testing.T) (*apiEnv, *atomic.Int64) {
	t.Helper()
	var ahead atomic.Int64 // ms the server's clock runs ahead of time.Now
	opts := defaultOptions()
	opts.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load()) * time.Millisecond) }
	return newAPI(t, opts), &ahead
}

// ownerSends records a message the line's owner sent from another device
// into the one-to-one chat with contact.
func (e *apiEnv) ownerSends(line, contact, text string) {
	e.t.Helper()
	_, err := e.recv.Record(context.Background(), bridge.Inbound{Line: line, Service: "imessage", Chat: sim.OneToOne("imessage", contact),
		GUID: sim.NewGUID(), Sender: line, IsFromMe: true, Text: &text, SentAt: time.Now()})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *apiEnv) wantStatus(r response, status int, code, what string) {
	e.t.Helper()
	if r.Status != status || r.ErrCode() != code {
		e.t.Fatalf("%s: %d %s; want %d %q", what, r.Status, r.Raw, status, code)
	}
}

// The owner writing from their own phone holds agent keys back from the
// chat for the line's quiet window, restarted by each message; other keys
// are never held back; resuming ends it at once, and only a key that is
// not an agent's may resume.
func TestOwnerTakeoverRefusesAgents(t *testing.T) {
	e, ahead := agentEnv(t)
	agent := e.key(keyOpts{Label: "support-bot", Agent: true})
	human := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hello?")
	msg := map[string]any{"from": mainLine, "to": alice, "text": "agent here"}
	e.wantStatus(e.call("POST", "/v1/messages", agent, msg), 201, "", "agent send before the owner wrote")

	e.ownerSends(mainLine, alice, "I'll take this one")
	r := e.call("POST", "/v1/messages", agent, msg)
	e.wantStatus(r, 409, "human_active", "agent send after the owner wrote")
	if !strings.Contains(string(r.Raw), "resumes the agents") || r.ErrParam() != "to" || r.Header.Get("Retry-After") == "" {
		t.Errorf("human_active answer: %s, Retry-After %q", r.Raw, r.Header.Get("Retry-After"))
	}
	e.wantStatus(e.call("POST", "/v1/typing", agent, map[string]any{"from": mainLine, "to": alice}), 409, "human_active", "agent typing")
	e.wantStatus(e.call("POST", "/v1/messages", human, msg), 201, "", "a key that is not an agent's")
	// An agent's write to another chat is not held back.
	e.inbound(mainLine, bob, "hi")
	e.wantStatus(e.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": bob, "text": "x"}), 201, "", "agent send to another chat")

	// The window ends 20 minutes after the owner's last message.
	ahead.Store((19 * time.Minute).Milliseconds())
	e.wantStatus(e.call("POST", "/v1/messages", agent, msg), 409, "human_active", "agent send at 19 minutes")
	ahead.Store((20*time.Minute + time.Second).Milliseconds())
	e.wantStatus(e.call("POST", "/v1/messages", agent, msg), 201, "", "agent send after the window")

	// Resumed by a key that is not an agent's.
	ahead.Store(0)
	e.ownerSends(mainLine, alice, "one more thing")
	resume := map[string]any{"from": mainLine, "to": alice}
	e.wantStatus(e.call("POST", "/v1/chats/resume", agent, resume), 403, "agent_key_forbidden", "an agent resuming itself")
	r = e.call("POST", "/v1/chats/resume", human, resume)
	if r.Status != 200 || r.Body["was_human_active"] != true || r.Body["line_handle"] != mainLine {
		t.Fatalf("resume: %d %s", r.Status, r.Raw)
	}
	e.wantStatus(e.call("POST", "/v1/messages", agent, msg), 201, "", "agent send after resume")
	if r := e.call("POST", "/v1/chats/resume", human, resume); r.Status != 200 || r.Body["was_human_active"] != false {
		t.Fatalf("resume with nothing to resume: %d %s", r.Status, r.Raw)
	}
}

// A lease keeps other agent keys out of a chat, names its holder, renews,
// expires on the clock, and yields to keys that are not agents'.
func TestChatLeaseRefusesOtherAgents(t *testing.T) {
	e, ahead := agentEnv(t)
	triage := e.key(keyOpts{Label: "triage-bot", Agent: true})
	sales := e.key(keyOpts{Label: "sales-bot", Agent: true})
	human := e.key(keyOpts{Label: "operator"})
	e.inbound(mainLine, alice, "hello?")
	lease := map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 60, "label": "answering the refund question"}
	msg := map[string]any{"from": mainLine, "to": alice, "text": "hi"}

	r := e.call("POST", "/v1/chats/lease", triage, lease)
	if r.Status != 200 || r.Body["key_label"] != "triage-bot" || r.Body["status"] != "active" || r.Body["label"] != "answering the refund question" {
		t.Fatalf("lease: %d %s", r.Status, r.Raw)
	}
	created, expires := r.Body["created_at"].(float64), r.Body["expires_at"].(float64)
	r = e.call("POST", "/v1/chats/lease", sales, lease)
	e.wantStatus(r, 409, "chat_leased", "another agent's lease")
	if !strings.Contains(string(r.Raw), "triage-bot") {
		t.Errorf("chat_leased does not name the holder: %s", r.Raw)
	}
	e.wantStatus(e.call("POST", "/v1/messages", sales, msg), 409, "chat_leased", "another agent's send")
	e.wantStatus(e.call("POST", "/v1/messages", triage, msg), 201, "", "the holder's send")
	e.wantStatus(e.call("POST", "/v1/messages", human, msg), 201, "", "a key that is not an agent's")
	e.wantStatus(e.call("DELETE", "/v1/chats/lease?from="+mainLine+"&to="+alice, sales, nil), 409, "chat_leased", "another agent's release")

	// Renewed by its holder: later expiry, same start.
	ahead.Store(30_000)
	r = e.call("POST", "/v1/chats/lease", triage, lease)
	if r.Status != 200 || r.Body["created_at"].(float64) != created || r.Body["expires_at"].(float64) <= expires {
		t.Fatalf("renew: %d %s", r.Status, r.Raw)
	}
	// Expired on the clock, with no release.
	ahead.Store(91_000)
	e.wantStatus(e.call("POST", "/v1/messages", sales, msg), 201, "", "send after the lease expired")
	e.wantStatus(e.call("POST", "/v1/chats/lease", sales, lease), 200, "", "lease after expiry")

	// A key that is not an agent's takes the lease over, then releases it.
	if r := e.call("POST", "/v1/chats/lease", human, lease); r.Status != 200 || r.Body["key_label"] != "operator" {
		t.Fatalf("override: %d %s", r.Status, r.Raw)
	}
	e.wantStatus(e.call("POST", "/v1/messages", sales, msg), 409, "chat_leased", "send while the operator leases")
	if r := e.call("DELETE", "/v1/chats/lease?from="+mainLine+"&to="+alice, human, nil); r.Status != 200 || r.Body["status"] != "released" {
		t.Fatalf("release: %d %s", r.Status, r.Raw)
	}
	e.wantStatus(e.call("DELETE", "/v1/chats/lease?from="+mainLine+"&to="+alice, human, nil), 404, "lease_not_found", "release again")
	e.wantStatus(e.call("POST", "/v1/messages", sales, msg), 201, "", "send after release")
}

func TestChatLeaseBadInput(t *testing.T) {
	e, _ := agentEnv(t)
	key := e.key(keyOpts{Agent: true})
	e.inbound(mainLine, alice, "hello?")
	for _, tc := range []struct {
		body        map[string]any
		status      int
		code, param string
	}{
		{map[string]any{"from": mainLine, "to": alice}, 400, "missing_required_parameter", "ttl_seconds"},
		{map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 9}, 400, "invalid_parameter_value", "ttl_seconds"},
		{map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 86401}, 400, "invalid_parameter_value", "ttl_seconds"},
		{map[string]any{"from": mainLine, "to": alice, "ttl_seconds": "60"}, 400, "invalid_parameter_value", "ttl_seconds"},
		{map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 1.5}, 400, "invalid_parameter_value", "ttl_seconds"},
		{map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 60, "label": "a\nb"}, 400, "invalid_parameter_value", "label"},
		{map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 60, "label": strings.Repeat("x", 101)}, 400, "invalid_parameter_value", "label"},
		{map[string]any{"from": mainLine, "to": carol, "ttl_seconds": 60}, 404, "chat_not_found", "to"},
		{map[string]any{"from": "+15559999999", "to": alice, "ttl_seconds": 60}, 404, "line_not_found", "from"},
	} {
		r := e.call("POST", "/v1/chats/lease", key, tc.body)
		if r.Status != tc.status || r.ErrCode() != tc.code || r.ErrParam() != tc.param {
			t.Errorf("lease %v: %d %s; want %d %s on %s", tc.body, r.Status, r.Raw, tc.status, tc.code, tc.param)
		}
	}
	e.wantStatus(e.call("DELETE", "/v1/chats/lease?from="+mainLine, key, nil), 400, "missing_required_parameter", "release without to")
}
