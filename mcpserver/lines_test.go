package mcpserver_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

// agents are an MCP client of /mcp with key and one of the server
// `blueline mcp` runs, by name.
func (td *testDaemon) agents(key string) map[string]*mcp.ClientSession {
	return map[string]*mcp.ClientSession{"http": td.httpAgent(key, nil), "stdio": td.stdioAgent(mcpserver.Options{})}
}

// TestInputBounds: the input schemas state the bounds the tools check,
// and a value out of them is a tool error that names the parameter.
func TestInputBounds(t *testing.T) {
	td := startDaemon(t)
	td.Inbound(mainLine, alice, "hi")
	for name, cs := range td.agents(td.key("")) {
		t.Run(name, func(t *testing.T) {
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			type prop struct {
				Minimum, Maximum *float64
				Default          any
			}
			want := map[string]map[string]prop{
				"list_chats":       {"limit": {new(1.0), new(100.0), 20.0}},
				"read_messages":    {"limit": {new(1.0), new(100.0), 20.0}},
				"wait_for_message": {"timeout_seconds": {new(0.0), new(300.0), 30.0}},
			}
			for _, tool := range tools.Tools {
				for param, w := range want[tool.Name] {
					data, _ := json.Marshal(tool.InputSchema)
					var s struct{ Properties map[string]prop }
					if err := json.Unmarshal(data, &s); err != nil {
						t.Fatal(err)
					}
					got := s.Properties[param]
					if got.Minimum == nil || got.Maximum == nil || *got.Minimum != *w.Minimum || *got.Maximum != *w.Maximum || got.Default != w.Default {
						t.Errorf("%s.%s: %s", tool.Name, param, data)
					}
				}
			}
			for _, c := range []struct {
				tool          string
				args          map[string]any
				param, bounds string
			}{
				{"list_chats", map[string]any{"line": mainLine, "limit": 0}, "limit", "1 to 100"},
				{"list_chats", map[string]any{"line": mainLine, "limit": 101}, "limit", "1 to 100"},
				{"read_messages", map[string]any{"line": mainLine, "chat": alice, "limit": -1}, "limit", "1 to 100"},
				{"read_messages", map[string]any{"line": mainLine, "chat": alice, "limit": 2.5}, "limit", "1 to 100"},
				{"wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": -1}, "timeout_seconds", "0 to 300"},
				{"wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": 301}, "timeout_seconds", "0 to 300"},
				{"wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": "5"}, "timeout_seconds", "0 to 300"},
			} {
				if msg := toolError(t, cs, c.tool, c.args); !strings.HasPrefix(msg, c.param+" must be an integer from "+c.bounds) {
					t.Errorf("%s %v: %s", c.tool, c.args, msg)
				}
			}
			// In bounds, and absent (the default), they are taken.
			call[mcpserver.ListChatsOutput](t, cs, "list_chats", map[string]any{"line": mainLine, "limit": 100})
			if read := call[mcpserver.ReadMessagesOutput](t, cs, "read_messages", map[string]any{"line": mainLine, "chat": alice}); len(read.Messages) != 1 {
				t.Errorf("read %+v", read)
			}
		})
	}
}

// TestWaitZero: timeout_seconds 0 does not wait: from a cursor it answers
// a message already there, else timed_out with a cursor to go on from.
func TestWaitZero(t *testing.T) {
	td := startDaemon(t)
	first := td.Inbound(mainLine, alice, "hi")
	for name, cs := range td.agents(td.key("")) {
		t.Run(name, func(t *testing.T) {
			now := call[mcpserver.WaitOutput](t, cs, "wait_for_message", map[string]any{"line": mainLine, "chat": alice, "timeout_seconds": 0})
			if !now.TimedOut || now.Message != nil || now.Cursor == "" {
				t.Fatalf("no cursor, no wait: %+v", now)
			}
			read := call[mcpserver.ReadMessagesOutput](t, cs, "read_messages", map[string]any{"line": mainLine, "chat": alice})
			if len(read.Messages) == 0 || read.Messages[0].ID != first.ID {
				t.Fatalf("read %+v", read)
			}
			there := call[mcpserver.WaitOutput](t, cs, "wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": 0, "cursor": read.WaitCursor})
			if !there.TimedOut || there.Message != nil {
				t.Fatalf("nothing after the read: %+v", there)
			}
			later := td.Inbound(mainLine, alice, "are you there? ("+name+")")
			got := call[mcpserver.WaitOutput](t, cs, "wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": 0, "cursor": there.Cursor})
			if got.TimedOut || got.Message == nil || got.Message.ID != later.ID {
				t.Fatalf("a message there: %+v, want %s", got, later.ID)
			}
			after := call[mcpserver.WaitOutput](t, cs, "wait_for_message", map[string]any{"line": mainLine, "chat": alice, "timeout_seconds": 0, "cursor": got.Cursor})
			if !after.TimedOut || after.Message != nil || after.Cursor == "" {
				t.Fatalf("after it: %+v", after)
			}
		})
	}
}

