package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/sse"
	"github.com/blueline-app/blueline/storage"
)

// The event stream, GET /v1/events: what webhooks receive, as it happens,
// over server-sent events, for `blueline listen` and any client that
// cannot take webhooks (no public URL). Each event is one SSE message
// whose id is the event's number (the resume position) and whose data is
// the body a webhook would get, with the event's evt_ ID as delivery_id.
// The data is JSON, which escapes every line end: it reaches the client
// byte for byte (package sse frames it).

// streamKeepAlive is how often an idle stream sends a comment, so that
// proxies and clients see it alive.
const streamKeepAlive = 25 * time.Second

// defaultSince is how far back a stream starts when the client names no
// position: what `listen` shows when it starts.
const defaultSince = time.Minute

// maxStreamBatch bounds the events read per wake-up.
const maxStreamBatch = 500

// EventLog is what the event stream reads: events in order after a
// position, a signal of new ones, and the position before a time.
// storage.DB is one; a fleet's events stream is another, whose events
// include lines this node does not serve.
type EventLog interface {
	// EventsChanged is closed when events may have been added: taken
	// before Events, so that nothing added in between is missed.
	EventsChanged() <-chan struct{}
	// Events returns up to max events after the position after, oldest
	// first, each with its position as Seq.
	Events(ctx context.Context, after uint64, max int) ([]storage.Event, error)
	// EventsBefore is the position of the last event before at (Unix ms).
	EventsBefore(ctx context.Context, at int64) (uint64, error)
}

// eventLog is where the event stream reads.
func (s *Server) eventLog() EventLog {
	if s.opts.Events != nil {
		return s.opts.Events
	}
	return s.db
}

func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	key := apiKey(ctx)
	q := r.URL.Query()
	events, err := streamedEvents(key, splitValues(q["event"]))
	if err != nil {
		return err
	}
	wake, err := streamWake(key, q)
	if err != nil {
		return err
	}
	lines := map[string]storage.Line{}
	// Without ?line=, every line the key may use, including, in a fleet,
	// the lines of other nodes, known by their events.
	handles := splitValues(q["line"])
	allLines := len(handles) == 0
	if len(handles) > 0 {
		for _, h := range handles {
			l, err := s.lineFor(r, h, "line")
			if err != nil {
				return err
			}
			lines[l.ID] = l
		}
	} else {
		for _, l := range s.db.Lines() {
			if checkLineAccess(key, l) == nil {
				lines[l.ID] = l
			}
		}
	}
	after, err := s.streamStart(r)
	if err != nil {
		return err
	}
	// A stream holds its key for as long as it is open: it ends when the
	// key is revoked, and a key holds at most StreamsPerKey at once. The
	// host's own tools (the admin socket) are neither.
	var revoked <-chan struct{}
	if _, inProcess := inProcessCaller(ctx); !inProcess {
		revoked = s.db.Revoked()
		if !s.keyActive(ctx, key) {
			return errInvalidKey
		}
		release, ok := s.streams.Take(key.ID)
		if !ok {
			return httpapi.TooManyRequests("too_many_streams", httpapi.RetrySeconds(streamBusyRetry),
				"This API key has %d event streams open, the most it may: end one first.", s.opts.StreamsPerKey)
		}
		defer release()
	}
	// Every stream ends after its lifetime, so that none holds a
	// connection (and its key's place) for ever; the client resumes.
	lifetime := time.NewTimer(s.opts.StreamLifetime)
	defer lifetime.Stop()

	sw := sse.Start(w, "events")
	// Where the stream starts, so that a client that reconnects before
	// any event resumes here rather than at its default start.
	sw.ID(seqID(after))
	sw.Flush()
	tick := time.NewTicker(streamKeepAlive)
	defer tick.Stop()
	visible := map[string]bool{} // chat ID → whether the key may see its events
	chats := map[string]*storage.Chat{}
	for {
		changed := s.eventLog().EventsChanged()
		batch, err := s.eventLog().Events(ctx, after, maxStreamBatch)
		if err != nil {
			return nil // the answer has begun: the client reconnects
		}
		// Checked after the read: events committed after a revocation
		// are never sent with the key it revoked.
		if storage.Fired(revoked) {
			if revoked = s.db.Revoked(); !s.keyActive(ctx, key) {
				return nil
			}
		}
		for _, e := range batch {
			after = e.Seq
			line, ok := lines[e.LineID]
			if !ok && allLines && e.LineID != "" {
				line, ok = s.otherNodesLine(key, e, lines)
			}
			if !ok || line.ID == "" || !slices.Contains(events, e.Name) {
				continue
			}
			if _, local := s.db.LineByID(e.LineID); !local {
				// A line of another node of the fleet: its chats are
				// there; the event says whose sandbox chat it is.
				if line.IsSandbox && (key.Owner == "" || e.SandboxOwner == nil || *e.SandboxOwner != key.Owner) {
					continue
				}
			} else if ok, err := s.chatVisible(r, line, e.ChatID, visible); err != nil || !ok {
				continue
			}
			if !wake.Wakes(e.Name, e.EventSubject, s.streamChat(ctx, wake, e, chats)) {
				continue
			}
			body, err := s.streamEventBody(e, line)
			if err != nil {
				s.log.Error("event stream: render", "event", e.ID, "err", err)
				continue
			}
			if err := sw.Event(seqID(e.Seq), e.Name, string(body)); err != nil {
				return nil
			}
		}
		sw.Flush()
		if len(batch) == maxStreamBatch {
			continue
		}
		select {
		case <-changed:
		case <-tick.C:
			// The position too: events this stream skipped are not
			// read again after a reconnect.
			sw.Comment("keep-alive")
			sw.ID(seqID(after))
			sw.Flush()
		case <-revoked: // checked above
		case <-lifetime.C:
			sw.Comment("this stream has reached its lifetime: reconnect with Last-Event-ID")
			sw.ID(seqID(after))
			sw.Flush()
			return nil
		case <-ctx.Done():
			return nil
		case <-s.streamsDone:
			return nil
		}
	}
}

