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

// TestSearchMessages: the daemon indexes what it stores, and the tool
// finds a line's messages by their words, most recent first, in a chat or
// the whole line, marked untrusted; another line's key finds nothing.
func TestSearchMessages(t *testing.T) {
	td := startDaemon(t)
	first := td.Inbound(mainLine, alice, "Is the Café open on Sunday?")
	second := td.Inbound(mainLine, bob, "see you at the cafe")
	td.Inbound(mainLine, bob, "nothing to see here")
	td.Inbound(plainLine, alice, "another line's café")
	cs := td.httpAgent(td.key(""), nil)

	ids := func(out mcpserver.SearchMessagesOutput) []string {
		var got []string
		for _, m := range out.Messages {
			got = append(got, m.ID)
		}
		return got
	}
	var out mcpserver.SearchMessagesOutput
	testkit.Eventually(t, 10*time.Second, func() bool { // the index follows within about a second
		out = call[mcpserver.SearchMessagesOutput](t, cs, "search_messages", map[string]any{"line": mainLine, "query": "CAFE"})
		return slices.Equal(ids(out), []string{second.ID, first.ID})
	})
	if !out.Messages[0].Untrusted {
		t.Errorf("a contact's message found is not marked untrusted: %+v", out.Messages[0])
	}
	inChat := call[mcpserver.SearchMessagesOutput](t, cs, "search_messages", map[string]any{"line": mainLine, "chat": alice, "query": "caf*"})
	if got := ids(inChat); !slices.Equal(got, []string{first.ID}) {
		t.Errorf("in alice's chat: %v", got)
	}
	page := call[mcpserver.SearchMessagesOutput](t, cs, "search_messages", map[string]any{"line": mainLine, "query": "cafe", "limit": 1})
	older := call[mcpserver.SearchMessagesOutput](t, cs, "search_messages", map[string]any{"line": mainLine, "query": "cafe", "limit": 1, "cursor": page.NextCursor})
	if !slices.Equal(ids(page), []string{second.ID}) || page.NextCursor == "" || !slices.Equal(ids(older), []string{first.ID}) {
		t.Errorf("pages %v then %v", ids(page), ids(older))
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_messages", Arguments: map[string]any{"line": mainLine, "query": "sunday"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, text(res))
	}
	checkMarked(t, text(res), "Is the Café open on Sunday?", "")

	if msg := toolError(t, cs, "search_messages", map[string]any{"line": mainLine, "query": `" * "`}); !strings.Contains(msg, "no words to search for") {
		t.Errorf("no words: %s", msg)
	}
	plainOnly := td.httpAgent(td.key("", plainLine), nil)
	if msg := toolError(t, plainOnly, "search_messages", map[string]any{"line": mainLine, "query": "cafe"}); !strings.Contains(msg, "line_not_accessible") {
		t.Errorf("another line: %s", msg)
	}
	noRead := td.httpAgent(td.key("lines:read,chats:read"), nil)
	if msg := toolError(t, noRead, "search_messages", map[string]any{"line": mainLine, "query": "cafe"}); !strings.Contains(msg, "insufficient_scope") {
		t.Errorf("without messages:read: %s", msg)
	}
}
