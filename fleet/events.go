package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxEventSize is the largest event the stream takes, headers included:
// events carry metadata and refer to files, never embed them.
const MaxEventSize = 256 << 10

// HeaderEventID carries an event's ID (also its Nats-Msg-Id), so that the
// last event a node published can be read back by Resync.
const HeaderEventID = "Bl-Event-Id"

// Event is one event for the events stream: opaque bytes with headers.
type Event struct {
	// ID is unique to the event and the same on every attempt to publish
	// it (e.g. "<node>:<local seq>"); it is the message ID the stream
	// deduplicates on, within its window.
	ID string
	// Topic is the end of the subject, after "<prefix>.evt.<node>.": dot-
	// separated tokens without wildcards, such as "<line>.message_received",
	// which consumers filter on.
	Topic  string
	Header map[string][]string
	Data   []byte
}

// Published is the stream's acknowledgement of an event.
type Published struct {
	Seq uint64 // the stream sequence of the event
	// Duplicate: the stream had the event already (same ID, within the
	// dedupe window) and kept it once; Seq is the original's.
	Duplicate bool
}

// ErrWrongLastSequence: the stream's last event from this node is not the
// one the publisher expected, so something was published that it does not
// know of (an acknowledgement lost, another process with this node's
// name). Call Resync before publishing again.
var ErrWrongLastSequence = errors.New("fleet: the stream's last event from this node is not the one expected")

// Publisher publishes this node's events, serially, each with its ID and
// the guard that the node's last event in the stream is still the one it
// last published (the expected last sequence on "<prefix>.evt.<node>.>"),
// which, unlike ID dedupe, does not expire. It is the node's only
// publisher on that subject space.
type Publisher struct {
	n    *Node
	mu   sync.Mutex
	last uint64
}

// Publisher returns the node's publisher, expecting lastSeq as the stream
// sequence of the node's last event (kept by the caller with its cursor;
// 0 for none, or call Resync).
func (n *Node) Publisher(lastSeq uint64) *Publisher { return &Publisher{n: n, last: lastSeq} }

