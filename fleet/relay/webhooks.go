package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

// HookStore is where the node finds the webhooks (its storage, which the
// fleet's control plane keeps the same on every node) and records its
// attempts.
type HookStore interface {
	Webhooks(ctx context.Context, lineID string) ([]storage.Webhook, error)
	// WebhooksReady is signalled when webhooks may have changed.
	WebhooksReady() <-chan struct{}
	RecordAttempt(ctx context.Context, a storage.Attempt) error
}

// Sender posts a delivery to a webhook's receiver (webhook.Sender).
type Sender interface {
	Send(ctx context.Context, hook storage.Webhook, ev api.Event) (status int, err error)
}

// Webhooks delivers the events stream to the webhooks: one durable
// consumer per active webhook ("wh_…", its ID), filtered on its line and
// events and starting at its creation, that every node pulls from, so that
// whichever node is alive delivers. An attempt is made as the local
// dispatcher makes it (same body, same signature headers, same sender);
// its delivery ID is derived from the webhook's and the event's IDs, so it
// is the same on every attempt, on every node. A failure is retried on the
// [webhooks] schedule, counted by the stream across nodes; after the last,
// the event is given up. Each attempt is recorded in the storage of the
// node that made it.
type Webhooks struct {
	node   *fleet.Node
	store  HookStore
	render webhook.Renderer
	send   Sender
	opts   webhook.Options
	lg     *slog.Logger
	// Refresh is how often the webhooks are read again besides their
	// signal. Default 5s.
	Refresh time.Duration
}

// NewWebhooks returns the node's webhook consumers. opts are [webhooks]'s:
// Schedule, Lanes (deliveries at once per webhook on this node), Timeout
// and Metrics are used.
func NewWebhooks(node *fleet.Node, store HookStore, render webhook.Renderer, send Sender, opts webhook.Options, lg *slog.Logger) *Webhooks {
	return &Webhooks{node: node, store: store, render: render, send: send, opts: opts, lg: lg, Refresh: 5 * time.Second}
}

// consumer is a webhook's consumer running here.
type consumer struct {
	hook   atomic.Pointer[storage.Webhook] // the latest record (URL, secret)
	events []string                        // the events its filter has
	run    *fleet.Consumption
}

// Run keeps a consumer running for every active webhook until ctx ends.
func (w *Webhooks) Run(ctx context.Context) error {
	running := map[string]*consumer{}
	defer func() {
		for _, c := range running {
			c.run.Stop()
		}
	}()
	tick := time.NewTicker(w.Refresh)
	defer tick.Stop()
	for {
		hooks, err := w.store.Webhooks(ctx, "")
		if err != nil && ctx.Err() == nil {
			w.lg.Error("fleet: list webhooks", "err", err)
		}
		if err == nil {
			w.reconcile(ctx, running, hooks)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.store.WebhooksReady():
		case <-tick.C:
		}
	}
}

// reconcile starts the consumers of active webhooks, updates those whose
// events changed, and stops those of webhooks gone or inactive. The durable
// consumer of a webhook that is gone from storage is deleted (by every
// node that ran it: deleting is idempotent).
func (w *Webhooks) reconcile(ctx context.Context, running map[string]*consumer, hooks []storage.Webhook) {
	present, active := map[string]bool{}, map[string]bool{}
	for _, h := range hooks {
		present[h.ID] = true
		if !h.IsActive {
			continue
		}
		active[h.ID] = true
		c := running[h.ID]
		if c != nil && slices.Equal(c.events, h.Events) {
			c.hook.Store(&h)
			continue
		}
		cfg := w.consumerConfig(h)
		if err := w.node.EnsureConsumer(ctx, cfg); err != nil {
			if ctx.Err() == nil {
				w.lg.Warn("fleet: webhook consumer (will retry)", "webhook_id", h.ID, "err", err)
			}
			continue
		}
		if c != nil {
			c.hook.Store(&h)
			c.events = slices.Clone(h.Events)
			continue
		}
		c = &consumer{events: slices.Clone(h.Events)}
		c.hook.Store(&h)
		run, err := w.node.Consume(ctx, cfg, func(ctx context.Context, d fleet.Delivery) fleet.Outcome { return w.deliver(ctx, c.hook.Load(), d) })
		if err != nil {
			if ctx.Err() == nil {
				w.lg.Warn("fleet: consuming a webhook's events (will retry)", "webhook_id", h.ID, "err", err)
			}
			continue
		}
		c.run = run
		running[h.ID] = c
	}
	for id, c := range running {
		if active[id] {
			continue
		}
		c.run.Stop()
		delete(running, id)
		if !present[id] {
			if err := w.node.DeleteConsumer(ctx, id); err != nil && ctx.Err() == nil {
				w.lg.Warn("fleet: deleting a webhook's consumer", "webhook_id", id, "err", err)
			}
		}
	}
}

