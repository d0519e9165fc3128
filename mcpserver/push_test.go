package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

// pushAgent is a stdio agent of a server that offers subscriptions with
// its cursor in file; each resource update it is told comes on updates.
func (td *testDaemon) pushAgent(file string, updates chan<- string) *mcp.ClientSession {
	td.t.Helper()
	api := client.New(adminsock.BaseURL, client.WithHTTPClient(td.Admin().HTTPClient()))
	srv := mcpserver.New(mcpserver.Options{CursorFile: file, Client: func(*mcp.RequestExtra) (*client.Client, error) { return api, nil }})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(td.t.Context(), st, nil)
	if err != nil {
		td.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updates <- req.Params.URI },
	}).Connect(td.t.Context(), ct, nil)
	if err != nil {
		td.t.Fatal(err)
	}
	td.t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

func nextUpdate(t *testing.T, updates <-chan string) string {
	t.Helper()
	select {
	case uri := <-updates:
		return uri
	case <-time.After(10 * time.Second):
		t.Fatal("no resource update")
		return ""
	}
}

// TestPush: a host subscribed to a line's needing-reply resource is told
// when a contact writes, and the resource then holds the chat; a message
// that arrives while no server runs is told when one starts again from the
// cursor file: nothing is lost across restarts.
func TestPush(t *testing.T) {
	td := startDaemon(t)
	file := filepath.Join(t.TempDir(), "mcp.cursor")
	uri := "blueline://lines/" + mainLine + "/needing-reply"
	updates := make(chan string, 16)
	cs := td.pushAgent(file, updates)
	init := cs.InitializeResult()
	if init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
		t.Fatalf("capabilities %+v", init.Capabilities)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	first := td.Inbound(mainLine, alice, "are you there?")
	if got := nextUpdate(t, updates); got != uri {
		t.Fatalf("update of %s, want %s", got, uri)
	}
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var nr mcpserver.NeedingReply
	if err := json.Unmarshal([]byte(read.Contents[0].Text), &nr); err != nil {
		t.Fatal(err)
	}
	if len(nr.Chats) != 1 || nr.Chats[0].LastMessage.ID != first.ID || !nr.Chats[0].LastMessage.Untrusted ||
		!strings.Contains(*nr.Chats[0].LastMessage.Text, "are you there?") || !strings.Contains(nr.Note, "untrusted") {
		t.Fatalf("needing reply %s", read.Contents[0].Text)
	}
	// The cursor moves once the host has answered the ping that follows
	// the notification, which may come after the notification is handled.
	testkit.Eventually(t, 10*time.Second, func() bool {
		data, err := os.ReadFile(file)
		return err == nil && strings.TrimSpace(string(data)) != ""
	})
	cs.Close()

	// Written while no server runs: told when one starts again.
	td.Inbound(mainLine, bob, "hello?")
	again := make(chan string, 16)
	cs2 := td.pushAgent(file, again)
	if err := cs2.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if got := nextUpdate(t, again); got != uri {
		t.Fatalf("update after the restart: %s", got)
	}
}