// TestEmojiTapbacks: react takes an emoji tapback as emoji, or as a type
// holding one emoji, as the API does.
func TestEmojiTapbacks(t *testing.T) {
	td := startDaemon(t)
	key := td.key("")
	api := client.New(td.URL(), client.WithAPIKey(key))
	for name, cs := range td.agents(key) {
		t.Run(name, func(t *testing.T) {
			for _, args := range []map[string]any{{"emoji": "🎉"}, {"type": "👍🏽"}, {"type": "emoji", "emoji": "❤️"}} {
				in := td.Inbound(mainLine, alice, "news")
				args["line"], args["chat"], args["message_id"] = mainLine, alice, in.ID
				item := call[mcpserver.Outbox](t, cs, "react", args)
				testkit.Eventually(t, 10*time.Second, func() bool {
					return call[mcpserver.Outbox](t, cs, "get_outbox_item", map[string]any{"id": item.ID}).Status == client.StatusSent
				})
				recs, err := api.Reactions.List(t.Context(), in.ID)
				want := args["emoji"]
				if want == nil {
					want = args["type"]
				}
				if err != nil || len(recs) != 1 || recs[0].Type != client.ReactionEmoji || recs[0].Emoji == nil || *recs[0].Emoji != want {
					t.Errorf("react %v: %+v (%v)", args, recs, err)
				}
			}
			in := td.Inbound(mainLine, alice, "more news")
			for _, c := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{"type": "wave"}, "type"},
				{map[string]any{"emoji": "wow"}, "emoji"},
				{map[string]any{"emoji": "🎉🎉"}, "exactly one emoji"},
				{map[string]any{}, "give type"},
			} {
				c.args["line"], c.args["chat"], c.args["message_id"] = mainLine, alice, in.ID
				if msg := toolError(t, cs, "react", c.args); !strings.Contains(msg, c.want) {
					t.Errorf("react %v: %s", c.args, msg)
				}
			}
		})
	}
}

// TestLinesResource: the lines resource and prompt say, before the agent
// tries, which tools work on which of its key's lines, and why not.
func TestLinesResource(t *testing.T) {
	td := startDaemon(t)
	for name, cs := range map[string]*mcp.ClientSession{"http": td.httpAgent(td.key(""), nil), "stdio": td.stdioAgent(mcpserver.Options{})} {
		t.Run(name, func(t *testing.T) {
			res, err := cs.ListResources(t.Context(), nil)
			if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "blueline://lines" {
				t.Fatalf("resources %+v (%v)", res, err)
			}
			read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "blueline://lines"})
			if err != nil || len(read.Contents) != 1 || read.Contents[0].MIMEType != "application/json" {
				t.Fatalf("read %+v (%v)", read, err)
			}
			var g mcpserver.LinesGuide
			if err := json.Unmarshal([]byte(read.Contents[0].Text), &g); err != nil {
				t.Fatal(err)
			}
			byHandle := map[string]mcpserver.LineUse{}
			for _, l := range g.Lines {
				byHandle[l.Handle] = l
			}
			main, plain := byHandle[mainLine], byHandle[plainLine]
			for _, tool := range []string{"send_message", "react", "set_typing", "mark_read", "wait_for_message", "edit_message", "unsend_message", "create_group", "check_availability", "block_contact"} {
				if !slices.Contains(main.Tools, tool) {
					t.Errorf("%s lacks %s: %+v", mainLine, tool, main)
				}
			}
			if slices.Contains(byHandle[daemontest.SandboxLine].Tools, "block_contact") {
				t.Errorf("the sandbox line, which has no blocked list, offers block_contact: %+v", byHandle[daemontest.SandboxLine])
			}
			if !slices.Contains(main.Available, "emoji_reactions") || len(main.Unavailable) != 0 {
				t.Errorf("%s: %+v", mainLine, main)
			}
			if slices.Contains(plain.Tools, "react") || slices.Contains(plain.Tools, "create_group") || !slices.Contains(plain.Tools, "send_message") ||
				!strings.Contains(plain.Unavailable["reactions"], "advanced features are off") {
				t.Errorf("%s: %+v", plainLine, plain)
			}
			if !strings.Contains(g.Rules, "contact_has_not_messaged") {
				t.Errorf("rules: %s", g.Rules)
			}

			prompts, err := cs.ListPrompts(t.Context(), nil)
			if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "lines" {
				t.Fatalf("prompts %+v (%v)", prompts, err)
			}
			p, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "lines"})
			if err != nil || len(p.Messages) != 1 {
				t.Fatalf("prompt %+v (%v)", p, err)
			}
			text := p.Messages[0].Content.(*mcp.TextContent).Text
			for _, want := range []string{"- " + mainLine + " (Main line), imessage.", "Emoji tapbacks: yes", "- " + plainLine + ", imessage.", "Cannot reactions: advanced features are off"} {
				if !strings.Contains(text, want) {
					t.Errorf("the prompt lacks %q:\n%s", want, text)
				}
			}
		})
	}
	// A key of one line sees that line (and the sandbox line, as GET
	// /v1/lines lists it), not the others.
	g := readGuide(t, td.httpAgent(td.key("", plainLine), nil))
	var handles []string
	for _, l := range g.Lines {
		if !l.IsSandbox {
			handles = append(handles, l.Handle)
		}
	}
	if !slices.Equal(handles, []string{plainLine}) {
		t.Errorf("a key of %s: %+v", plainLine, g.Lines)
	}
}