// LastSeq is the stream sequence of the last event acknowledged (or found
// by Resync): what the caller persists with its cursor.
func (p *Publisher) LastSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Publish publishes ev once. A Duplicate acknowledgement counts as
// success. On ErrWrongLastSequence, or any error whose outcome is unknown
// (a timeout), call Resync before going on.
func (p *Publisher) Publish(ctx context.Context, ev Event) (Published, error) {
	if ev.ID == "" {
		return Published{}, errors.New("fleet: an event without an ID")
	}
	if ev.Topic == "" || strings.ContainsAny(ev.Topic, "*> \t\r\n") || strings.HasPrefix(ev.Topic, ".") ||
		strings.HasSuffix(ev.Topic, ".") || strings.Contains(ev.Topic, "..") {
		return Published{}, fmt.Errorf("fleet: event topic %q: want dot-separated tokens without wildcards or spaces", ev.Topic)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.n
	m := nats.NewMsg(n.eventSubject(n.opts.Node, ev.Topic))
	for k, vs := range ev.Header {
		m.Header[k] = vs
	}
	m.Header.Set(HeaderEventID, ev.ID)
	m.Data = ev.Data
	ack, err := n.js.PublishMsg(ctx, m, jetstream.WithMsgID(ev.ID),
		jetstream.WithExpectLastSequenceForSubject(p.last, n.eventSubject(n.opts.Node, ">")))
	if err != nil {
		var api *jetstream.APIError
		if errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return Published{}, fmt.Errorf("%w (expected %d): %v", ErrWrongLastSequence, p.last, err)
		}
		return Published{}, err
	}
	if !ack.Duplicate || ack.Sequence > p.last {
		p.last = max(p.last, ack.Sequence)
	}
	return Published{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// Resync reads the node's last event in the stream and takes its sequence
// as the one to expect. It returns that event's ID ("" when the stream has
// none from this node: never published, or aged out), from which the
// caller resumes its cursor.
func (p *Publisher) Resync(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg, err := p.n.events.GetLastMsgForSubject(ctx, p.n.eventSubject(p.n.opts.Node, ">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		p.last = 0
		return "", nil
	}
	if err != nil {
		return "", err
	}
	p.last = msg.Sequence
	return msg.Header.Get(HeaderEventID), nil
}

// ConsumerConfig is a durable consumer of the events stream, one per
// webhook, shared by every node, and how Consume runs it here.
type ConsumerConfig struct {
	// Name is the durable consumer's name: 1 to 32 letters, digits, '-' or
	// '_' (a webhook's ID).
	Name string
	// Topics filter the events: subject tails after "<prefix>.evt.", with
	// wildcards, such as "*.*.message_received" (any node, any line). None:
	// every event.
	Topics []string
	// StartTime: deliver the events from then on (the webhook's creation);
	// zero: only those published after the consumer is created. Fixed at
	// creation.
	StartTime time.Time
	// AckWait is how long a delivery may take before the stream gives the
	// event to another puller (a node that died mid-delivery). Default 60s.
	AckWait time.Duration
	// MaxAckPending caps the fleet-wide deliveries under way or waiting to
	// be retried. Default 256.
	MaxAckPending int
	// Schedule is the waits before each retry: an event is tried at most
	// len(Schedule)+1 times.
	Schedule []time.Duration

	// Workers is how many deliveries this node runs at once (Consume
	// only). Default 4.
	Workers int
	// Jitter, when set, spreads each retry's wait (Consume only).
	Jitter func(time.Duration) time.Duration
}

// EnsureConsumer creates the durable consumer, or updates its topics and
// limits (its start cannot change): idempotent, as every node may call it.
func (n *Node) EnsureConsumer(ctx context.Context, c ConsumerConfig) error {
	if !namePattern.MatchString(c.Name) {
		return fmt.Errorf("fleet: consumer name %q: must be 1 to 32 letters, digits, '-' or '_'", c.Name)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       c.Name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    len(c.Schedule) + 1,
		MaxAckPending: c.MaxAckPending,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 60 * time.Second
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = 256
	}
	if !c.StartTime.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		t := c.StartTime
		cfg.OptStartTime = &t
	}
	for _, t := range c.Topics {
		cfg.FilterSubjects = append(cfg.FilterSubjects, n.opts.Prefix+".evt."+t)
	}
	return retry(ctx, n.opts.AttemptTimeout, func(ctx context.Context) error {
		_, err := n.events.CreateOrUpdateConsumer(ctx, cfg)
		return err
	})
}

// DeleteConsumer deletes a durable consumer (its webhook is gone).
func (n *Node) DeleteConsumer(ctx context.Context, name string) error {
	err := n.events.DeleteConsumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	return err
}

// ConsumerInfo is the stream's view of a durable consumer, for status and
// tests.
func (n *Node) ConsumerInfo(ctx context.Context, name string) (*jetstream.ConsumerInfo, error) {
	c, err := n.events.Consumer(ctx, name)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// Delivery is one attempt at delivering an event.
type Delivery struct {
	Event
	Node      string // the node that published it
	StreamSeq uint64 // the same on every attempt, on every node
	// Attempt counts from 1, across the fleet.
	Attempt int
	// Last is true on the last attempt the schedule allows.
	Last bool
}

// Outcome is what became of a delivery.
type Outcome int

const (
	// Delivered: acknowledge the event, for good.
	Delivered Outcome = iota
	// Retry: try again after the schedule's wait for this attempt, or give
	// up when it was the last.
	Retry
	// GiveUp: never try the event again (the receiver refused it for good).
	GiveUp
)

// RetryDelay is the wait before the attempt after the attempt-th (counting
// from 1): schedule[attempt-1], and false when the schedule is exhausted.
func RetryDelay(schedule []time.Duration, attempt int) (time.Duration, bool) {
	if attempt < 1 || attempt > len(schedule) {
		return 0, false
	}
	return schedule[attempt-1], true
}

// Consumption is a running Consume.
type Consumption struct {
	cc       jetstream.ConsumeContext
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	stopping atomic.Bool
}

// Stop stops pulling, and waits for the deliveries under way (their ctx is
// cancelled). The events this node pulled and did not deliver (buffered,
// or cut short) are handed back at once, so that another node takes them
// now rather than after AckWait.
func (c *Consumption) Stop() {
	c.once.Do(func() {
		c.stopping.Store(true)
		c.cancel()
		c.cc.Drain() // the buffered events reach the handler, which hands them back
		<-c.cc.Closed()
		c.wg.Wait()
	})
}

// Consume pulls the durable consumer c.Name (see EnsureConsumer) and calls
// deliver for each event on up to c.Workers goroutines. What deliver
// returns is acted on: Delivered is acknowledged (and confirmed by the
// server), Retry is negatively acknowledged with the schedule's wait for
// that attempt (NumDelivered, counted by the server across nodes), and the
// last attempt, or GiveUp, is terminated. It runs until Stop, ctx's end or
// the node's Close.
func (n *Node) Consume(ctx context.Context, c ConsumerConfig, deliver func(ctx context.Context, d Delivery) Outcome) (*Consumption, error) {
	workers := c.Workers
	if workers <= 0 {
		workers = 4
	}
	var cons jetstream.Consumer
	err := retry(ctx, n.opts.AttemptTimeout, func(actx context.Context) (err error) {
		cons, err = n.events.Consumer(actx, c.Name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: consumer %q: %w", c.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	run := &Consumption{cancel: cancel}
	sem := make(chan struct{}, workers)
	prefix := n.opts.Prefix + ".evt."
	handBack := func(msg jetstream.Msg) {
		if err := msg.Nak(); err != nil {
			n.log.Debug("fleet: handing back an event on stopping", "consumer", c.Name, "err", err)
		}
	}
	handle := func(msg jetstream.Msg) {
		md, err := msg.Metadata()
		if err != nil {
			n.log.Warn("fleet: an event without metadata", "consumer", c.Name, "err", err)
			return
		}
		node, topic, _ := strings.Cut(strings.TrimPrefix(msg.Subject(), prefix), ".")
		d := Delivery{
			Event:     Event{ID: msg.Headers().Get(HeaderEventID), Topic: topic, Header: msg.Headers(), Data: msg.Data()},
			Node:      node,
			StreamSeq: md.Sequence.Stream,
			Attempt:   int(md.NumDelivered),
		}
		_, more := RetryDelay(c.Schedule, d.Attempt)
		d.Last = !more
		out := deliver(ctx, d)
		if ctx.Err() != nil && out != Delivered {
			handBack(msg) // stopping: another node takes it at once
			return
		}
		switch out {
		case Delivered:
			actx, acancel := context.WithTimeout(context.Background(), n.opts.AttemptTimeout*4)
			err = msg.DoubleAck(actx)
			acancel()
		case Retry:
			if wait, ok := RetryDelay(c.Schedule, d.Attempt); ok {
				if c.Jitter != nil {
					wait = c.Jitter(wait)
				}
				err = msg.NakWithDelay(wait)
			} else {
				err = msg.TermWithReason("the last attempt failed")
			}
		default:
			err = msg.TermWithReason("given up")
		}
		if err != nil {
			n.log.Warn("fleet: acknowledging a delivery", "consumer", c.Name, "seq", d.StreamSeq, "attempt", d.Attempt, "err", err)
		}
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if run.stopping.Load() {
			handBack(msg)
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			handBack(msg)
			return
		}
		run.wg.Add(1)
		go func() {
			defer func() { <-sem; run.wg.Done() }()
			handle(msg)
		}()
	},
		// Each buffered event's AckWait is already running: buffer no more
		// than the workers take.
		jetstream.PullMaxMessages(workers),
		// A pull that fails (the consumer's group has no leader yet, just
		// created or after a node left) is made again only once its
		// heartbeats are missed: short pulls keep that to seconds, not the
		// default 30.
		jetstream.PullExpiry(5*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil {
				n.log.Debug("fleet: pulling events", "consumer", c.Name, "err", err)
			}
		}))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fleet: consuming %q: %w", c.Name, err)
	}
	run.cc = cc
	if !n.onClose(run.Stop) {
		run.Stop()
		return nil, errors.New("fleet: the node is closed")
	}
	go func() {
		<-ctx.Done()
		run.Stop()
	}()
	return run, nil
}
