package mcpserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

const carol = daemontest.Carol

// sentOf waits for an outbox item to be sent and answers it.
func sentOf(t *testing.T, cs *mcp.ClientSession, item mcpserver.Outbox) mcpserver.Outbox {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool {
		item = call[mcpserver.Outbox](t, cs, "get_outbox_item", map[string]any{"id": item.ID})
		return item.Status == client.StatusSent
	})
	return item
}

// lastMessage is the chat's most recent message.
func lastMessage(t *testing.T, cs *mcp.ClientSession, chat string) mcpserver.Message {
	t.Helper()
	read := call[mcpserver.ReadMessagesOutput](t, cs, "read_messages", map[string]any{"line": mainLine, "chat": chat, "limit": 1})
	if len(read.Messages) != 1 {
		t.Fatalf("no message in %s", chat)
	}
	return read.Messages[0]
}

// TestEditUnsendSchedule: the tools edit and take back the line's own
// messages, schedule a send and cancel it, as the API does.
func TestEditUnsendSchedule(t *testing.T) {
	td := startDaemon(t)
	first := td.Inbound(mainLine, alice, "what time tomorrow?")
	cs := td.httpAgent(td.key(""), nil)

	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "send_message", map[string]any{"line": mainLine, "to": alice, "text": "at 9"}))
	own := lastMessage(t, cs, alice)
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "edit_message", map[string]any{"line": mainLine, "message_id": own.ID, "text": "at 10"}))
	testkit.Eventually(t, 10*time.Second, func() bool {
		m := lastMessage(t, cs, alice)
		return m.ID == own.ID && m.Text != nil && *m.Text == "at 10" && m.EditedAt != nil
	})
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "unsend_message", map[string]any{"line": mainLine, "message_id": own.ID}))
	testkit.Eventually(t, 10*time.Second, func() bool { return lastMessage(t, cs, alice).UnsentAt != nil })
	if msg := toolError(t, cs, "edit_message", map[string]any{"line": mainLine, "message_id": first.ID, "text": "x"}); !strings.Contains(msg, "message_id") {
		t.Errorf("editing the contact's message: %s", msg)
	}

	at := time.Now().Add(time.Hour).Truncate(time.Second)
	later := call[mcpserver.Outbox](t, cs, "send_message", map[string]any{"line": mainLine, "to": alice, "text": "reminder",
		"send_at": at.Format(time.RFC3339)})
	if later.Status != client.StatusPending || later.SendAt == nil || *later.SendAt != at.UnixMilli() {
		t.Fatalf("scheduled %+v, want pending until %d", later, at.UnixMilli())
	}
	canceled := call[mcpserver.Outbox](t, cs, "cancel_outbox_item", map[string]any{"id": later.ID})
	if canceled.Status != client.StatusFailed || canceled.Error == nil || *canceled.Error != "canceled" {
		t.Errorf("canceled %+v", canceled)
	}
	if msg := toolError(t, cs, "cancel_outbox_item", map[string]any{"id": later.ID}); !strings.Contains(msg, "outbox_item_not_pending") {
		t.Errorf("canceling twice: %s", msg)
	}
	if msg := toolError(t, cs, "send_message", map[string]any{"line": mainLine, "to": alice, "text": "x", "send_at": "tomorrow 9am"}); !strings.Contains(msg, "RFC 3339") {
		t.Errorf("a send_at that is not a time: %s", msg)
	}

	// The key's scopes hold.
	readOnly := td.httpAgent(td.key("lines:read,chats:read,messages:read"), nil)
	if msg := toolError(t, readOnly, "edit_message", map[string]any{"line": mainLine, "message_id": own.ID, "text": "x"}); !strings.Contains(msg, "insufficient_scope") {
		t.Errorf("edit without messages:write: %s", msg)
	}
}

// TestGroupsAndAvailability: groups are created and changed through the
// tools, on a line with the groups capability only; availability answers.
func TestGroupsAndAvailability(t *testing.T) {
	td := startDaemon(t)
	for _, h := range []string{alice, bob, carol} {
		td.Inbound(mainLine, h, "hi")
	}
	td.Inbound(plainLine, alice, "hi")
	cs := td.httpAgent(td.key(""), nil)

	created := sentOf(t, cs, call[mcpserver.Outbox](t, cs, "create_group", map[string]any{"line": mainLine,
		"participants": []string{alice, bob}, "name": "Dinner", "text": "who is in?"}))
	testkit.Eventually(t, 10*time.Second, func() bool {
		created = call[mcpserver.Outbox](t, cs, "get_outbox_item", map[string]any{"id": created.ID})
		return created.ChatID != nil
	})
	group := *created.ChatID
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "rename_group", map[string]any{"line": mainLine, "chat": group, "name": "Dinner Friday"}))
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "add_group_participant", map[string]any{"line": mainLine, "chat": group, "handle": carol}))
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "remove_group_participant", map[string]any{"line": mainLine, "chat": group, "handle": bob}))
	testkit.Eventually(t, 10*time.Second, func() bool {
		chats := call[mcpserver.ListChatsOutput](t, cs, "list_chats", map[string]any{"line": mainLine})
		for _, c := range chats.Chats {
			if c.ID == group {
				return c.Name != nil && *c.Name == "Dinner Friday" && strings.Join(c.Participants, ",") == alice+","+carol
			}
		}
		return false
	})
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "leave_group", map[string]any{"line": mainLine, "chat": group}))
	if msg := toolError(t, cs, "create_group", map[string]any{"line": plainLine, "participants": []string{alice, bob}, "text": "x"}); !strings.Contains(msg, "group chats") {
		t.Errorf("a group on a line without the groups capability: %s", msg)
	}

	a := call[mcpserver.AvailabilityOutput](t, cs, "check_availability", map[string]any{"line": mainLine, "handle": alice})
	if a.Handle != alice || a.CheckedAt == 0 {
		t.Errorf("availability %+v", a)
	}
}