// streamBusyRetry is the Retry-After of a stream refused because its key
// has all its streams open: nothing tells when one will end (a client
// whose network dropped holds its stream until a write to it fails).
const streamBusyRetry = 30 * time.Second

// keyActive reports whether a key is still valid (not revoked).
func (s *Server) keyActive(ctx context.Context, k storage.Key) bool {
	_, err := s.db.KeyByHash(ctx, k.Hash)
	return err == nil
}

func seqID(seq uint64) string { return strconv.FormatUint(seq, 10) }

// eventScopes is the read scope each event needs besides the stream's own
// webhooks:read: an event carries what that scope guards (a message with
// its text and its files' download URLs, a reaction, a receipt, a chat).
var eventScopes = map[string]string{
	api.EventMessageReceived: "messages:read", api.EventMessageSent: "messages:read",
	api.EventMessageFailed: "messages:read", api.EventMessageEdited: "messages:read",
	api.EventMessageUnsent: "messages:read", api.EventMessageDelivered: "messages:read",
	api.EventReactionAdded: "reactions:read", api.EventReactionRemoved: "reactions:read",
	api.EventReceiptRead: "receipts:read", api.EventChatUpdated: "chats:read",
	api.EventContactOptedOut: "chats:read", api.EventContactOptedIn: "chats:read",
	api.EventChatHandoff: "chats:read", api.EventChatLeased: "chats:read", api.EventChatReleased: "chats:read",
	api.EventMessageSelf: "messages:read",
}

