package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/blueline-app/blueline/mcpserver"
)

// TestBlockedTools: an agent blocks a contact (normalised), lists the
// list in pages and unblocks it, over both transports; the key's scopes
// hold, as on the API's routes.
func TestBlockedTools(t *testing.T) {
	td := startDaemon(t)
	td.Inbound(mainLine, alice, "hi")
	for name, cs := range td.agents(td.key("")) {
		t.Run(name, func(t *testing.T) {
			b := call[mcpserver.BlockOutput](t, cs, "block_contact", map[string]any{"line": mainLine, "handle": "+1 (555) 111-0001"})
			if b.Handle != alice || b.CreatedAt == 0 {
				t.Fatalf("block_contact: %+v", b)
			}
			call[mcpserver.BlockOutput](t, cs, "block_contact", map[string]any{"line": mainLine, "handle": bob})
			if msg := toolError(t, cs, "send_message", map[string]any{"line": mainLine, "to": alice, "text": "hi"}); !strings.Contains(msg, "contact_blocked") {
				t.Errorf("send to a blocked contact: %s", msg)
			}
			first := call[mcpserver.ListBlockedOutput](t, cs, "list_blocked", map[string]any{"line": mainLine, "limit": 1})
			rest := call[mcpserver.ListBlockedOutput](t, cs, "list_blocked", map[string]any{"line": mainLine, "cursor": first.NextCursor})
			if len(first.Blocked) != 1 || first.Blocked[0].Handle != alice || first.NextCursor == "" ||
				len(rest.Blocked) != 1 || rest.Blocked[0].Handle != bob || rest.NextCursor != "" {
				t.Errorf("list_blocked pages: %+v then %+v", first, rest)
			}
			for _, h := range []string{alice, bob} {
				if u := call[mcpserver.UnblockOutput](t, cs, "unblock_contact", map[string]any{"line": mainLine, "handle": h}); !u.Deleted || u.Handle != h {
					t.Errorf("unblock_contact %s: %+v", h, u)
				}
			}
			if msg := toolError(t, cs, "unblock_contact", map[string]any{"line": mainLine, "handle": alice}); !strings.Contains(msg, "contact_not_blocked") {
				t.Errorf("unblock a contact not blocked: %s", msg)
			}
			if out := call[mcpserver.ListBlockedOutput](t, cs, "list_blocked", map[string]any{"line": mainLine}); out.Blocked == nil || len(out.Blocked) != 0 {
				t.Errorf("list_blocked of an empty list: %+v", out)
			}
		})
	}
	readOnly := td.httpAgent(td.key("lines:read,chats:read"), nil)
	if msg := toolError(t, readOnly, "block_contact", map[string]any{"line": mainLine, "handle": alice}); !strings.Contains(msg, "insufficient_scope") {
		t.Errorf("block without messages:write: %s", msg)
	}
	noChats := td.httpAgent(td.key("messages:read"), nil)
	if msg := toolError(t, noChats, "list_blocked", map[string]any{"line": mainLine}); !strings.Contains(msg, "insufficient_scope") {
		t.Errorf("list without chats:read: %s", msg)
	}
}
