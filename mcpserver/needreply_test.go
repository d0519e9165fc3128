package mcpserver_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

// TestChatsNeedingReply: the chats whose last message a contact wrote,
// most recent first, each with that message; a chat the line answered is
// not among them, and paging goes on to older chats.
func TestChatsNeedingReply(t *testing.T) {
	td := startDaemon(t)
	cs := td.httpAgent(td.key(""), nil)
	fromAlice := td.Inbound(mainLine, alice, "is the shop open?")
	td.Inbound(mainLine, bob, "thanks!")
	sentOf(t, cs, call[mcpserver.Outbox](t, cs, "send_message", map[string]any{"line": mainLine, "to": bob, "text": "you're welcome"}))
	fromCarol := td.Inbound(mainLine, carol, "can I book for two?")

	chatsOf := func(out mcpserver.ChatsNeedingReplyOutput) []string {
		var ids []string
		for _, c := range out.Chats {
			ids = append(ids, c.LastMessage.ID)
			if c.LastMessage.ChatID != c.Chat.ID || !c.LastMessage.Untrusted {
				t.Errorf("chat %+v", c)
			}
		}
		return ids
	}
	var all mcpserver.ChatsNeedingReplyOutput
	testkit.Eventually(t, 10*time.Second, func() bool { // bob's chat: once the answer is stored
		all = call[mcpserver.ChatsNeedingReplyOutput](t, cs, "chats_needing_reply", map[string]any{"line": mainLine})
		return slices.Equal(chatsOf(all), []string{fromCarol.ID, fromAlice.ID})
	})
	if all.NextCursor != "" {
		t.Errorf("one page of three chats has a next cursor: %+v", all)
	}

	// Two chats a page: carol, then bob (answered) and alice.
	first := call[mcpserver.ChatsNeedingReplyOutput](t, cs, "chats_needing_reply", map[string]any{"line": mainLine, "limit": 2})
	if got := chatsOf(first); !slices.Equal(got, []string{fromCarol.ID}) || first.NextCursor == "" {
		t.Fatalf("first page %v (%+v)", got, first)
	}
	second := call[mcpserver.ChatsNeedingReplyOutput](t, cs, "chats_needing_reply", map[string]any{"line": mainLine, "limit": 2, "cursor": first.NextCursor})
	if got := chatsOf(second); !slices.Equal(got, []string{fromAlice.ID}) {
		t.Fatalf("second page %v", got)
	}

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "chats_needing_reply", Arguments: map[string]any{"line": mainLine}})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, text(res))
	}
	checkMarked(t, text(res), "can I book for two?", "")
	if msg := toolError(t, cs, "chats_needing_reply", map[string]any{"line": mainLine, "limit": 0}); !strings.Contains(msg, "limit must be an integer from 1 to 100") {
		t.Errorf("limit 0: %s", msg)
	}
}
