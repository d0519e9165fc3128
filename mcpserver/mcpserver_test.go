package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

const (
	mainLine  = daemontest.MainLine
	plainLine = daemontest.PlainLine
	alice     = daemontest.Alice
	bob       = daemontest.Bob
)

// testDaemon is a daemon on the simulated network, on a loopback port of
// its own, until the test ends (or Stop: see daemontest).
type testDaemon struct {
	*daemontest.Daemon
	t *testing.T
}

func startDaemon(t *testing.T) *testDaemon {
	t.Helper()
	d := daemontest.Start(t, "")
	return &testDaemon{Daemon: d, t: t}
}

// key creates an API key: scopes "" is all, lines none is every line.
func (td *testDaemon) key(scopes string, lines ...string) string {
	td.t.Helper()
	return td.Key(api.KeyRequest{Label: "agent", Scopes: scopes, Lines: lines})
}

// bearer adds an API key to each request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// httpAgent is an MCP client of the daemon's /mcp endpoint with key.
// progress, when not nil, counts the progress notifications it gets.
func (td *testDaemon) httpAgent(key string, progress *atomic.Int32) *mcp.ClientSession {
	td.t.Helper()
	var opts *mcp.ClientOptions
	if progress != nil {
		opts = &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) }}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	cs, err := c.Connect(td.t.Context(), &mcp.StreamableClientTransport{
		Endpoint: td.URL() + mcpserver.Path, HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		td.t.Fatal(err)
	}
	td.t.Cleanup(func() { cs.Close() })
	return cs
}

