package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// A Claude Code session about to run a tool that needs approval asks its
// channels too (permission_request); Blueline writes the prompt into the
// owner's chat with themselves, and nowhere else, and the owner answers
// there: "yes abcde" allows, "no abcde" denies. Only the owner's own
// messages in that chat (message.self events) answer: Blueline's own
// writes there, the prompt among them, never come back as such, and no
// contact's message is read. An answer counts only for a request this
// server prompted and that is not answered yet; a request belongs to the
// running session, so answers are followed from when it starts, not from
// a cursor.

const (
	permissionRequestMethod = "notifications/claude/channel/permission_request"
	permissionMethod        = "notifications/claude/channel/permission"
)

// PermissionRequest is what the host asks.
type PermissionRequest struct {
	RequestID    string `json:"request_id"`
	ToolName     string `json:"tool_name"`
	Description  string `json:"description"`
	InputPreview string `json:"input_preview"`
}

// PermissionVerdict is the owner's answer, told to the host.
type PermissionVerdict struct {
	RequestID string `json:"request_id"`
	Behavior  string `json:"behavior"` // "allow" or "deny"
}

// requestID is the form of the host's request IDs: five lowercase
// letters, never "l" (read as 1 or I on a phone).
var requestID = regexp.MustCompile(`^[a-km-z]{5}$`)

// verdict is the owner's answer, the whole message: yes or no and the ID.
var verdict = regexp.MustCompile(`(?i)^\s*(y|yes|n|no)\s+([a-km-z]{5})\s*$`)

// prompt writes the host's request into the owner's chat with themselves.
func (ch *Channel) prompt(ctx context.Context, params json.RawMessage) {
	var req PermissionRequest
	if err := json.Unmarshal(params, &req); err != nil || !requestID.MatchString(req.RequestID) {
		slog.Warn("mcp channel: permission request not understood", "err", err)
		return
	}
	c, err := ch.t.client(nil)
	if err != nil {
		slog.Warn("mcp channel: permission request not relayed", "request_id", req.RequestID, "err", err)
		return
	}
	ch.mu.Lock()
	if ch.pending == nil {
		ch.pending = map[string]bool{}
	}
	ch.pending[req.RequestID] = true
	ch.mu.Unlock()
	text := "Claude Code asks to run " + req.ToolName + ": " + req.Description + "\n" + req.InputPreview +
		"\nReply \"yes " + req.RequestID + "\" to allow or \"no " + req.RequestID + "\" to deny."
	// The line's own handle names the owner's chat with themselves.
	if _, err := c.Messages.Send(ctx, client.MessageSendParams{From: ch.PermissionLine, To: ch.PermissionLine, Text: text}); err != nil {
		slog.Warn("mcp channel: permission request not relayed", "request_id", req.RequestID, "err", err)
	}
}

// answer is the verdict of the owner's message text, for a request
// prompted and not answered yet, which it answers.
func (ch *Channel) answer(text string) (PermissionVerdict, bool) {
	m := verdict.FindStringSubmatch(text)
	if m == nil {
		return PermissionVerdict{}, false
	}
	id := m[2]
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.pending[id] {
		return PermissionVerdict{}, false
	}
	delete(ch.pending, id)
	behavior := "deny"
	if strings.HasPrefix(strings.ToLower(m[1]), "y") {
		behavior = "allow"
	}
	return PermissionVerdict{RequestID: id, Behavior: behavior}, true
}

// followAnswers tells the host each answer the owner writes in their chat
// with themselves on PermissionLine, from since, until the session ends.
func (ch *Channel) followAnswers(session *mcp.ServerSession, since time.Time) {
	ctx, cancel := ch.t.sessionContext(session)
	defer cancel()
	c, err := ch.t.client(nil)
	if err != nil {
		return
	}
	params := client.EventStreamParams{Events: []string{api.EventMessageSelf}, Lines: []string{ch.PermissionLine}, Since: since}
	eachEvent(ctx, c, params, func(ev client.StreamedEvent) error {
		var m api.MessageEventData
		if json.Unmarshal(ev.Data, &m) != nil || ev.Type != api.EventMessageSelf || m.Text == nil {
			return nil
		}
		if v, ok := ch.answer(*m.Text); ok {
			return ch.notify(ctx, permissionMethod, v)
		}
		return nil
	})
}
