package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/sse"
	"github.com/blueline-app/blueline/testkit"
)

// The event stream's doors: a stream lives no longer than its key, a key
// holds a few streams at most, each for a while, and a stream shows only
// what the key may read.

// openStream opens GET /v1/events?query with key, for at most 10 s. The
// answer's body is closed when the test ends.
func (e *apiEnv) openStream(key, query string) (*http.Response, *sse.Reader) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/v1/events?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close(); cancel() })
	return resp, sse.NewReader(resp.Body)
}

// refusedStream asks for a stream that must be refused, and returns the
// refusal as apitest reads it (checked against the API document). A stream
// that opens instead is reported with its status alone.
func (e *apiEnv) refusedStream(key, query string) response {
	e.t.Helper()
	if resp, _ := e.openStream(key, query); resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		return response{Status: http.StatusOK}
	}
	return e.call("GET", "/v1/events?"+query, key, nil)
}

// revoke revokes a key by its secret, as `blueline keys revoke` has the
// daemon do.
func (e *apiEnv) revoke(secret string) {
	e.t.Helper()
	sum := sha256.Sum256([]byte(secret))
	k, err := e.db.KeyByHash(context.Background(), sum[:])
	if err == nil {
		err = e.db.RevokeKey(context.Background(), k.ID)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// messageText is the text of a message event's data.
func messageText(t testing.TB, ev sse.Event) string {
	t.Helper()
	var body struct {
		Data struct{ Text string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &body); err != nil {
		t.Fatalf("event %s %s: %v", ev.Name, ev.Data, err)
	}
	return body.Data.Text
}

// A stream ends within a second or two of its key's revocation, and what
// happens after the revocation never comes on it; reconnecting is refused.
func TestStreamEndsWhenKeyRevoked(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	resp, r := e.openStream(key, "event=message.received")
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	e.inbound(mainLine, alice, "before")
	ev, err := r.Next()
	if err != nil || messageText(t, ev) != "before" {
		t.Fatalf("first event: %+v %v", ev, err)
	}

	revoked := time.Now()
	e.revoke(key)
	e.inbound(mainLine, alice, "after the revocation")
	for {
		ev, err := r.Next()
		if err != nil {
			if err != io.EOF {
				t.Errorf("the stream did not end: %v", err)
			}
			break
		}
		t.Errorf("after the revocation the stream sent %s", ev.Data)
	}
	if d := time.Since(revoked); d > 2*time.Second {
		t.Errorf("the stream ended %s after the revocation", d)
	}
	if r := e.refusedStream(key, ""); r.Status != 401 || r.ErrCode() != "invalid_api_key" {
		t.Errorf("reconnecting with the revoked key: %d %s", r.Status, r.Raw)
	}
}

// A key holds at most StreamsPerKey streams: one more is 429
// too_many_streams with Retry-After, in the API's shape, until one ends.
// Other keys are not held back.
func TestStreamsPerKey(t *testing.T) {
	opts := defaultOptions()
	opts.StreamsPerKey = 2
	e := newAPI(t, opts)
	key := e.key(keyOpts{})
	first, _ := e.openStream(key, "")
	second, _ := e.openStream(key, "")
	if first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("streams within the cap: %d %d", first.StatusCode, second.StatusCode)
	}
	r := e.refusedStream(key, "")
	if r.Status != 429 || r.ErrCode() != "too_many_streams" || r.ErrType() != "rate_limit_error" || r.Header.Get("Retry-After") != "30" {
		t.Fatalf("a third stream: %d %s (Retry-After %q)", r.Status, r.Raw, r.Header.Get("Retry-After"))
	}
	if other, _ := e.openStream(e.key(keyOpts{}), ""); other.StatusCode != 200 {
		t.Errorf("another key's stream: %d", other.StatusCode)
	}
	// A stream that ends gives its place back.
	first.Body.Close()
	testkit.Eventually(t, 5*time.Second, func() bool {
		resp, _ := e.openStream(key, "")
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// Each stream ends after StreamLifetime, where it got to (its last id),
// and the Go client follows it again without losing or repeating an
// event, and without reporting a break.
func TestStreamLifetime(t *testing.T) {
	opts := defaultOptions()
	opts.StreamLifetime = 300 * time.Millisecond
	e := newAPI(t, opts)
	key := e.key(keyOpts{})

	resp, r := e.openStream(key, "event=message.received")
	m := e.inbound(mainLine, alice, "within the first stream")
	ev, err := r.Next()
	if err != nil || messageText(t, ev) != "within the first stream" {
		t.Fatalf("event: %+v %v", ev, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after its lifetime the stream gave %v, want its end (io.EOF)", err)
	}
	resp.Body.Close()
	if r.LastID() != ev.ID {
		t.Errorf("the stream ended at id %q, want %q (its last event, %s)", r.LastID(), ev.ID, m.ID)
	}

	var connects atomic.Int32
	c := client.New(e.base, client.WithAPIKey(key), client.WithHTTPClient(&http.Client{Transport: countConnects(&connects)}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range c.Events.Stream(ctx, client.EventStreamParams{Events: []string{api.EventMessageReceived}, After: mustSeq(t, ev.ID)}) {
			if err != nil {
				t.Errorf("the stream yielded %v", err)
				continue
			}
			msg, _ := ev.Message()
			mu.Lock()
			got = append(got, deref(msg.Text))
			mu.Unlock()
		}
	}()
	var want []string
	for i := range 3 {
		// Each after the stream was followed again: the texts straddle
		// its ends.
		n := connects.Load()
		testkit.Eventually(t, 5*time.Second, func() bool { return connects.Load() > n })
		text := "message " + itoa(uint64(i))
		e.inbound(mainLine, alice, text)
		want = append(want, text)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	})
	cancel()
	<-done
	if !slices.Equal(got, want) {
		t.Errorf("across the streams' ends the client got %q, want %q", got, want)
	}
}

func mustSeq(t testing.TB, id string) uint64 {
	t.Helper()
	var n uint64
	if err := json.Unmarshal([]byte(id), &n); err != nil {
		t.Fatalf("event id %q: %v", id, err)
	}
	return n
}

// countConnects counts the answers that open a stream.
func countConnects(n *atomic.Int32) http.RoundTripper {
	return transport(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.StatusCode == 200 {
			n.Add(1)
		}
		return resp, err
	})
}

type transport func(*http.Request) (*http.Response, error)

func (f transport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// eventScope is the read scope each event needs besides webhooks:read, as
// the README's event stream section lists them.
var eventScope = map[string]string{
	api.EventMessageReceived: "messages:read", api.EventMessageSent: "messages:read",
	api.EventMessageFailed: "messages:read", api.EventMessageEdited: "messages:read",
	api.EventMessageUnsent: "messages:read", api.EventMessageDelivered: "messages:read",
	api.EventReactionAdded: "reactions:read", api.EventReactionRemoved: "reactions:read",
	api.EventReceiptRead: "receipts:read", api.EventChatUpdated: "chats:read",
	api.EventContactOptedOut: "chats:read", api.EventContactOptedIn: "chats:read",
	api.EventChatHandoff: "chats:read", api.EventChatLeased: "chats:read", api.EventChatReleased: "chats:read",
	api.EventMessageSelf: "messages:read",
}

// webhooks:read alone reads no message: asking for an event needs its read
// scope too (403 naming it), and the default events leave out those the
// key may not read (403 when that is all of them).
func TestStreamEventScopes(t *testing.T) {
	e := newAPI(t, defaultOptions())
	hooksOnly := e.key(keyOpts{Scopes: []string{"webhooks:read"}})
	for _, name := range api.WebhookEvents {
		scope := eventScope[name]
		if scope == "" {
			t.Fatalf("event %s has no read scope in this test", name)
		}
		r := e.refusedStream(hooksOnly, "event="+name)
		if r.Status != 403 || r.ErrCode() != "insufficient_scope" || r.ErrParam() != "event" || !strings.Contains(string(r.Raw), scope) {
			t.Errorf("%s with webhooks:read alone: %d %s, want 403 insufficient_scope naming %s", name, r.Status, r.Raw, scope)
		}
		if resp, _ := e.openStream(e.key(keyOpts{Scopes: []string{"webhooks:read", scope}}), "event="+name); resp.StatusCode != 200 {
			t.Errorf("%s with webhooks:read and %s: %d", name, scope, resp.StatusCode)
		}
	}
	if r := e.refusedStream(hooksOnly, ""); r.Status != 403 || r.ErrCode() != "insufficient_scope" {
		t.Errorf("the default events with webhooks:read alone: %d %s", r.Status, r.Raw)
	}

	// With reactions:read but not messages:read, the default stream has
	// the reaction to a message, not the message.
	since := time.Now().UnixMilli()
	m := e.inbound(mainLine, alice, "not for this key")
	if _, _, err := e.recv.RecordReaction(context.Background(), bridge.InboundReaction{Line: mainLine, Chat: sim.OneToOne("imessage", alice),
		TargetGUID: m.GUID, Type: "love", Added: true, Sender: alice, SentAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, r := e.openStream(e.key(keyOpts{Scopes: []string{"webhooks:read", "reactions:read"}}), "since="+itoa(uint64(since)))
	ev, err := r.Next()
	if err != nil || ev.Name != api.EventReactionAdded || strings.Contains(ev.Data, "not for this key") {
		t.Errorf("the first event without messages:read: %s %s (%v), want the reaction alone", ev.Name, ev.Data, err)
	}
}

// hostile is what a contact may put in a text, a group's name or a file's
// name to forge events: every line end of SSE, alone and in runs, fields
// after them, the separators of Unicode, and NUL.
var hostile = []string{
	"cr\rdata: forged\r\revent: message.received\r", "lf\ndata: forged\n\n", "crlf\r\nid: 1\r\n\r\n",
	"u2028\u2028and\u2029", "nul\x00", "mixed\n\r\r\n\n:comment\rretry: 1\r",
}

// Whatever a contact writes, in a text, a group's name or a file's name,
// each event of the stream is read (by the specification's parser) as
// exactly one event, whose data holds exactly what was written.
func TestStreamFraming(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	_, r := e.openStream(key, "event=message.received,chat.updated")
	ctx := context.Background()
	group := sim.NewGroup("imessage", "a group", []string{alice, bob})
	type want struct{ event, text, filename, name string }
	var wants []want
	for i, s := range hostile {
		text := s
		if _, err := e.recv.Record(ctx, bridge.Inbound{Line: mainLine, Service: "imessage", Chat: sim.OneToOne("imessage", alice),
			GUID: sim.NewGUID(), Sender: alice, Text: &text, SentAt: time.Now(),
			Attachments: []bridge.File{{Filename: s, MimeType: "image/png"}}}); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want{event: api.EventMessageReceived, text: s, filename: s})
		if i == 0 {
			if _, err := e.recv.Record(ctx, bridge.Inbound{Line: mainLine, Service: "imessage", Chat: group,
				GUID: sim.NewGUID(), Sender: alice, Text: ptr("in the group"), SentAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{event: api.EventMessageReceived, text: "in the group"})
		}
		if _, _, err := e.recv.RecordChatUpdate(ctx, bridge.ChatUpdate{Line: mainLine, Chat: group, GUID: sim.NewGUID(),
			Action: bridge.ChatRenamed, Name: s, By: alice, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want{event: api.EventChatUpdated, name: s})
	}
	for i, w := range wants {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var body struct {
			Event string `json:"event"`
			Data  struct {
				Text        string
				Attachments []struct{ Filename string }
				Name        string // the chat's, on chat.updated
				Change      struct{ Name string }
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &body); err != nil {
			t.Fatalf("event %d (%s): data %q: %v", i, ev.Name, ev.Data, err)
		}
		got := want{event: ev.Name, text: body.Data.Text, name: body.Data.Change.Name}
		if len(body.Data.Attachments) > 0 {
			got.filename = body.Data.Attachments[0].Filename
		}
		if got != w || body.Event != ev.Name || (w.name != "" && body.Data.Name != w.name) {
			t.Errorf("event %d: %+v (chat name %q), want %+v", i, got, body.Data.Name, w)
		}
	}
}
