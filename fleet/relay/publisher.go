// Package relay carries a fleet node's events through the fleet's events
// stream (package fleet): the Publisher puts what the node records there,
// each event once; Webhooks delivers the stream to the webhooks, one
// durable consumer per webhook that every node pulls from; Stream reads it
// for the API's event stream, so that every node shows the whole fleet.
//
// The node's event log (storage) stays the source of truth: events are
// recorded in the transaction that causes them whether or not the fleet is
// reachable, and published from the log after a cursor kept beside it.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/storage"
)

// EventLog is the node's event log and its publish cursor.
type EventLog interface {
	EventsChanged() <-chan struct{}
	Events(ctx context.Context, after uint64, max int) ([]storage.Event, error)
	PublishCursor(ctx context.Context) (storage.PublishCursor, error)
	SetPublishCursor(ctx context.Context, c storage.PublishCursor) error
}

// Publisher publishes the node's events to the stream, serially, from the
// log after its cursor. Each goes out with the ID "<node>:<seq>" (the
// stream drops a duplicate within its window) and the guard that the
// node's last event in the stream is the one the cursor says (which does
// not expire); the cursor moves after each acknowledgement. A node cut off
// from the fleet keeps recording, and publishes what it recorded when it
// is back.
type Publisher struct {
	node *fleet.Node
	log  EventLog
	lg   *slog.Logger
	// Poll is the backstop to the log's signal of new events. Default 5s.
	Poll time.Duration
	// Backoff is the first wait after a failed publish, doubled on each
	// failure in a row up to MaxBackoff. Defaults 1s and 30s.
	Backoff, MaxBackoff time.Duration
}

// NewPublisher returns the node's publisher of log.
func NewPublisher(node *fleet.Node, log EventLog, lg *slog.Logger) *Publisher {
	return &Publisher{node: node, log: log, lg: lg, Poll: 5 * time.Second, Backoff: time.Second, MaxBackoff: 30 * time.Second}
}

// publishBatch bounds the events read from the log at a time.
const publishBatch = 256

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	cur, err := p.log.PublishCursor(ctx)
	if err != nil {
		return err
	}
	pub := p.node.Publisher(cur.StreamSeq)
	// What the stream holds of ours comes first: an acknowledgement lost
	// before the last stop (or a cursor never written) is found there.
	resync := true
	backoff := p.Backoff
	failed := func() {
		p.wait(ctx, backoff, nil)
		backoff = min(2*backoff, max(p.MaxBackoff, p.Backoff))
	}
	for ctx.Err() == nil {
		if resync {
			if cur, err = p.resync(ctx, pub, cur); err != nil {
				if ctx.Err() == nil {
					p.lg.Warn("fleet: reading this node's last published event", "err", err)
				}
				failed()
				continue
			}
			resync = false
		}
		changed := p.log.EventsChanged()
		batch, err := p.log.Events(ctx, cur.Seq, publishBatch)
		if err != nil {
			if ctx.Err() == nil {
				p.lg.Error("fleet: reading the event log", "err", err)
			}
			failed()
			continue
		}
		for _, e := range batch {
			next, err := p.publish(ctx, pub, e)
			if err != nil {
				if ctx.Err() == nil {
					p.lg.Warn("fleet: publishing an event (will retry)", "seq", e.Seq, "event", e.ID, "err", err)
					resync = true
					failed()
				}
				break
			}
			backoff = p.Backoff
			cur = storage.PublishCursor{Seq: e.Seq, StreamSeq: next}
			if err := p.log.SetPublishCursor(context.WithoutCancel(ctx), cur); err != nil {
				// The stream has it: the next resync finds it there.
				p.lg.Error("fleet: saving the publish cursor", "err", err)
				resync = true
			}
		}
		if len(batch) == 0 {
			p.wait(ctx, p.Poll, changed)
		}
	}
	return nil
}

// publish publishes e and returns the stream's last sequence of the node's
// events after it. An event too large for the stream is logged and passed
// over: retrying would never mend it.
func (p *Publisher) publish(ctx context.Context, pub *fleet.Publisher, e storage.Event) (uint64, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	if len(data) > fleet.MaxEventSize-4<<10 {
		p.lg.Error("fleet: an event too large for the events stream is not published", "seq", e.Seq, "event", e.ID, "bytes", len(data))
		return pub.LastSeq(), nil
	}
	line := e.LineID
	if line == "" {
		line = "-" // every event has its line; a token all the same
	}
	_, err = pub.Publish(ctx, fleet.Event{ID: p.msgID(e.Seq), Topic: Topic(line, e.Name), Data: data})
	return pub.LastSeq(), err
}

// resync takes the stream's word for where the node's events stand: its
// last event from this node names the local seq to go on after. When the
// stream has none (never published, or aged out), the cursor stays and
// the next publish expects none.
func (p *Publisher) resync(ctx context.Context, pub *fleet.Publisher, cur storage.PublishCursor) (storage.PublishCursor, error) {
	id, err := pub.Resync(ctx)
	if err != nil {
		return cur, err
	}
	next := cur
	next.StreamSeq = pub.LastSeq()
	if id != "" {
		seq, ok := p.localSeq(id)
		if !ok {
			return cur, errors.New("the stream's last event from this node has an ID of another shape: " + id)
		}
		if seq != cur.Seq {
			p.lg.Info("fleet: publish cursor taken from the stream", "was", cur.Seq, "now", seq)
		}
		next.Seq = seq
	}
	if next != cur {
		if err := p.log.SetPublishCursor(context.WithoutCancel(ctx), next); err != nil {
			return cur, err
		}
	}
	return next, nil
}

// msgID is the stream's ID of the node's local event seq.
func (p *Publisher) msgID(seq uint64) string {
	return p.node.Name() + ":" + strconv.FormatUint(seq, 10)
}

func (p *Publisher) localSeq(id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, p.node.Name()+":")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	return seq, err == nil
}

func (p *Publisher) wait(ctx context.Context, d time.Duration, wake <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// Topic is the subject tail of an event of a line: "<line ID>.<event>",
// which consumers filter on (after "<node>.").
func Topic(lineID, event string) string { return lineID + "." + event }