// stdioAgent is an MCP client of the server `blueline mcp` runs: the same
// builder, over the admin socket as the host's operator, on an in-memory
// transport instead of standard input and output.
func (td *testDaemon) stdioAgent(opts mcpserver.Options) *mcp.ClientSession {
	td.t.Helper()
	api := client.New(adminsock.BaseURL, client.WithHTTPClient(td.Admin().HTTPClient()))
	opts.Client = func(*mcp.RequestExtra) (*client.Client, error) { return api, nil }
	srv := mcpserver.New(opts)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(td.t.Context(), st, nil)
	if err != nil {
		td.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(td.t.Context(), ct, nil)
	if err != nil {
		td.t.Fatal(err)
	}
	td.t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

// call calls a tool that must succeed and decodes its structured result.
func call[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) T {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	var out T
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %s: %v", name, data, err)
	}
	return out
}

// toolError calls a tool that must fail and returns its message.
func toolError(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s succeeded: %s", name, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var toolNames = []string{"add_group_participant", "block_contact", "cancel_outbox_item", "chats_needing_reply", "check_availability", "create_group", "diagnose", "edit_message", "get_outbox_item", "leave_group",
	"list_blocked", "list_chats", "list_lines", "mark_read", "react", "read_messages", "remove_group_participant", "rename_group", "search_messages", "send_message", "set_typing", "unblock_contact", "unsend_message", "wait_for_message", "wait_for_outbox_item",
	"wait_for_self_message"}

// TestConversation holds a conversation over both transports: the agent
// lists tools and lines, reads the chat the contact opened, replies, and
// waits for the contact's answer, which it gets, and not its own message.
func TestConversation(t *testing.T) {
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			td := startDaemon(t)
			var cs *mcp.ClientSession
			if transport == "http" {
				cs = td.httpAgent(td.key(""), nil)
			} else {
				cs = td.stdioAgent(mcpserver.Options{})
			}
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
				if tool.Name == "send_message" && !strings.Contains(tool.Description, "contact_has_not_messaged") {
					t.Errorf("send_message's description lacks the contact-first rule: %s", tool.Description)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, toolNames) {
				t.Fatalf("tools %v, want %v", names, toolNames)
			}

			lines := call[mcpserver.ListLinesOutput](t, cs, "list_lines", map[string]any{})
			if !slices.ContainsFunc(lines.Lines, func(l api.Line) bool { return l.Handle == mainLine }) {
				t.Fatalf("lines %+v lack %s", lines.Lines, mainLine)
			}

			first := td.Inbound(mainLine, alice, "are you open on sunday?")
			chats := call[mcpserver.ListChatsOutput](t, cs, "list_chats", map[string]any{"line": mainLine})
			if len(chats.Chats) != 1 || chats.Chats[0].ID != first.ChatID || !chats.Chats[0].HasReceivedInbound {
				t.Fatalf("chats %+v", chats.Chats)
			}
			read := call[mcpserver.ReadMessagesOutput](t, cs, "read_messages", map[string]any{"line": mainLine, "chat": alice})
			if len(read.Messages) != 1 || read.Messages[0].ID != first.ID || read.WaitCursor == "" {
				t.Fatalf("read %+v", read)
			}

			sent := call[mcpserver.Outbox](t, cs, "send_message", map[string]any{
				"line": mainLine, "to": alice, "text": "yes, 10 to 4", "reply_to": first.ID})
			if sent.Status != client.StatusPending || !strings.HasPrefix(sent.ID, "obx_") {
				t.Fatalf("sent %+v", sent)
			}

			// The agent waits from its read: the message it read is not
			// news, its own reply is not the contact's, the answer is.
			type waited struct {
				out mcpserver.WaitOutput
				err error
			}
			got := make(chan waited, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{
					"line": mainLine, "chat": alice, "timeout_seconds": 60, "cursor": read.WaitCursor}})
				var w waited
				switch {
				case err != nil:
					w.err = err
				case res.IsError:
					w.err = fmt.Errorf("tool error: %s", text(res))
				default:
					data, _ := json.Marshal(res.StructuredContent)
					w.err = json.Unmarshal(data, &w.out)
				}
				got <- w
			}()
			testkit.Eventually(t, 10*time.Second, func() bool {
				item := call[mcpserver.Outbox](t, cs, "get_outbox_item", map[string]any{"id": sent.ID})
				return item.Status == client.StatusSent
			})
			answer := td.Inbound(mainLine, alice, "great, see you then")
			var w waited
			select {
			case w = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("wait_for_message did not return the answer")
			}
			if w.err != nil {
				t.Fatal(w.err)
			}
			if w.out.TimedOut || w.out.Message == nil || w.out.Message.ID != answer.ID || w.out.Message.IsFromMe ||
				w.out.Message.Text == nil || *w.out.Message.Text != "great, see you then" {
				t.Fatalf("waited %+v, want the contact's answer %s", w.out, answer.ID)
			}

			// Waiting on from there, nothing new: a clean timeout, with a
			// cursor to go on from.
			again := call[mcpserver.WaitOutput](t, cs, "wait_for_message", map[string]any{
				"line": mainLine, "chat": alice, "timeout_seconds": 1, "cursor": w.out.Cursor})
			if !again.TimedOut || again.Message != nil || again.Cursor == "" {
				t.Fatalf("second wait %+v, want a timeout", again)
			}
			// A message that arrives between two waits is not missed.
			between := td.Inbound(mainLine, alice, "oh and one more thing")
			third := call[mcpserver.WaitOutput](t, cs, "wait_for_message", map[string]any{
				"line": mainLine, "timeout_seconds": 10, "cursor": again.Cursor})
			if third.Message == nil || third.Message.ID != between.ID {
				t.Fatalf("third wait %+v, want %s", third, between.ID)
			}

			if transport == "http" {
				// Reactions, typing and receipts go through on a line
				// with advanced features.
				call[mcpserver.Outbox](t, cs, "react", map[string]any{"line": mainLine, "chat": alice, "message_id": answer.ID, "type": "love"})
				call[mcpserver.Outbox](t, cs, "set_typing", map[string]any{"line": mainLine, "chat": alice})
				call[mcpserver.Outbox](t, cs, "mark_read", map[string]any{"line": mainLine, "chat": alice})
				if msg := toolError(t, cs, "react", map[string]any{"line": mainLine, "chat": alice, "message_id": answer.ID, "type": "wave"}); !strings.Contains(msg, "type") {
					t.Errorf("an unknown tapback: %s", msg)
				}
			}
		})
	}
}

