package relay

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/storage"
)

// Stream reads the fleet's events stream as an event log: every node's
// events, each numbered by its stream sequence (the API's event stream
// takes it as its position, so Last-Event-ID resumes in the stream). It
// has the methods of server.EventLog.
type Stream struct {
	node *fleet.Node
	lg   *slog.Logger
}

// NewStream returns the stream's reader.
func NewStream(node *fleet.Node, lg *slog.Logger) *Stream { return &Stream{node: node, lg: lg} }

// EventsChanged is closed when any node publishes an event (and at least
// every second).
func (s *Stream) EventsChanged() <-chan struct{} { return s.node.EventsChanged() }

// Events returns up to max events after the stream sequence after. One
// that does not decode is returned as an event of no kind at its
// position, which readers pass over.
func (s *Stream) Events(ctx context.Context, after uint64, max int) ([]storage.Event, error) {
	read, err := s.node.ReadEvents(ctx, after, max)
	if err != nil && len(read) == 0 {
		return nil, err
	}
	out := make([]storage.Event, len(read))
	for i, m := range read {
		if err := json.Unmarshal(m.Data, &out[i]); err != nil {
			s.lg.Error("fleet: an event of the stream does not decode", "stream_seq", m.Seq, "node", m.Node, "err", err)
			out[i] = storage.Event{}
		}
		out[i].Seq = m.Seq
	}
	return out, nil
}

// EventsBefore is the stream sequence of the last event stored before at
// (Unix ms).
func (s *Stream) EventsBefore(ctx context.Context, at int64) (uint64, error) {
	return s.node.EventsBefore(ctx, time.UnixMilli(at))
}
