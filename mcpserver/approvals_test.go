package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/mcpserver"
)

// An agent whose key requires approval is told its send waits for it,
// with the item's ID; wait_for_outbox_item says timed_out while it waits,
// then sent once the owner approves, or declined.
func TestSendWaitsForApproval(t *testing.T) {
	td := startDaemon(t)
	key := td.Key(api.KeyRequest{Label: "drafter", Agent: true, Approval: api.ApprovalRequired})
	td.Inbound(mainLine, alice, "hi")
	cs := td.httpAgent(key, nil)
	owner := client.New(adminsock.BaseURL, client.WithHTTPClient(td.Admin().HTTPClient()))

	send := func(words string) mcpserver.Outbox {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{"line": mainLine, "to": alice, "text": words}})
		if err != nil || res.IsError {
			t.Fatalf("send_message: %v %+v", err, res)
		}
		out := call[mcpserver.Outbox](t, cs, "get_outbox_item", map[string]any{"id": idIn(t, res)})
		if out.Approval != api.ApprovalWaiting || out.Status != client.StatusPending {
			t.Fatalf("the draft: %+v", out)
		}
		if said := text(res); !strings.Contains(said, "Waiting for approval") || !strings.Contains(said, out.ID) {
			t.Fatalf("send_message said: %s", said)
		}
		return out
	}
	draft := send("draft one")
	waited := call[mcpserver.WaitOutboxOutput](t, cs, "wait_for_outbox_item", map[string]any{"id": draft.ID, "timeout_seconds": 0})
	if waited.Outcome != "timed_out" || waited.Item.Approval != api.ApprovalWaiting {
		t.Fatalf("waiting: %+v", waited)
	}
	if _, err := owner.Outbox.Approve(context.Background(), draft.ID, nil); err != nil {
		t.Fatal(err)
	}
	if waited := call[mcpserver.WaitOutboxOutput](t, cs, "wait_for_outbox_item", map[string]any{"id": draft.ID, "timeout_seconds": 30}); waited.Outcome != "sent" {
		t.Fatalf("after approval: %+v", waited)
	}

	declined := send("draft two")
	if _, err := owner.Outbox.Decline(context.Background(), declined.ID); err != nil {
		t.Fatal(err)
	}
	if waited := call[mcpserver.WaitOutboxOutput](t, cs, "wait_for_outbox_item", map[string]any{"id": declined.ID}); waited.Outcome != "declined" {
		t.Fatalf("after decline: %+v", waited)
	}
	if msg := toolError(t, cs, "wait_for_outbox_item", map[string]any{"id": declined.ID, "timeout_seconds": 301}); !strings.Contains(msg, "timeout_seconds must be an integer from 0 to 300") {
		t.Errorf("timeout out of bounds: %s", msg)
	}
}

// idIn is the outbox item ID a send's structured answer holds.
func idIn(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	m, _ := res.StructuredContent.(map[string]any)
	id, _ := m["id"].(string)
	if !strings.HasPrefix(id, "obx_") {
		t.Fatalf("no outbox item in %+v", res.StructuredContent)
	}
	return id
}