// TestRulesAreTheAPIs: what the API refuses comes back as a tool error
// with the API's code and message.
func TestRulesAreTheAPIs(t *testing.T) {
	td := startDaemon(t)
	td.Inbound(mainLine, alice, "hi")

	all := td.httpAgent(td.key(""), nil)
	if msg := toolError(t, all, "send_message", map[string]any{"line": mainLine, "to": bob, "text": "hello?"}); !strings.Contains(msg, "contact_has_not_messaged") {
		t.Errorf("contact-first: %s", msg)
	}
	if msg := toolError(t, all, "send_message", map[string]any{"line": mainLine, "to": alice}); !strings.Contains(msg, "text") {
		t.Errorf("nothing to send: %s", msg)
	}

	readOnly := td.httpAgent(td.key("lines:read,chats:read,messages:read"), nil)
	call[mcpserver.ReadMessagesOutput](t, readOnly, "read_messages", map[string]any{"line": mainLine, "chat": alice})
	if msg := toolError(t, readOnly, "send_message", map[string]any{"line": mainLine, "to": alice, "text": "hi"}); !strings.Contains(msg, "insufficient_scope") {
		t.Errorf("no messages:write: %s", msg)
	}

	plainOnly := td.httpAgent(td.key("", plainLine), nil)
	if msg := toolError(t, plainOnly, "read_messages", map[string]any{"line": mainLine, "chat": alice}); !strings.Contains(msg, "line_not_accessible") {
		t.Errorf("another line's chat: %s", msg)
	}
	if msg := toolError(t, plainOnly, "wait_for_message", map[string]any{"line": mainLine, "timeout_seconds": 1}); !strings.Contains(msg, "line_not_accessible") {
		t.Errorf("waiting on another line: %s", msg)
	}
	lines := call[mcpserver.ListLinesOutput](t, plainOnly, "list_lines", map[string]any{})
	if slices.ContainsFunc(lines.Lines, func(l api.Line) bool { return l.Handle == mainLine }) {
		t.Errorf("a key of %s lists %+v", plainLine, lines.Lines)
	}
}

