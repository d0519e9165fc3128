package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
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
}

// StreamedEvent is an event of the stream: the body a webhook would get
// (Event; its DeliveryID is the event's evt_ ID), and its position.
type StreamedEvent struct {
	Event
	// Seq is the event's position: pass it as After to resume after it.
	Seq uint64
	// Raw is the body exactly as the server sent it.
	Raw []byte
}

// reconnectWait is the pause before following a stream again after it
// broke.
const reconnectWait = time.Second

// Stream yields the events of p as they happen, until ctx ends. A stream
// that breaks (the server restarted, the network dropped) is followed
// again after the last event yielded, so nothing the server still keeps is
// lost or repeated. An answer that is an API error (a bad key, a refused
// parameter) ends the stream with that *Error; a broken connection is
// yielded as an error too, without ending it, so a caller can say so.
func (s *EventService) Stream(ctx context.Context, p EventStreamParams) iter.Seq2[StreamedEvent, error] {
	return func(yield func(StreamedEvent, error) bool) {
		after := p.After
		resumed := after > 0
		for ctx.Err() == nil {
			q := url.Values{}
			for _, e := range p.Events {
				q.Add("event", e)
			}
			for _, l := range p.Lines {
				q.Add("line", l)
			}
			if resumed {
				q.Set("after", strconv.FormatUint(after, 10))
			} else if !p.Since.IsZero() {
				q.Set("since", strconv.FormatInt(p.Since.UnixMilli(), 10))
			}
			err := s.follow(ctx, q, func(ev StreamedEvent) bool {
				after, resumed = ev.Seq, true
				return yield(ev, nil)
			})
			if errors.Is(err, errStopped) || ctx.Err() != nil {
				return
			}
			if _, ok := errors.AsType[*Error](err); ok {
				yield(StreamedEvent{}, err)
				return
			}
			if !resumed {
				// Resume from where the first connection started, not
				// from a fresh "a minute ago".
				resumed = true
			}
			if !yield(StreamedEvent{}, fmt.Errorf("blueline: event stream broke, following it again: %w", err)) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(reconnectWait):
			}
		}
	}
}

var errStopped = errors.New("stopped by the caller")

// follow reads one connection of the stream, calling each for every event,
// until the connection ends (its error) or each returns false (errStopped).
func (s *EventService) follow(ctx context.Context, q url.Values, each func(StreamedEvent) bool) error {
	req, err := s.c.newRequest(ctx, request{method: http.MethodGet, path: "/v1/events", query: q})
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.c.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errorFrom(resp)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var ev StreamedEvent
	var data strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the server ends streams only by going away
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data.Len() > 0 {
				ev.Raw = []byte(data.String())
				if err := json.Unmarshal(ev.Raw, &ev.Event); err != nil {
					return fmt.Errorf("blueline: event %d: %w", ev.Seq, err)
				}
				if !each(ev) {
					return errStopped
				}
			}
			ev, data = StreamedEvent{}, strings.Builder{}
		case strings.HasPrefix(line, ":"):
			// a comment: the stream is alive
		case strings.HasPrefix(line, "id:"):
			ev.Seq, _ = strconv.ParseUint(strings.TrimSpace(line[3:]), 10, 64)
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(line[5:], " "))
		}
	}
}
