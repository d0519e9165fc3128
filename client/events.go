package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/sse"
)

// EventService follows GET /v1/events: the events webhooks receive, as they
// happen (server-sent events), for a client that cannot take webhooks.
type EventService struct{ c *Client }

// EventStreamParams choose the events of a stream.
type EventStreamParams struct {
	// Events are the event kinds wanted; none means the reference
	// service's four (message.received, message.sent, reaction.added,
	// reaction.removed).
	Events []string
	// Lines are the handles of the lines wanted; none means every line
	// the key may use.
	Lines []string
	// Since starts the stream at the first event at or after this time;
	// zero means a minute before the stream starts.
	Since time.Time
	// After resumes after the event of this position (StreamedEvent.Seq),
	// instead of Since.
	After uint64
	// Arrival are the arrivals of the message events wanted
	// (api.ArrivalLive, api.ArrivalCatchUp); none means the key's
	// default: live only for an agent key, every one for another.
	Arrival []string
	// IncludeFiltered asks for (true) or leaves out (false) the message
	// events of chats Messages files under a filter (unknown senders);
	// nil means the key's default: left out for an agent key only.
	IncludeFiltered *bool
}

// StreamedEvent is an event of the stream: the body a webhook would get
// (api.Event; its DeliveryID is the event's evt_ ID), and its position.
type StreamedEvent struct {
	api.Event
	// Seq is the event's position: pass it as After to resume after it.
	Seq uint64
	// Raw is the body exactly as the server sent it.
	Raw []byte
}

// reconnectWait is the pause before following a stream again after it
// broke.
const reconnectWait = time.Second

// Stream yields the events of p as they happen, until ctx ends. The key
// needs webhooks:read, and messages:read for the message events. A stream
// that ends is followed again where the server said it got to (the last
// event ID, sent back as Last-Event-ID), so nothing the server still keeps
// is lost or repeated. The server ends each stream after a lifetime (an
// hour by default): that stream is followed again at once, and nothing is
// yielded. A stream that breaks (the server restarted, the network dropped)
// is followed again after a second, and yielded as an error too, without
// ending it, so a caller can say so and go on: such an error is not
// fatal, and breaking out of the loop on it would stop following. An answer
// that is an API error (a bad or revoked key, a refused parameter, too many
// streams) ends the stream with that *Error, the last thing yielded.
func (s *EventService) Stream(ctx context.Context, p EventStreamParams) iter.Seq2[StreamedEvent, error] {
	return func(yield func(StreamedEvent, error) bool) {
		resume := ""         // the stream's last event ID
		endedAtOnce := false // the last connection ended as it began
		if p.After > 0 {
			resume = strconv.FormatUint(p.After, 10)
		}
		for ctx.Err() == nil {
			q := url.Values{}
			for _, e := range p.Events {
				q.Add("event", e)
			}
			for _, l := range p.Lines {
				q.Add("line", l)
			}
			for _, a := range p.Arrival {
				q.Add("arrival", a)
			}
			if p.IncludeFiltered != nil {
				q.Set("include_filtered", strconv.FormatBool(*p.IncludeFiltered))
			}
			if resume == "" && !p.Since.IsZero() {
				q.Set("since", strconv.FormatInt(p.Since.UnixMilli(), 10))
			}
			started := time.Now()
			last, err := s.follow(ctx, q, resume, func(ev StreamedEvent) bool { return yield(ev, nil) })
			if last != "" {
				resume = last
			}
			if errors.Is(err, errStopped) || ctx.Err() != nil {
				return
			}
			if apiErr := (*Error)(nil); errors.As(err, &apiErr) {
				yield(StreamedEvent{}, err)
				return
			}
			if errors.Is(err, io.EOF) {
				// The server ended the stream between events (its
				// lifetime, a revoked key: the next answer says which):
				// follow it again at once, unless the one before it
				// also ended as soon as it began (a server that ends
				// every stream must not be hammered).
				quick := time.Since(started) < reconnectWait
				if !quick || !endedAtOnce {
					endedAtOnce = quick
					continue
				}
			} else if !yield(StreamedEvent{}, fmt.Errorf("blueline: event stream broke, following it again: %w", err)) {
				return
			}
			endedAtOnce = false
			select {
			case <-ctx.Done():
				return
			case <-time.After(reconnectWait):
			}
		}
	}
}

var errStopped = errors.New("stopped by the caller")

// follow reads one connection of the stream, resuming after the event ID
// resume ("" for none), calling each for every event, until the
// connection ends (io.EOF when the server ended it) or each returns false
// (errStopped). It returns the stream's last event ID as of its end.
func (s *EventService) follow(ctx context.Context, q url.Values, resume string, each func(StreamedEvent) bool) (string, error) {
	req, err := s.c.newRequest(ctx, request{method: http.MethodGet, path: "/v1/events", query: q})
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/event-stream")
	if resume != "" {
		req.Header.Set("Last-Event-ID", resume)
	}
	resp, err := s.c.httpc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", ResponseError(resp)
	}
	r := sse.NewReader(resp.Body)
	for {
		e, err := r.Next()
		if err != nil {
			return r.LastID(), err
		}
		ev := StreamedEvent{Raw: []byte(e.Data)}
		ev.Seq, _ = strconv.ParseUint(e.ID, 10, 64)
		if err := json.Unmarshal(ev.Raw, &ev.Event); err != nil {
			return r.LastID(), fmt.Errorf("blueline: event %d: %w", ev.Seq, err)
		}
		if !each(ev) {
			return r.LastID(), errStopped
		}
	}
}