// TestAuthentication: /mcp answers 401 in the API's error shape, before
// any MCP exchange, without a valid key.
func TestAuthentication(t *testing.T) {
	td := startDaemon(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, tc := range []struct{ auth, code string }{
		{"", "missing_api_key"},
		{"Bearer sk_live_nope", "invalid_api_key"},
	} {
		req, _ := http.NewRequest(http.MethodPost, td.URL()+mcpserver.Path, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error     struct{ Type, Code string } `json:"error"`
			RequestID string                      `json:"request_id"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != tc.code || body.Error.Type != "authentication_error" || body.RequestID == "" {
			t.Errorf("auth %q: %d %+v", tc.auth, resp.StatusCode, body)
		}
		if resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("auth %q: no WWW-Authenticate", tc.auth)
		}
	}
	// The SDK's client, without a key, cannot even connect.
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	if cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: td.URL() + mcpserver.Path, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Fatal("connected without a key")
	}
	// A preflight is answered for browser agents.
	req, _ := http.NewRequest(http.MethodOptions, td.URL()+mcpserver.Path, nil)
	req.Header.Set("Origin", "https://agent.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestShutdownEndsWait: a wait in progress answers when the daemon shuts
// down, and the shutdown does not wait for its timeout.
func TestShutdownEndsWait(t *testing.T) {
	td := startDaemon(t)
	td.Inbound(mainLine, alice, "hi")
	var progress atomic.Int32
	cs := td.httpAgent(td.key(""), &progress)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "wait_for_message", Arguments: map[string]any{
			"line": mainLine, "chat": alice, "timeout_seconds": 300}}
		p.SetProgressToken("wait-1")
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return progress.Load() > 0 }) // the wait is under way
	td.Stop()
	select {
	case res := <-done:
		if !res.IsError {
			t.Errorf("the wait answered %s", text(res))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end with the daemon")
	}
}

// TestAttachments: files from the folder allowed (stdio only), file_ IDs,
// URLs on public addresses only unless allowed.
func TestAttachments(t *testing.T) {
	td := startDaemon(t)
	td.Inbound(mainLine, alice, "send me the menu")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "menu.txt"), []byte("soup\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("do not send"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	menu := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "soup\n")
	}))
	defer menu.Close()

	local := td.stdioAgent(mcpserver.Options{AttachDir: dir, AllowPrivateURLs: true})
	send := func(cs *mcp.ClientSession, attachment string) map[string]any {
		return map[string]any{"line": mainLine, "to": alice, "attachment": attachment}
	}
	sent := call[mcpserver.Outbox](t, local, "send_message", send(local, "menu.txt"))
	call[mcpserver.Outbox](t, local, "send_message", send(local, filepath.Join(dir, "menu.txt")))
	call[mcpserver.Outbox](t, local, "send_message", send(local, menu.URL+"/menu.txt"))
	for _, p := range []string{"../secret.txt", secret, "link.txt"} {
		toolError(t, local, "send_message", send(local, p))
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		return call[mcpserver.Outbox](t, local, "get_outbox_item", map[string]any{"id": sent.ID}).Status == client.StatusSent
	})
	read := call[mcpserver.ReadMessagesOutput](t, local, "read_messages", map[string]any{"line": mainLine, "chat": alice, "limit": 2})
	last := read.Messages[len(read.Messages)-1]
	if len(last.Attachments) != 1 {
		t.Fatalf("last message %+v has no attachment", last)
	}

	remote := td.httpAgent(td.key(""), nil)
	if msg := toolError(t, remote, "send_message", send(remote, filepath.Join(dir, "menu.txt"))); !strings.Contains(msg, "local files cannot be attached") {
		t.Errorf("a local path over HTTP: %s", msg)
	}
	if msg := toolError(t, remote, "send_message", send(remote, menu.URL+"/menu.txt")); !strings.Contains(msg, "not a public address") {
		t.Errorf("a loopback URL over HTTP: %s", msg)
	}
	none := td.stdioAgent(mcpserver.Options{})
	toolError(t, none, "send_message", send(none, filepath.Join(dir, "menu.txt")))
}

// TestAttachmentURLFailures: a URL that cannot be fetched is told as such,
// with the kind of reason only.
func TestAttachmentURLFailures(t *testing.T) {
	td := &testDaemon{Daemon: daemontest.Start(t, "[files]\nmax_upload_bytes = 16\n"), t: t}
	td.Inbound(mainLine, alice, "send me the menu")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big.txt":
			io.WriteString(w, strings.Repeat("soup ", 20))
		case "/cut.txt":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "soup")
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	agent := td.stdioAgent(mcpserver.Options{AllowPrivateURLs: true})
	for url, want := range map[string]string{
		site.URL + "/gone.txt":   "HTTP 404",
		site.URL + "/big.txt":    "too large (",
		site.URL + "/cut.txt":    "the connection was cut off",
		closed.URL + "/menu.txt": "connection refused",
	} {
		msg := toolError(t, agent, "send_message", map[string]any{"line": mainLine, "to": alice, "attachment": url})
		if !strings.HasPrefix(msg, "attachment: the URL could not be fetched: "+want) || strings.Contains(msg, "127.0.0.1") {
			t.Errorf("%s: %q, want the reason %q and no address", url, msg, want)
		}
	}
}

// wait_for_message wakes on live messages of known senders, whatever the
// key, unless it asks for catch-up news and filtered chats too.
func TestWaitWakesOnLiveKnownSenders(t *testing.T) {
	td := startDaemon(t)
	cs := td.stdioAgent(mcpserver.Options{})
	sim := func(req api.SimInbound) api.Message {
		t.Helper()
		req.Line = mainLine
		var m api.Message
		if err := td.Admin().Do(t.Context(), http.MethodPost, "/sim/inbound", req, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	td.Inbound(mainLine, alice, "hello")
	read := call[mcpserver.ReadMessagesOutput](t, cs, "read_messages", map[string]any{"line": mainLine, "chat": alice})
	late := sim(api.SimInbound{From: alice, Text: "sent while Blueline was down", Late: "2h"})
	stranger := sim(api.SimInbound{From: bob, Text: "who is this?", UnknownSender: true})
	live := td.Inbound(mainLine, alice, "anyone there?")

	for _, c := range []struct {
		args    map[string]any
		want    string
		arrival string
	}{
		{map[string]any{}, live.ID, api.ArrivalLive},
		{map[string]any{"include_catch_up": true}, late.ID, api.ArrivalCatchUp},
		{map[string]any{"include_filtered": true}, stranger.ID, api.ArrivalLive},
	} {
		c.args["line"], c.args["timeout_seconds"], c.args["cursor"] = mainLine, 10, read.WaitCursor
		w := call[mcpserver.WaitOutput](t, cs, "wait_for_message", c.args)
		if w.Message == nil || w.Message.ID != c.want || w.Arrival != c.arrival {
			t.Errorf("wait %v: %+v (%s), want %s (%s)", c.args, w.Message, w.Arrival, c.want, c.arrival)
		}
	}
}
