// The Go client (the module in client/) against a real daemon. The
// client module imports nothing of the daemon's, so its tests that need
// one live here, in the daemon's module.
package goclient_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// Handles of the test configuration.
const (
	sandboxLine = daemontest.SandboxLine
	mainLine    = daemontest.MainLine // advanced features
	plainLine   = daemontest.PlainLine
	alice       = daemontest.Alice
	bob         = daemontest.Bob
	carol       = daemontest.Carol
)

// testDaemon is a real daemon on the simulated network, on a loopback
// port, over a temporary data folder (see daemontest).
type testDaemon struct{ *daemontest.Daemon }

func startDaemon(t *testing.T, extra string) *testDaemon {
	t.Helper()
	return &testDaemon{daemontest.Start(t, extra)}
}

// key creates an API key through the admin socket: scopes "" is all.
func (td *testDaemon) key(scopes, owner string) string {
	td.T().Helper()
	return td.Key(api.KeyRequest{Scopes: scopes, Owner: owner})
}

// client is a client of the daemon with key.
func (td *testDaemon) client(key string) *client.Client {
	return client.New(td.URL(), client.WithAPIKey(key))
}

// waitSent polls an outbox item until it is sent.
func waitSent(t *testing.T, c *client.Client, id string) *api.OutboxItem {
	t.Helper()
	var item *api.OutboxItem
	testkit.Eventually(t, 10*time.Second, func() bool {
		var err error
		if item, err = c.Outbox.Get(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if item.Status == client.StatusFailed {
			t.Fatalf("outbox item %s failed: %v", id, *item.Error)
		}
		return item.Status == client.StatusSent
	})
	return item
}

// collect drains an iterator.
func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// apiErr asserts that err is an *Error of status and code, and returns it.
func apiErr(t *testing.T, err error, kind error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *client.Error", err, err)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("error %d %s, want %d %s: %v", e.Status, e.Code, status, code, e)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("errors.Is(%v, %v) is false", err, kind)
	}
	for _, other := range []error{client.ErrNotFound, client.ErrAuthentication, client.ErrPermission, client.ErrRateLimit, client.ErrInvalidRequest} {
		if other != kind && errors.Is(err, other) {
			t.Fatalf("errors.Is(%v, %v) is true too", err, other)
		}
	}
	if e.RequestID == "" {
		t.Errorf("error has no request ID: %+v", e)
	}
	return e
}

