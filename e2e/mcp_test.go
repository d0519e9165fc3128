package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/testkit"
)

// keyTransport sends an API key with each request.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpAgent is an MCP client of the daemon's /mcp endpoint with key.
func (td *testDaemon) mcpAgent(key string) *mcp.ClientSession {
	td.t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil).Connect(td.t.Context(),
		&mcp.StreamableClientTransport{Endpoint: td.base + "/mcp", HTTPClient: &http.Client{Transport: keyTransport{key}}, MaxRetries: -1}, nil)
	if err != nil {
		td.t.Fatal(err)
	}
	td.t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls a tool; it returns the structured result, or the tool
// error's text.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return nil, b.String()
	}
	data, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out, ""
}

// TestMCPSandbox: an agent with an owner's key is held to the sandbox's
// rules, and waits see only the owner's sandbox.
func TestMCPSandbox(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key("--owner", "ann@example.com")
	agent := td.mcpAgent(key)
	send := map[string]any{"line": sandboxLine, "to": alice, "text": "hello"}
	if _, msg := mcpCall(t, agent, "send_message", send); !strings.Contains(msg, "sandbox_not_activated") {
		t.Fatalf("before activation: %q", msg)
	}
	td.activateSandbox(key, alice)
	read, msg := mcpCall(t, agent, "read_messages", map[string]any{"line": sandboxLine, "chat": alice})
	if msg != "" {
		t.Fatal(msg)
	}
	if _, msg := mcpCall(t, agent, "send_message", send); msg != "" {
		t.Fatalf("to the paired phone: %s", msg)
	}
	if _, msg := mcpCall(t, agent, "send_message", map[string]any{"line": sandboxLine, "to": bob, "text": "hi"}); !strings.Contains(msg, "sandbox_contact_mismatch") {
		t.Fatalf("to another phone: %q", msg)
	}

	// Another phone texting the sandbox line is not the owner's: the wait
	// on the whole line skips it and returns the paired phone's message.
	td.inbound(sandboxLine, bob, "not for ann")
	td.inbound(sandboxLine, alice, "for ann")
	got, msg := mcpCall(t, agent, "wait_for_message", map[string]any{"line": sandboxLine, "timeout_seconds": 10, "cursor": read["wait_cursor"]})
	if msg != "" {
		t.Fatal(msg)
	}
	m, _ := got["message"].(map[string]any)
	if m == nil || m["text"] != "for ann" || m["sender"] != alice {
		t.Fatalf("waited %v", got)
	}
}

// TestMCPStdio: `blueline mcp` itself, as a desktop agent starts it, over
// its standard input and output: on the host, through the admin socket, no
// key. An agent reads a chat, answers, and waits for the contact's reply.
func TestMCPStdio(t *testing.T) {
	td := startTestDaemon(t, "")
	toServer, agentOut := io.Pipe()
	agentIn, fromServer := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var stderr testkit.LogBuffer
	go func() {
		done <- cli.Run(ctx, cli.Build{}, []string{"mcp", "--config", td.cfgPath}, toServer, fromServer, &stderr)
		fromServer.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop-agent", Version: "1"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: agentIn, Writer: agentOut}, nil)
	if err != nil {
		t.Fatalf("connect to `blueline mcp`: %v (stderr %s)", err, stderr.String())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 9 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	td.inbound(mainLine, alice, "are you an agent?")
	read, errText := mcpCall(t, cs, "read_messages", map[string]any{"line": mainLine, "chat": alice})
	if errText != "" || !strings.Contains(fmt.Sprint(read["messages"]), "are you an agent?") {
		t.Fatalf("read_messages: %v %s", read, errText)
	}
	sent, errText := mcpCall(t, cs, "send_message", map[string]any{"line": mainLine, "to": alice, "text": "I am"})
	if errText != "" || sent["status"] != "pending" {
		t.Fatalf("send_message: %v %s", sent, errText)
	}
	// The reply comes before the agent waits: from the cursor read_messages
	// gave, the wait misses nothing in between, and skips the agent's own.
	key := td.key()
	testkit.Eventually(t, 10*time.Second, func() bool {
		return td.call("GET", "/v1/outbox?id="+sent["id"].(string), key, nil).Body["status"] == "sent"
	})
	td.inbound(mainLine, alice, "nice to meet you")
	got, errText := mcpCall(t, cs, "wait_for_message", map[string]any{"line": mainLine, "chat": alice, "cursor": read["wait_cursor"], "timeout_seconds": 20})
	msg, _ := got["message"].(map[string]any)
	if errText != "" || msg["text"] != "nice to meet you" || msg["is_from_me"] != false {
		t.Fatalf("wait_for_message: %v %s, want the contact's reply, not the agent's own", got, errText)
	}
	cs.Close()
	agentOut.Close()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("`blueline mcp` exited %d: %s", code, stderr.String())
	}
}
