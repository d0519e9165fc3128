package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// setLine changes line handle's settings, as a restart with a new
// configuration would.
func (e *apiEnv) setLine(h string, change func(*storage.Line)) {
	e.t.Helper()
	var lines []storage.Line
	for _, l := range e.lines {
		if l.Handle == h {
			change(&l)
		}
		lines = append(lines, l)
	}
	synced, err := e.db.SyncLines(context.Background(), lines)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range synced {
		e.lines[l.Handle] = l
	}
}

// An agent key that requires approval has its messages accepted as
// drafts that wait (listed, pending, approval "waiting") until the owner
// approves them, with a text of their own or not, or declines them; agent
// keys may not answer; a draft is answered once.
func TestDraftApproveDecline(t *testing.T) {
	e, _ := agentEnv(t)
	e.setLine(mainLine, func(l *storage.Line) { l.ApprovalTTL = time.Hour.Milliseconds() })
	agent := e.key(keyOpts{Label: "drafter", Agent: true, ApprovalRequired: true, ApprovalExcept: []string{bob}})
	owner := e.key(keyOpts{})
	m := e.inbound(mainLine, alice, "hello?")
	e.inbound(mainLine, bob, "hi")
	msg := map[string]any{"from": mainLine, "to": alice, "text": "agent draft"}

	r := e.call("POST", "/v1/messages", agent, msg)
	if r.Status != 201 || r.Body["status"] != "pending" || r.Body["approval"] != "waiting" || r.Body["approval_expires_at"] == nil {
		t.Fatalf("agent send: %d %s", r.Status, r.Raw)
	}
	id := r.Body["id"].(string)
	if r := e.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": bob, "text": "x"}); r.Status != 201 || r.Body["approval"] != nil {
		t.Fatalf("to a contact on approval_except: %d %s", r.Status, r.Raw)
	}
	if r := e.call("POST", "/v1/messages", owner, msg); r.Status != 201 || r.Body["approval"] != nil {
		t.Fatalf("a key that is not an agent's: %d %s", r.Status, r.Raw)
	}
	if r := e.call("POST", "/v1/reactions", agent, map[string]any{"from": mainLine, "to": alice, "message_id": m.ID, "type": "love"}); r.Status != 201 || r.Body["approval"] != nil {
		t.Fatalf("an agent's reaction: %d %s", r.Status, r.Raw)
	}
	w := e.call("GET", "/v1/outbox/waiting?from="+mainLine, owner, nil)
	if data, _ := w.Body["data"].([]any); w.Status != 200 || len(data) != 1 || data[0].(map[string]any)["id"] != id {
		t.Fatalf("waiting: %d %s", w.Status, w.Raw)
	}

	e.wantStatus(e.call("POST", "/v1/outbox/approve", agent, map[string]any{"id": id}), 403, "agent_key_forbidden", "an agent approving")
	e.wantStatus(e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": id, "text": ""}), 400, "invalid_parameter_value", "an empty text")
	e.wantStatus(e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": "obx_" + "0123456789abcdefghijklmn"}), 404, "outbox_item_not_found", "an unknown item")
	r = e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": id, "text": "the owner's words"})
	if r.Status != 200 || r.Body["approval"] != "approved" || r.Body["status"] != "pending" || r.Body["approval_by"] == nil {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	item, err := e.db.OutboxItemByID(context.Background(), id)
	if err != nil || item.Text == nil || *item.Text != "the owner's words" {
		t.Fatalf("approved item %+v, %v", item, err)
	}
	e.wantStatus(e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": id}), 409, "approval_answered", "approving twice")
	e.wantStatus(e.call("POST", "/v1/outbox/decline", owner, map[string]any{"id": id}), 409, "approval_answered", "declining an approved draft")

	r = e.call("POST", "/v1/messages", agent, msg)
	declined := r.Body["id"].(string)
	r = e.call("POST", "/v1/outbox/decline", owner, map[string]any{"id": declined})
	if r.Status != 200 || r.Body["status"] != "failed" || r.Body["error"] != "declined" || r.Body["approval"] != "declined" {
		t.Fatalf("decline: %d %s", r.Status, r.Raw)
	}
	e.wantStatus(e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": declined}), 409, "approval_answered", "approving a declined draft")

	plain := e.call("POST", "/v1/messages", owner, msg).Body["id"].(string)
	e.wantStatus(e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": plain}), 409, "outbox_item_not_waiting", "approving a message that needed none")
	if w := e.call("GET", "/v1/outbox/waiting", owner, nil); len(w.Body["data"].([]any)) != 0 {
		t.Fatalf("waiting after the answers: %s", w.Raw)
	}
}

// A draft no one answers expires at the line's approval_ttl, by the
// server's clock: approving it then is a 409 and it is failed.
func TestDraftExpires(t *testing.T) {
	e, ahead := agentEnv(t)
	e.setLine(mainLine, func(l *storage.Line) { l.ApprovalRequired, l.ApprovalTTL = true, time.Hour.Milliseconds() })
	agent := e.key(keyOpts{Agent: true})
	owner := e.key(keyOpts{})
	e.inbound(mainLine, alice, "hello?")
	id := e.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": alice, "text": "draft"}).Body["id"].(string)
	ahead.Store((time.Hour + time.Second).Milliseconds())
	e.wantStatus(e.call("POST", "/v1/outbox/approve", owner, map[string]any{"id": id}), 409, "approval_expired", "approving after the expiry")
	r := e.call("GET", "/v1/outbox?id="+id, owner, nil)
	if r.Body["status"] != "failed" || r.Body["error"] != "approval_expired" || r.Body["approval"] != "expired" {
		t.Fatalf("expired item: %s", r.Raw)
	}
	e.wantStatus(e.call("POST", "/v1/outbox/decline", owner, map[string]any{"id": id}), 409, "approval_expired", "declining after the expiry")
}

// On a line with takeover = "hold", an agent's message to a chat the owner
// took over waits for approval instead of a 409; its typing is still
// refused.
func TestTakeoverHold(t *testing.T) {
	e, _ := agentEnv(t)
	e.setLine(mainLine, func(l *storage.Line) { l.TakeoverHold, l.ApprovalTTL = true, time.Hour.Milliseconds() })
	agent := e.key(keyOpts{Agent: true})
	e.inbound(mainLine, alice, "hello?")
	msg := map[string]any{"from": mainLine, "to": alice, "text": "agent here"}
	if r := e.call("POST", "/v1/messages", agent, msg); r.Status != 201 || r.Body["approval"] != nil {
		t.Fatalf("before the owner wrote: %d %s", r.Status, r.Raw)
	}
	e.ownerSends(mainLine, alice, "I'll take this one")
	if r := e.call("POST", "/v1/messages", agent, msg); r.Status != 201 || r.Body["approval"] != "waiting" {
		t.Fatalf("held: %d %s", r.Status, r.Raw)
	}
	e.wantStatus(e.call("POST", "/v1/typing", agent, map[string]any{"from": mainLine, "to": alice}), 409, "human_active", "agent typing")
}
