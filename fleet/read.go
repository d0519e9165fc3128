package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reading the events stream in order, for readers that follow every node's
// events (the API's event stream): the stream sequence is their cursor.

// StreamEvent is an event as the stream keeps it.
type StreamEvent struct {
	Event
	Node string    // the node that published it
	Seq  uint64    // its stream sequence
	Time time.Time // when the stream stored it
}

// ReadEvents returns up to max events after the stream sequence after,
// oldest first (aged-out sequences are skipped).
func (n *Node) ReadEvents(ctx context.Context, after uint64, max int) ([]StreamEvent, error) {
	var out []StreamEvent
	all := n.opts.Prefix + ".evt.>"
	for next := after + 1; len(out) < max; {
		msg, err := n.events.GetMsg(ctx, next, jetstream.WithGetMsgSubject(all))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, err
		}
		out = append(out, n.streamEvent(msg))
		next = msg.Sequence + 1
	}
	return out, nil
}

func (n *Node) streamEvent(msg *jetstream.RawStreamMsg) StreamEvent {
	node, topic, _ := strings.Cut(strings.TrimPrefix(msg.Subject, n.opts.Prefix+".evt."), ".")
	return StreamEvent{
		Event: Event{ID: msg.Header.Get(HeaderEventID), Topic: topic, Header: msg.Header, Data: msg.Data},
		Node:  node, Seq: msg.Sequence, Time: msg.Time,
	}
}

// EventsBefore is the stream sequence of the last event stored before t
// (0 when there is none): a reader that wants the events from t on starts
// after it. The stream is in time order, so it is a binary search.
func (n *Node) EventsBefore(ctx context.Context, t time.Time) (uint64, error) {
	info, err := n.events.Info(ctx)
	if err != nil {
		return 0, err
	}
	lo, hi := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 || lo == 0 {
		return hi, nil // nothing kept: start after the last ever stored
	}
	before := lo - 1
	all := n.opts.Prefix + ".evt.>"
	for lo <= hi {
		mid := lo + (hi-lo)/2
		msg, err := n.events.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(all))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			hi = mid - 1 // nothing at or after mid (aged out meanwhile)
			continue
		}
		if err != nil {
			return 0, err
		}
		if msg.Time.Before(t) {
			before, lo = msg.Sequence, msg.Sequence+1
		} else {
			hi = mid - 1
		}
	}
	return before, nil
}

// eventsSignal wakes the readers of the stream: closed when an event from
// any node passes, and replaced.
type eventsSignal struct {
	once sync.Once
	mu   sync.Mutex
	ch   chan struct{}
}

func (s *eventsSignal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// EventsChanged is closed when an event from any node is published after
// the call, and at least every backstop (it may be closed with nothing
// new: a reader reads again). Take it before ReadEvents, so that nothing
// published in between is missed.
func (n *Node) EventsChanged() <-chan struct{} {
	s := &n.eventsSig
	s.once.Do(func() {
		// A core subscription sees each publish as the stream takes it; as
		// it may see it just before the stream can be read, the readers
		// are woken again a moment later, and every second regardless.
		sub, err := n.nc.Subscribe(n.opts.Prefix+".evt.>", func(*nats.Msg) {
			s.broadcast()
			time.AfterFunc(50*time.Millisecond, s.broadcast)
		})
		if err != nil {
			n.log.Warn("fleet: following the events stream", "err", err)
		}
		tick := time.NewTicker(time.Second)
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-tick.C:
					s.broadcast()
				case <-done:
					return
				}
			}
		}()
		if !n.onClose(func() {
			tick.Stop()
			close(done)
			if sub != nil {
				sub.Unsubscribe()
			}
			s.broadcast()
		}) {
			tick.Stop()
			close(done)
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}
