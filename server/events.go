package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// The event stream, GET /v1/events: what webhooks receive, as it happens,
// over server-sent events, for `blueline listen` and any client that
// cannot take webhooks (no public URL). Each event is one SSE message
// whose id is the event's number (the resume position) and whose data is
// the body a webhook would get, with the event's evt_ ID as delivery_id.

// standardEvents are the reference service's four: a stream that names no
// events gets these, as an SDK-built receiver expects nothing else.
var standardEvents = []string{storage.EventMessageReceived, storage.EventMessageSent, storage.EventReactionAdded, storage.EventReactionRemoved}

// streamKeepAlive is how often an idle stream sends a comment, so that
// proxies and clients see it alive.
const streamKeepAlive = 25 * time.Second

// defaultSince is how far back a stream starts when the client names no
// position: what `listen` shows when it starts.
const defaultSince = time.Minute

// maxStreamBatch bounds the events read per wake-up.
const maxStreamBatch = 500

func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	key := apiKey(ctx)
	q := r.URL.Query()
	events := standardEvents
	if names := splitValues(q["event"]); len(names) > 0 {
		for _, e := range names {
			if !slices.Contains(storage.WebhookEvents, e) {
				return errInvalid("event", "Unknown event %q; events are %s.", e, strings.Join(storage.WebhookEvents, ", "))
			}
		}
		events = names
	}
	lines := map[string]storage.Line{}
	if handles := splitValues(q["line"]); len(handles) > 0 {
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

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	fmt.Fprint(w, ": events\n\n")
	rc.Flush()
	tick := time.NewTicker(streamKeepAlive)
	defer tick.Stop()
	visible := map[string]bool{} // chat ID → whether the key may see its events
	for {
		changed := s.db.EventsChanged()
		batch, err := s.db.Events(ctx, after, maxStreamBatch)
		if err != nil {
			return nil // the answer has begun: the client reconnects
		}
		for _, e := range batch {
			after = e.Seq
			line, ok := lines[e.LineID]
			if !ok || !slices.Contains(events, e.Name) {
				continue
			}
			if ok, err := s.chatVisible(r, line, e.ChatID, visible); err != nil || !ok {
				continue
			}
			msg, err := s.sseMessage(e, line)
			if err != nil {
				s.log.Error("event stream: render", "event", e.ID, "err", err)
				continue
			}
			if _, err := w.Write(msg); err != nil {
				return nil
			}
		}
		rc.Flush()
		if len(batch) == maxStreamBatch {
			continue
		}
		select {
		case <-changed:
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			rc.Flush()
		case <-ctx.Done():
			return nil
		case <-s.streamsDone:
			return nil
		}
	}
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
			return 0, errInvalid(v.param, "%s must be the id of an event of the stream (a whole number).", v.param)
		}
		return n, nil
	}
	since := s.now().Add(-defaultSince).UnixMilli()
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, errInvalid("since", "since must be a time in Unix milliseconds.")
		}
		since = n
	}
	return s.db.EventsBefore(r.Context(), since)
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

// sseMessage is one event as a server-sent event: its number as the id,
// its name as the type, and the body a webhook would get as the data.
func (s *Server) sseMessage(e storage.Event, line storage.Line) ([]byte, error) {
	data, err := s.EventData(storage.Delivery{ID: e.ID, LineID: e.LineID, ChatID: e.ChatID, Event: e.Name, EventSubject: e.EventSubject}, line.Handle)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(StreamEvent{Event: e.Name, Data: data, Timestamp: e.At, DeliveryID: e.ID})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Name, body)
	return b.Bytes(), nil
}

// StreamEvent is the data of an event of the stream: a webhook's body.
type StreamEvent struct {
	Event      string `json:"event"`
	Data       any    `json:"data"`
	Timestamp  int64  `json:"timestamp"`
	DeliveryID string `json:"delivery_id"`
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
