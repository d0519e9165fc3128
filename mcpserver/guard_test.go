package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/mcpserver"
)

// guardedLine is a simulated line with the Apple ID guard on.
const guardedLine = "+15550000008"

// TestLinesGuard: the lines resource and prompt show each line's guard
// and today's standing against its caps.
func TestLinesGuard(t *testing.T) {
	td := &testDaemon{t: t, Daemon: daemontest.Start(t, fmt.Sprintf("\n[[lines]]\nhandle = %q\nguard = true\n", guardedLine))}
	td.Inbound(guardedLine, alice, "hi")
	cs := td.httpAgent(td.key(""), nil)
	call[mcpserver.Outbox](t, cs, "send_message", map[string]any{"line": guardedLine, "to": alice, "text": "hello"})

	g := readGuide(t, cs)
	byHandle := map[string]mcpserver.LineUse{}
	for _, l := range g.Lines {
		byHandle[l.Handle] = l
	}
	guarded := byHandle[guardedLine]
	if !guarded.Guard.Enabled || guarded.Guard.Today.Sent != 1 || guarded.Guard.Today.Received != 1 {
		t.Errorf("guard %+v", guarded.Guard)
	}
	for _, want := range []string{"on: one message every 1s", "1 of 10 messages sent today (10 per message received, 1 received)",
		"0 of 200 cold contacts", "at most 5 messages to a chat until its contact answers", "reset at "} {
		if !strings.Contains(guarded.GuardStanding, want) {
			t.Errorf("standing %q lacks %q", guarded.GuardStanding, want)
		}
	}
	if s := byHandle[mainLine].GuardStanding; !strings.HasPrefix(s, "off") {
		t.Errorf("%s: %q", mainLine, s)
	}
	p, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "lines"})
	if err != nil {
		t.Fatal(err)
	}
	if text := p.Messages[0].Content.(*mcp.TextContent).Text; !strings.Contains(text, "Apple ID guard: "+guarded.GuardStanding) {
		t.Errorf("the prompt lacks the guard's standing:\n%s", text)
	}
}

// readGuide reads the lines resource.
func readGuide(t *testing.T, cs *mcp.ClientSession) mcpserver.LinesGuide {
	t.Helper()
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "blueline://lines"})
	if err != nil {
		t.Fatal(err)
	}
	var g mcpserver.LinesGuide
	if err := json.Unmarshal([]byte(read.Contents[0].Text), &g); err != nil {
		t.Fatal(err)
	}
	return g
}