func TestLinesAndChats(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()

	lines, err := c.Lines.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var handles []string
	for _, l := range lines {
		handles = append(handles, l.Handle)
		if l.Handle == mainLine && (!l.AdvancedFeatures || l.Label == nil || *l.Label != "Main line") {
			t.Errorf("main line: %+v", l)
		}
	}
	for _, h := range []string{sandboxLine, mainLine, plainLine} {
		if !slices.Contains(handles, h) {
			t.Errorf("lines %v lack %s", handles, h)
		}
	}

	// Three chats, two a page: the iterator follows the cursor.
	for _, from := range []string{alice, bob, carol} {
		td.Inbound(mainLine, from, "hello from "+from)
	}
	page, err := c.Chats.ListPage(ctx, client.ChatListParams{From: mainLine, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || !page.HasMore || client.NextCursor(page) == "" {
		t.Fatalf("first page of chats: %+v", page)
	}
	chats := collect(t, c.Chats.List(ctx, client.ChatListParams{From: mainLine, Limit: 2}))
	var ids []string
	for i, ch := range chats {
		ids = append(ids, ch.Identifier)
		if i > 0 && *ch.LastMessageAt > *chats[i-1].LastMessageAt {
			t.Errorf("chats not most recent first: %+v", chats)
		}
	}
	if slices.Sort(ids); !slices.Equal(ids, []string{alice, bob, carol}) {
		t.Errorf("chats %v", ids)
	}
	// Starting from a page's cursor gives the rest.
	rest := collect(t, c.Chats.List(ctx, client.ChatListParams{From: mainLine, Limit: 2, Cursor: client.NextCursor(page)}))
	if len(rest) != 1 || rest[0].ID != chats[2].ID {
		t.Errorf("chats after the first page: %+v", rest)
	}
	// Breaking out of the loop stops fetching.
	n := 0
	for _, err := range c.Chats.List(ctx, client.ChatListParams{From: mainLine, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("loop ran %d times", n)
	}
}

func TestMessages(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()

	// Contact-first: the line may not write first.
	_, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "hi"})
	if e := apiErr(t, err, client.ErrPermission, 403, "contact_has_not_messaged"); e.Param != "to" {
		t.Errorf("param %q", e.Param)
	}

	first := td.Inbound(mainLine, alice, "one")
	td.Inbound(mainLine, alice, "two")
	sent, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "three", ReplyTo: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Status != client.StatusPending || !strings.HasPrefix(sent.ID, "obx_") || sent.Replayed {
		t.Fatalf("send answered %+v", sent)
	}
	item := waitSent(t, c, sent.ID)
	if item.CompletedAt == nil {
		t.Errorf("sent item without completed_at: %+v", item)
	}
	td.Inbound(mainLine, alice, "four")

	msgs := collect(t, c.Messages.List(ctx, client.MessageListParams{From: mainLine, To: alice, Limit: 3}))
	var texts []string
	for _, m := range msgs {
		texts = append(texts, *m.Text)
	}
	if want := []string{"four", "three", "two", "one"}; !slices.Equal(texts, want) {
		t.Fatalf("messages %v, want %v", texts, want)
	}
	ours := msgs[1]
	if !ours.IsFromMe || ours.OutboxID == nil || *ours.OutboxID != sent.ID || ours.ReplyToGUID == nil || *ours.ReplyToGUID != first.GUID {
		t.Errorf("sent message %+v", ours)
	}

	// One page at a time, with its cursor.
	page, err := c.Messages.ListPage(ctx, client.MessageListParams{From: mainLine, To: alice, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	page2, err := c.Messages.ListPage(ctx, client.MessageListParams{From: mainLine, To: alice, Limit: 3, Cursor: client.NextCursor(page)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 3 || len(page2.Data) != 1 || page2.HasMore || client.NextCursor(page2) != "" {
		t.Errorf("pages of %d and %d messages, second has_more %v", len(page.Data), len(page2.Data), page2.HasMore)
	}
	// The chat's ID works as to.
	byID := collect(t, c.Messages.List(ctx, client.MessageListParams{From: mainLine, To: first.ChatID}))
	if len(byID) != 4 {
		t.Errorf("%d messages by chat ID", len(byID))
	}
}

func TestFilesAndAudio(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	td.Inbound(mainLine, alice, "send me the picture")

	content := []byte("\x89PNG not really a picture")
	f, err := c.Files.Upload(ctx, "café menu.png", bytes.NewReader(content), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.ID, "file_") || f.Filename == nil || *f.Filename != "café menu.png" || f.MimeType != "image/png" || f.Size != int64(len(content)) || f.URL == "" {
		t.Fatalf("upload answered %+v", f)
	}
	link, err := c.Files.Get(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if link.ID != f.ID || !strings.Contains(link.URL, "/files/"+f.ID+"?") || link.RequestID == "" {
		t.Errorf("file URL %+v", link)
	}
	rc, err := c.Files.Download(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("downloaded %q, %v", got, err)
	}
	_, err = c.Files.Get(ctx, "file_1")
	if e := apiErr(t, err, client.ErrNotFound, 404, "file_not_found"); e.Param != "id" {
		t.Errorf("param %q", e.Param)
	}
	_, err = c.Files.Upload(ctx, "empty.txt", bytes.NewReader(nil), "")
	apiErr(t, err, client.ErrInvalidRequest, 400, "empty_file")

	sent, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Attachments: []string{f.ID}})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, sent.ID)
	page, err := c.Messages.ListPage(ctx, client.MessageListParams{From: mainLine, To: alice, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m := page.Data[0]; len(m.Attachments) != 1 || m.Text != nil || *m.Attachments[0].Filename != "café menu.png" {
		t.Errorf("message with the file: %+v", m)
	}

	// Audio messages, under both names.
	memo, err := c.Files.Upload(ctx, "memo.m4a", strings.NewReader("audio bytes"), "audio/mp4")
	if err != nil {
		t.Fatal(err)
	}
	audio, err := c.AudioMessages.Send(ctx, client.AudioMessageSendParams{From: mainLine, To: alice, AudioMessage: memo.ID})
	if err != nil {
		t.Fatal(err)
	}
	note, err := c.VoiceNotes.Send(ctx, client.VoiceNoteSendParams{From: mainLine, To: alice, VoiceNote: memo.ID})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, audio.ID)
	waitSent(t, c, note.ID)
	page, err = c.Messages.ListPage(ctx, client.MessageListParams{From: mainLine, To: alice, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Data {
		if !m.IsAudioMessage || len(m.Attachments) != 1 {
			t.Errorf("audio message %+v", m)
		}
	}
	// An audio message needs a line with advanced features.
	td.Inbound(plainLine, alice, "hi plain")
	_, err = c.AudioMessages.Send(ctx, client.AudioMessageSendParams{From: plainLine, To: alice, AudioMessage: memo.ID})
	apiErr(t, err, client.ErrInvalidRequest, 400, "advanced_features_required")
}

func TestReactionsTypingReceipts(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	in := td.Inbound(mainLine, alice, "like this")

	r, err := c.Reactions.Send(ctx, client.ReactionSendParams{From: mainLine, To: alice, MessageID: in.ID, Type: client.ReactionLove})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	recs, err := c.Reactions.List(ctx, in.GUID) // a GUID works as well as the ID
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Type != "love" || !recs[0].IsFromMe || !recs[0].Added || recs[0].MessageID != in.ID {
		t.Fatalf("reactions %+v", recs)
	}
	r, err = c.Reactions.Send(ctx, client.ReactionSendParams{From: mainLine, To: alice, MessageID: in.ID, Type: client.ReactionLove, Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)
	if recs, err = c.Reactions.List(ctx, in.ID); err != nil || len(recs) != 1 || recs[0].Added {
		t.Fatalf("reactions after the removal: %+v, %v", recs, err)
	}
	_, err = c.Reactions.Send(ctx, client.ReactionSendParams{From: mainLine, To: alice, MessageID: in.ID, Type: "wow"})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value"); e.Param != "type" {
		t.Errorf("param %q", e.Param)
	}

	chat := client.ChatRef{From: mainLine, To: alice}
	ty, err := c.Typing.Send(ctx, client.TypingSendParams{From: mainLine, To: alice})
	if err != nil {
		t.Fatal(err)
	}
	if item := waitSent(t, c, ty.ID); item.MaxAttempts != 1 {
		t.Errorf("typing item %+v", item)
	}
	inds, err := c.Typing.List(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(inds, func(i api.Indicator) bool { return i.Handle == mainLine && i.IsTyping }) {
		t.Errorf("typing indicators %+v", inds)
	}
	ty, err = c.Typing.Send(ctx, client.TypingSendParams{From: mainLine, To: alice, State: client.TypingOff})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, ty.ID)
	if inds, err = c.Typing.List(ctx, chat); err != nil || slices.ContainsFunc(inds, func(i api.Indicator) bool { return i.IsTyping }) {
		t.Errorf("typing indicators after off: %+v, %v", inds, err)
	}

	rc, err := c.Receipts.Send(ctx, client.ReceiptSendParams{From: mainLine, To: alice})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, rc.ID)
	receipts, err := c.Receipts.List(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(receipts, func(r api.Receipt) bool { return r.Handle == mainLine && r.LastReadAt > 0 && r.ChatID == in.ChatID }) {
		t.Errorf("receipts %+v", receipts)
	}
}

func TestWebhooksAndSandbox(t *testing.T) {
	td := startDaemon(t, "")
	ctx := t.Context()
	c := td.client(td.key("", ""))

	hook, err := c.Webhooks.Create(ctx, client.WebhookCreateParams{From: plainLine, URL: "https://93.184.215.14/hook",
		Events: []string{api.EventMessageReceived, api.EventReactionAdded}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hook.ID, "wh_") || !strings.HasPrefix(hook.Secret, "whsec_") || !hook.IsActive || len(hook.LineIDs) != 1 {
		t.Fatalf("webhook %+v", hook)
	}
	hooks, err := c.Webhooks.List(ctx, plainLine)
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 1 || hooks[0].ID != hook.ID || hooks[0].Secret != hook.Secret {
		t.Fatalf("webhooks %+v", hooks)
	}
	del, err := c.Webhooks.Delete(ctx, hook.ID)
	if err != nil || del.ID != hook.ID || !del.Deleted || del.RequestID == "" {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	if hooks, err = c.Webhooks.List(ctx, plainLine); err != nil || len(hooks) != 0 {
		t.Fatalf("webhooks after delete: %+v, %v", hooks, err)
	}
	_, err = c.Webhooks.Delete(ctx, hook.ID)
	apiErr(t, err, client.ErrNotFound, 404, "webhook_not_found")
	_, err = c.Webhooks.Create(ctx, client.WebhookCreateParams{From: plainLine, URL: "https://127.0.0.1/hook", Events: []string{api.EventMessageReceived}})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value"); e.Param != "url" {
		t.Errorf("param %q", e.Param)
	}

	// The sandbox needs a key with an owner.
	_, err = c.Sandbox.Get(ctx)
	apiErr(t, err, client.ErrPermission, 403, "sandbox_requires_owner")
	owner := td.client(td.key("messages:read", "ann@example.com"))
	sb, err := owner.Sandbox.Get(ctx)
	if err != nil || sb.Status != client.SandboxMissing || sb.SandboxLineHandle != sandboxLine {
		t.Fatalf("sandbox before start: %+v, %v", sb, err)
	}
	sb, err = owner.Sandbox.Start(ctx)
	if err != nil || sb.Status != client.SandboxPending || sb.ActivationCode == nil {
		t.Fatalf("started sandbox: %+v, %v", sb, err)
	}
	td.Inbound(sandboxLine, alice, "my code is "+*sb.ActivationCode)
	sb, err = owner.Sandbox.Get(ctx)
	if err != nil || sb.Status != client.SandboxActive || sb.ContactIdentifier == nil || *sb.ContactIdentifier != alice || sb.Usage.Limit == 0 {
		t.Fatalf("activated sandbox: %+v, %v", sb, err)
	}
}

func TestErrors(t *testing.T) {
	td := startDaemon(t, "")
	ctx := t.Context()
	c := td.client(td.key("", ""))

	_, err := c.Outbox.Get(ctx, "obx_1")
	if e := apiErr(t, err, client.ErrNotFound, 404, "outbox_item_not_found"); e.Param != "id" || e.Type != "not_found_error" || e.Message == "" {
		t.Errorf("not found: %+v", e)
	}
	_, err = c.Reactions.List(ctx, "msg_1")
	if e := apiErr(t, err, client.ErrNotFound, 404, "message_not_found"); e.Param != "message_id" {
		t.Errorf("param %q", e.Param)
	}

	_, err = td.client("sk_live_nope").Lines.List(ctx)
	apiErr(t, err, client.ErrAuthentication, 401, "invalid_api_key")
	_, err = client.New(td.URL()).Lines.List(ctx)
	apiErr(t, err, client.ErrAuthentication, 401, "missing_api_key")

	reader := td.client(td.key("messages:read", ""))
	_, err = reader.Lines.List(ctx)
	apiErr(t, err, client.ErrPermission, 403, "insufficient_scope")

	_, err = c.Messages.ListPage(ctx, client.MessageListParams{From: mainLine})
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "missing_required_parameter"); e.Param != "to" || e.Type != "invalid_request_error" {
		t.Errorf("bad request: %+v", e)
	}
	// The iterator yields the error once, and stops.
	n := 0
	for _, err := range c.Chats.List(ctx, client.ChatListParams{From: mainLine, Limit: 500}) {
		n++
		if e := apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value"); e.Param != "limit" {
			t.Errorf("param %q", e.Param)
		}
	}
	if n != 1 {
		t.Errorf("iterator yielded %d times", n)
	}
	_, err = c.Messages.Send(ctx, client.MessageSendParams{From: "+15559999999", To: alice, Text: "x"})
	apiErr(t, err, client.ErrNotFound, 404, "line_not_found")
}

func TestRateLimit(t *testing.T) {
	td := startDaemon(t, "[limits]\nrequests_per_hour = 2\n")
	c := td.client(td.key("", ""))
	for range 2 {
		if _, err := c.Lines.List(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Lines.List(t.Context())
	e := apiErr(t, err, client.ErrRateLimit, 429, "rate_limit_exceeded")
	// Two an hour: the next one in about half an hour.
	if e.RetryAfter < 20*time.Minute || e.RetryAfter > time.Hour {
		t.Errorf("RetryAfter %s", e.RetryAfter)
	}
}

// An answer that is not in the API's error shape still makes an *Error.
func TestErrorWithoutJSON(t *testing.T) {
	var ua string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua = r.Header.Get("User-Agent")
		w.Header().Set("X-Request-Id", "req_proxy")
		switch r.URL.Path {
		case "/v1/lines":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		default:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, client.WithUserAgent("test-agent/2"), client.WithHTTPClient(srv.Client()))

	_, err := c.Lines.List(t.Context())
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 502 || !strings.Contains(e.Message, "bad gateway") || e.RequestID != "req_proxy" {
		t.Fatalf("502: %#v", err)
	}
	if errors.Is(err, client.ErrInvalidRequest) || ua != "test-agent/2" {
		t.Errorf("a 502 is an invalid request, or user agent %q", ua)
	}
	_, err = c.Outbox.Get(t.Context(), "obx_1")
	if !errors.As(err, &e) || e.Status != 418 || e.Message != "I'm a teapot" || e.RetryAfter != 7*time.Second || !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("418: %#v", err)
	}
}

func TestIdempotency(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	td.Inbound(mainLine, alice, "hi")

	p := client.MessageSendParams{From: mainLine, To: alice, Text: "once", IdempotencyKey: "order-42"}
	first, err := c.Messages.Send(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Messages.Send(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || !again.Replayed || again.ID != first.ID {
		t.Fatalf("first %s (replayed %v), again %s (replayed %v)", first.ID, first.Replayed, again.ID, again.Replayed)
	}
	waitSent(t, c, first.ID)
	msgs := collect(t, c.Messages.List(ctx, client.MessageListParams{From: mainLine, To: alice}))
	if len(msgs) != 2 {
		t.Errorf("%d messages in the chat, want 2 (one sent)", len(msgs))
	}
	// The same key on another request is refused.
	p.Text = "twice"
	_, err = c.Messages.Send(ctx, p)
	if e := apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value"); e.Param != "Idempotency-Key" {
		t.Errorf("param %q", e.Param)
	}
	// Other writes take a key too.
	r1, err := c.Receipts.Send(ctx, client.ReceiptSendParams{From: mainLine, To: alice, IdempotencyKey: "read-1"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Receipts.Send(ctx, client.ReceiptSendParams{From: mainLine, To: alice, IdempotencyKey: "read-1"})
	if err != nil || r2.ID != r1.ID || !r2.Replayed {
		t.Fatalf("receipt replay: %+v, %v", r2, err)
	}
}

func TestSignAndVerifyWebhook(t *testing.T) {
	const secret = "whsec_test"
	now := time.UnixMilli(1795434708300)
	ev := api.Event{Type: api.EventMessageReceived,
		Data: []byte(`{"id":"msg_1","chat_id":"cht_1","guid":"G","sender":"+15551230001","text":"hi","attachments":[],"is_from_me":false,"sent_at":1,"line_handle":"+15550000001"}`)}
	body, header, err := client.SignWebhook(secret, ev, now)
	if err != nil {
		t.Fatal(err)
	}
	if header.Get(client.HeaderTimestamp) != "1795434708300" || !strings.HasPrefix(header.Get(client.HeaderDeliveryID), "dlv_") ||
		header.Get("Content-Type") != "application/json" || len(header.Get(client.HeaderSignature)) != 64 {
		t.Fatalf("headers %v", header)
	}
	// The daemon's own verifier accepts what SignWebhook makes.
	if err := signature.Verify(secret, body, header.Get(client.HeaderSignature), header.Get(client.HeaderTimestamp), now); err != nil {
		t.Fatalf("signature.Verify: %v", err)
	}
	got, err := client.VerifyWebhook(secret, header, body, 0, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != ev.Type || got.Timestamp != now.UnixMilli() || got.DeliveryID != header.Get(client.HeaderDeliveryID) {
		t.Errorf("event %+v", got)
	}
	m, err := got.Message()
	if err != nil || m.ID != "msg_1" || *m.Text != "hi" || m.LineHandle != "+15550000001" {
		t.Errorf("message data %+v, %v", m, err)
	}
	if _, err := got.Reaction(); err == nil {
		t.Error("a message event decoded as a reaction")
	}

	// As the reference SDK: the body's timestamp is enough.
	noTS := header.Clone()
	noTS.Del(client.HeaderTimestamp)
	if _, err := client.VerifyWebhook(secret, noTS, body, 0, now); err != nil {
		t.Errorf("without the timestamp header: %v", err)
	}

	tampered := bytes.Replace(body, []byte(`"hi"`), []byte(`"ho"`), 1)
	otherTS := header.Clone()
	otherTS.Set(client.HeaderTimestamp, strconv.FormatInt(now.UnixMilli()+1, 10))
	noSig := header.Clone()
	noSig.Del(client.HeaderSignature)
	for name, tc := range map[string]struct {
		secret string
		header http.Header
		body   []byte
		tol    time.Duration
		now    time.Time
	}{
		"tampered body":       {secret, header, tampered, 0, now},
		"wrong secret":        {"whsec_other", header, body, 0, now},
		"other timestamp":     {secret, otherTS, body, 0, now},
		"no signature":        {secret, noSig, body, 0, now},
		"too old":             {secret, header, body, 0, now.Add(6 * time.Minute)},
		"too old, tolerance":  {secret, header, body, 30 * time.Second, now.Add(time.Minute)},
		"from the future":     {secret, header, body, 0, now.Add(-6 * time.Minute)},
		"not JSON":            {secret, header, []byte("hello"), 0, now},
		"empty body":          {secret, header, nil, 0, now},
		"signature uppercase": {secret, http.Header{client.HeaderSignature: {strings.ToUpper(header.Get(client.HeaderSignature))}}, body, 0, now},
	} {
		if _, err := client.VerifyWebhook(tc.secret, tc.header, tc.body, tc.tol, tc.now); !errors.Is(err, client.ErrSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Re-signing keeps the delivery ID and rewrites the timestamp.
	later := now.Add(time.Hour)
	body2, header2, err := client.SignWebhook("whsec_next", *got, later)
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.VerifyWebhook("whsec_next", header2, body2, 0, later)
	if err != nil || again.DeliveryID != got.DeliveryID || again.Timestamp != later.UnixMilli() || !bytes.Equal(again.Data, got.Data) {
		t.Errorf("re-signed: %+v, %v", again, err)
	}
}

// A real delivery from the daemon to an HTTPS receiver verifies.
func TestWebhookDelivery(t *testing.T) {
	rc := apitest.NewReceiver(t, true, nil)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	td := startDaemon(t, "[webhooks]\nallow_private_networks = true\nca_file = "+strconv.Quote(ca)+"\n")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	hook, err := c.Webhooks.Create(ctx, client.WebhookCreateParams{From: mainLine, URL: rc.Server.URL + "/hook",
		Events: []string{api.EventMessageReceived, api.EventMessageSent, api.EventReactionAdded}})
	if err != nil {
		t.Fatal(err)
	}

	in := td.Inbound(mainLine, alice, "hello hook")
	sent, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "hello back"})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, sent.ID)
	r, err := c.Reactions.Send(ctx, client.ReactionSendParams{From: mainLine, To: alice, MessageID: in.ID, Type: client.ReactionLike})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, r.ID)

	testkit.Eventually(t, 10*time.Second, func() bool { return len(rc.Requests()) >= 3 })
	events := map[string]*api.Event{}
	for _, h := range rc.Requests() {
		ev, err := client.VerifyWebhook(hook.Secret, h.Header, h.Raw, 0, time.Now())
		if err != nil {
			t.Fatalf("delivery does not verify: %v\n%s", err, h.Raw)
		}
		if ev.DeliveryID == "" || ev.DeliveryID != h.Header.Get(client.HeaderDeliveryID) {
			t.Errorf("delivery ID %q, header %q", ev.DeliveryID, h.Header.Get(client.HeaderDeliveryID))
		}
		events[ev.Type] = ev
		if _, err := client.VerifyWebhook("whsec_wrong", h.Header, h.Raw, 0, time.Now()); !errors.Is(err, client.ErrSignature) {
			t.Errorf("wrong secret: %v", err)
		}
	}
	for _, name := range []string{api.EventMessageReceived, api.EventMessageSent, api.EventReactionAdded} {
		if events[name] == nil {
			t.Fatalf("no %s event among %d deliveries", name, len(rc.Requests()))
		}
	}
	if m, err := events[api.EventMessageReceived].Message(); err != nil || m.ID != in.ID || *m.Text != "hello hook" || m.LineHandle != mainLine {
		t.Errorf("message.received: %+v, %v", m, err)
	}
	if m, err := events[api.EventMessageSent].Message(); err != nil || !m.IsFromMe || m.OutboxID == nil || *m.OutboxID != sent.ID {
		t.Errorf("message.sent: %+v, %v", m, err)
	}
	if rx, err := events[api.EventReactionAdded].Reaction(); err != nil || rx.MessageID != in.ID || rx.Type != "like" || rx.ChatID != in.ChatID {
		t.Errorf("reaction.added: %+v, %v", rx, err)
	}
}