// ConsumerName is the durable consumer of a webhook: its ID.
func ConsumerName(webhookID string) string { return webhookID }

func (w *Webhooks) consumerConfig(h storage.Webhook) fleet.ConsumerConfig {
	cfg := fleet.ConsumerConfig{
		Name:      ConsumerName(h.ID),
		StartTime: time.UnixMilli(h.CreatedAt),
		Schedule:  w.opts.Schedule,
		Workers:   w.opts.Lanes,
		Jitter:    webhook.Jitter,
		// Longer than an attempt may take (the receiver's timeout, and a
		// margin to render and record), so that only a node that died
		// mid-delivery hands its event to another, and short, as it is how
		// long that takes. (A node that stops hands back at once what it
		// pulled; a retry's delay has been seen lost across a consumer
		// leader's change, and AckWait is then the wait.)
		AckWait: w.opts.Timeout + 10*time.Second,
	}
	for _, l := range h.LineIDs {
		for _, e := range h.Events {
			cfg.Topics = append(cfg.Topics, "*."+Topic(l, e))
		}
	}
	return cfg
}

// DeliveryID is the delivery ID of an event (evt_…) to a webhook: the same
// on every attempt, on every node.
func DeliveryID(webhookID, eventID string) string { return storage.HashID("dlv_", webhookID, eventID) }

// deliver makes one attempt at delivering d to hook.
func (w *Webhooks) deliver(ctx context.Context, hook *storage.Webhook, d fleet.Delivery) fleet.Outcome {
	var e storage.Event
	if err := json.Unmarshal(d.Data, &e); err != nil {
		w.lg.Error("fleet: an event that does not decode is not delivered", "webhook_id", hook.ID, "stream_seq", d.StreamSeq, "err", err)
		return fleet.GiveUp
	}
	if !wants(*hook, e) {
		return fleet.Delivered // not for it: acknowledged without a delivery
	}
	id := DeliveryID(hook.ID, e.ID)
	start := time.Now()
	a := storage.Attempt{DeliveryID: id, WebhookID: hook.ID, Event: e.Name, N: d.Attempt, At: start.UnixMilli()}
	data, err := w.render.EventData(storage.Delivery{ID: id, WebhookID: hook.ID, LineID: e.LineID, ChatID: e.ChatID, Event: e.Name, EventSubject: e.EventSubject}, e.LineHandle)
	if err == nil {
		a.StatusCode, err = w.send.Send(ctx, *hook, api.Event{Type: e.Name, Data: data, Timestamp: a.At, DeliveryID: id})
	} else {
		err = fmt.Errorf("render event: %w", err)
	}
	if ctx.Err() != nil {
		return fleet.Retry // cut short by the stop: not the receiver's failure (left unacknowledged)
	}
	a.LatencyMs = time.Since(start).Milliseconds()
	outcome := fleet.Delivered
	if err != nil {
		a.Error, outcome = err.Error(), fleet.Retry
	}
	if m := w.opts.Metrics; m != nil {
		m.WebhookAttempt(map[bool]string{true: "success", false: "failure"}[err == nil])
		if err == nil {
			webhook.TimeReceived(m, e.Name, e.LineID, e.EventSubject, time.Now())
		}
	}
	if rerr := w.store.RecordAttempt(context.WithoutCancel(ctx), a); rerr != nil {
		w.lg.Error("fleet: record a webhook attempt", "webhook_id", hook.ID, "delivery_id", id, "err", rerr)
	}
	if err != nil && d.Last {
		w.lg.Warn("fleet: a webhook delivery failed for good", "webhook_id", hook.ID, "delivery_id", id, "attempts", d.Attempt, "err", err)
	}
	return outcome
}

// wants reports whether hook receives e, as queueEvent decides for a local
// delivery: an active webhook of the event's line (one of its lines)
// subscribed to it, created before it, and on the sandbox line one of the
// owner whose sandbox chat it happened in; and what wakes it. The event's
// chat is on the node that recorded it: a webhook of an agent key with
// sender gating, which needs it, gets none of the fleet's events.
func wants(hook storage.Webhook, e storage.Event) bool {
	return hook.IsActive && slices.Contains(hook.LineIDs, e.LineID) && slices.Contains(hook.Events, e.Name) &&
		e.At >= hook.CreatedAt && (e.SandboxOwner == nil || *e.SandboxOwner == hook.Owner) && hook.Wakes(e.Name, e.EventSubject, nil)
}
