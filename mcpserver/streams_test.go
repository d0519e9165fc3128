package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// A wait in progress on a key that is revoked ends within a second or
// two, with the API's refusal, rather than at its timeout.
func TestWaitEndsWhenKeyRevoked(t *testing.T) {
	td := startDaemon(t)
	td.Inbound(mainLine, alice, "hi")
	var key api.KeyInfo
	if err := td.Admin().Do(t.Context(), http.MethodPost, "/keys", api.KeyRequest{Label: "agent", Scopes: "all"}, &key); err != nil {
		t.Fatal(err)
	}
	var progress atomic.Int32
	cs := td.httpAgent(key.Secret, &progress)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{"line": mainLine, "chat": alice, "timeout_seconds": 300}}
		p.SetProgressToken("wait-1")
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return progress.Load() > 0 }) // the wait is under way

	revoked := time.Now()
	if err := td.Admin().Do(t.Context(), http.MethodPost, "/keys/revoke", map[string]string{"id": key.ID}, nil); err != nil {
		t.Fatal(err)
	}
	td.Inbound(mainLine, alice, "after the revocation")
	select {
	case res := <-done:
		if !res.IsError || !strings.Contains(text(res), "invalid_api_key") {
			t.Errorf("the wait answered %s, want the revoked key refused", text(res))
		}
		if d := time.Since(revoked); d > 2*time.Second {
			t.Errorf("the wait ended %s after the revocation", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end with its key")
	}
}

// webhooks:read alone does not let an agent read messages by waiting for
// them: the wait needs messages:read too, and says so.
func TestWaitNeedsMessagesRead(t *testing.T) {
	td := startDaemon(t)
	cs := td.httpAgent(td.key("webhooks:read,lines:read"), nil)
	msg := toolError(t, cs, "wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": 1})
	if !strings.Contains(msg, "insufficient_scope") || !strings.Contains(msg, "messages:read") {
		t.Errorf("waiting with webhooks:read alone: %s", msg)
	}
	td.Inbound(mainLine, alice, "hi")
	ok := td.httpAgent(td.key("webhooks:read,messages:read"), nil)
	res, err := ok.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{"line": mainLine, "timeout_seconds": 1}})
	if err != nil || res.IsError {
		t.Errorf("waiting with webhooks:read and messages:read: %v %s", err, text(res))
	}
}
