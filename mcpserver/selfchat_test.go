package mcpserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

// TestWaitForSelfMessage: wait_for_self_message answers what the owner
// wrote in their chat with themselves, and not the agent's own send of
// the same text into that chat.
func TestWaitForSelfMessage(t *testing.T) {
	td := startDaemon(t)
	for name, cs := range td.agents(td.key("")) {
		t.Run(name, func(t *testing.T) {
			start := call[mcpserver.WaitOutput](t, cs, "wait_for_self_message", map[string]any{"line": mainLine, "timeout_seconds": 0})
			if !start.TimedOut || start.Cursor == "" {
				t.Fatalf("no cursor, no wait: %+v", start)
			}
			text := "plan my afternoon (" + name + ")"
			var owner api.Message
			err := td.Admin().Do(context.Background(), http.MethodPost, "/sim/owner-send", api.SimOwnerSend{Line: mainLine, To: api.SimToSelf, Text: text}, &owner)
			if err != nil {
				t.Fatal(err)
			}
			sent := call[mcpserver.Outbox](t, cs, "send_message", map[string]any{"line": mainLine, "to": mainLine, "text": text})
			testkit.Eventually(t, 10*time.Second, func() bool {
				return call[mcpserver.Outbox](t, cs, "get_outbox_item", map[string]any{"id": sent.ID}).Status == client.StatusSent
			})
			got := call[mcpserver.WaitOutput](t, cs, "wait_for_self_message", map[string]any{"line": mainLine, "timeout_seconds": 0, "cursor": start.Cursor})
			if got.TimedOut || got.Message == nil || got.Message.ID != owner.ID {
				t.Fatalf("the owner's message: %+v, want %s", got, owner.ID)
			}
			if after := call[mcpserver.WaitOutput](t, cs, "wait_for_self_message", map[string]any{"line": mainLine, "timeout_seconds": 0, "cursor": got.Cursor}); !after.TimedOut {
				t.Fatalf("after the owner's message, the agent's own send came back: %+v", after)
			}
		})
	}
}