// streamedEvents are the events a stream follows: those asked for, each of
// which the key must be able to read (else 403 naming the scope it lacks),
// or, when none are, the standard four less those it may not read.
func streamedEvents(key storage.Key, asked []string) ([]string, error) {
	if len(asked) == 0 {
		var out []string
		for _, e := range api.StandardEvents {
			if hasScope(key, eventScopes[e]) {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil, httpapi.Forbidden("insufficient_scope",
				"This API key may read none of the stream's default events: message events need the messages:read scope, reactions reactions:read.")
		}
		return out, nil
	}
	for _, e := range asked {
		if !slices.Contains(api.WebhookEvents, e) {
			return nil, httpapi.Invalid("event", "Unknown event %q; events are %s.", e, strings.Join(api.WebhookEvents, ", "))
		}
	}
	for _, e := range asked {
		if sc := eventScopes[e]; !hasScope(key, sc) {
			err := httpapi.Forbidden("insufficient_scope", "This API key lacks the %s scope, which the %s event needs.", sc, e)
			err.Param = "event"
			return nil, err
		}
	}
	return asked, nil
}

// streamStart is where a stream resumes: after the event the client last
// got (Last-Event-ID, as a browser's EventSource sends on reconnecting, or
// ?after=), else after the last event before ?since= (Unix ms), by default
// a minute ago.
func (s *Server) streamStart(r *http.Request) (uint64, error) {
	q := r.URL.Query()
	for _, v := range []struct{ value, param string }{{r.Header.Get("Last-Event-ID"), "Last-Event-ID"}, {q.Get("after"), "after"}} {
		if v.value == "" {
			continue
		}
		n, err := strconv.ParseUint(v.value, 10, 64)
		if err != nil {
			return 0, httpapi.Invalid(v.param, "%s must be the id of an event of the stream (a whole number).", v.param)
		}
		return n, nil
	}
	since := s.now().Add(-defaultSince).UnixMilli()
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, httpapi.Invalid("since", "since must be a time in Unix milliseconds.")
		}
		since = n
	}
	return s.eventLog().EventsBefore(r.Context(), since)
}

// otherNodesLine is the line of an event recorded by another node of a
// fleet, as the event describes it, if the key may use it; remembered in
// lines either way (a zero Line for one it may not).
func (s *Server) otherNodesLine(key storage.Key, e storage.Event, lines map[string]storage.Line) (storage.Line, bool) {
	if _, local := s.db.LineByID(e.LineID); local {
		return storage.Line{}, false // a line of this node the key may not use
	}
	l := storage.Line{ID: e.LineID, Handle: e.LineHandle, IsSandbox: e.SandboxOwner != nil}
	if checkLineAccess(key, l) != nil {
		l = storage.Line{}
	}
	lines[e.LineID] = l
	return l, l.ID != ""
}

// chatVisible applies the sandbox's owner rule to a chat's events, as the
// API applies it to the chat: remembered per stream.
func (s *Server) chatVisible(r *http.Request, line storage.Line, chatID string, seen map[string]bool) (bool, error) {
	if !line.IsSandbox {
		return true, nil
	}
	if ok, known := seen[chatID]; known {
		return ok, nil
	}
	c, err := s.db.ChatByID(r.Context(), chatID)
	if err != nil {
		return false, err
	}
	ok, err := s.sandboxChatVisible(r.Context(), line, c)
	if err == nil {
		seen[chatID] = ok
	}
	return ok, err
}

// streamChat is the chat of an event, for a stream whose wake gates by
// sender (nil otherwise, and for a chat not stored here): remembered per
// stream, as a chat's contact and whether it is a group never change.
func (s *Server) streamChat(ctx context.Context, wake storage.Wake, e storage.Event, chats map[string]*storage.Chat) *storage.Chat {
	if wake.Gate.IsZero() || e.ChatID == "" {
		return nil
	}
	if c, ok := chats[e.ChatID]; ok {
		return c
	}
	var found *storage.Chat
	if c, err := s.db.ChatByID(ctx, e.ChatID); err == nil {
		found = &c
	}
	chats[e.ChatID] = found
	return found
}

// streamEventBody is the data of an event of the stream: the body a
// webhook would get.
func (s *Server) streamEventBody(e storage.Event, line storage.Line) ([]byte, error) {
	data, err := s.EventData(storage.Delivery{ID: e.ID, LineID: e.LineID, ChatID: e.ChatID, Event: e.Name, EventSubject: e.EventSubject, CreatedAt: e.At}, line.Handle)
	if err != nil {
		return nil, err
	}
	return json.Marshal(api.Event{Type: e.Name, Data: data, Timestamp: e.At, DeliveryID: e.ID})
}

// splitValues takes repeated and comma-separated query values alike.
func splitValues(values []string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" && !slices.Contains(out, part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// CloseStreams ends the event streams, so that the API's server can shut
// down without waiting for their clients to leave.
func (s *Server) CloseStreams() {
	s.closeStreams.Do(func() { close(s.streamsDone) })
}
