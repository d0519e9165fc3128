package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Webhook is a receiver of the events of its lines.
type Webhook struct {
	ID string `json:"id"`
	// LineIDs are its lines: the one it was registered for, or every line
	// the registering key could use when it named none.
	LineIDs []string `json:"line_ids"`
	// Owner is the owner of the key that created it. On the sandbox line
	// it receives only the events of its owner's sandbox.
	Owner  string   `json:"owner,omitempty"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// Wake is what else decides the events it receives: the arrivals and
	// filters of message events, and the sender gating of the agent key
	// that created it.
	Wake
	// Secret signs deliveries. It is kept in clear: signing needs it.
	Secret    string `json:"secret"`
	IsActive  bool   `json:"is_active"`
	CreatedAt int64  `json:"created_at"`
	// FailingSince is when the current unbroken run of failed attempts
	// began; 0 when the last attempt succeeded.
	FailingSince int64 `json:"failing_since,omitempty"`
	// DisabledAt is when the webhook was made inactive for failing too long.
	DisabledAt int64 `json:"disabled_at,omitempty"`
}

// UnmarshalJSON reads the records of webhooks stored before a webhook had
// several lines, whose one line was line_id.
func (w *Webhook) UnmarshalJSON(b []byte) error {
	type fields Webhook // without this method
	var v struct {
		fields
		LineID string `json:"line_id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*w = Webhook(v.fields)
	if len(w.LineIDs) == 0 && v.LineID != "" {
		w.LineIDs = []string{v.LineID}
	}
	return nil
}

// indexLines adds (or, with del, removes) w under each of its lines.
func (w Webhook) indexLines(lines *bolt.Bucket, del bool) error {
	for _, l := range w.LineIDs {
		k := join([]byte(l), []byte(w.ID))
		var err error
		if del {
			err = lines.Delete(k)
		} else {
			err = lines.Put(k, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// Delivery is one event on its way to one webhook. It carries a snapshot of
// what the event is about, taken in the transaction that caused it.
type Delivery struct {
	ID        string `json:"id"`
	WebhookID string `json:"webhook_id"`
	LineID    string `json:"line_id"`
	ChatID    string `json:"chat_id"`
	Event     string `json:"event"`
	EventSubject
	Status        string `json:"status"`
	Attempts      int    `json:"attempts"`
	CreatedAt     int64  `json:"created_at"`
	NextAttemptAt int64  `json:"next_attempt_at"`
	CompletedAt   int64  `json:"completed_at,omitempty"`
	LastStatus    int    `json:"last_status,omitempty"`
	LastError     string `json:"last_error,omitempty"`
}

// Attempt is one try at a delivery, kept for the operator.
type Attempt struct {
	DeliveryID string `json:"delivery_id"`
	WebhookID  string `json:"webhook_id"`
	Event      string `json:"event"`
	N          int    `json:"n"` // 1 for the first attempt
	At         int64  `json:"at"`
	StatusCode int    `json:"status_code,omitempty"` // 0 when no answer came
	LatencyMs  int64  `json:"latency_ms"`
	Error      string `json:"error,omitempty"` // "" on success
}

// Errors of webhook operations.
var ErrWebhookInactive = errors.New("webhook is inactive")

// CreateWebhook stores a new, active webhook.
func (db *DB) CreateWebhook(ctx context.Context, w Webhook) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := putJSON(tx.Bucket(bktWebhooks), []byte(w.ID), w); err != nil {
			return err
		}
		tx.OnCommit(db.signalWebhooks) // the dispatcher starts its worker
		db.noteControl(tx, ControlChange{Kind: ControlWebhook, ID: w.ID, Webhook: &w})
		return w.indexLines(tx.Bucket(bktWebhookLines), false)
	})
}

// WebhookByID returns a webhook, active or not.
func (db *DB) WebhookByID(ctx context.Context, id string) (Webhook, error) {
	var w Webhook
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bktWebhooks), []byte(id), &w) })
	return w, err
}

// Webhooks lists every webhook, or a line's when lineID is set, oldest first.
func (db *DB) Webhooks(ctx context.Context, lineID string) ([]Webhook, error) {
	out := []Webhook{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		hooks := tx.Bucket(bktWebhooks)
		if lineID == "" {
			return hooks.ForEach(func(k, v []byte) error {
				var w Webhook
				if err := json.Unmarshal(v, &w); err != nil {
					return fmt.Errorf("decode webhook %s: %w", k, err)
				}
				out = append(out, w)
				return nil
			})
		}
		return lineWebhooks(tx, lineID, func(w Webhook) { out = append(out, w) })
	})
	return out, err
}

func lineWebhooks(tx *bolt.Tx, lineID string, visit func(Webhook)) error {
	hooks := tx.Bucket(bktWebhooks)
	prefix := []byte(lineID)
	c := tx.Bucket(bktWebhookLines).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		var w Webhook
		if err := getJSON(hooks, k[len(prefix):], &w); err != nil {
			return fmt.Errorf("webhook %s: %w", k[len(prefix):], err)
		}
		visit(w)
	}
	return nil
}

// DeleteWebhook removes a webhook. Its pending deliveries fail; the record
// of past attempts stays until it ages out.
func (db *DB) DeleteWebhook(ctx context.Context, id string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		var w Webhook
		if err := getJSON(tx.Bucket(bktWebhooks), []byte(id), &w); err != nil {
			return err
		}
		if err := failPending(tx, id, "the webhook was deleted", nowMillis()); err != nil {
			return err
		}
		if err := w.indexLines(tx.Bucket(bktWebhookLines), true); err != nil {
			return err
		}
		db.noteControl(tx, ControlChange{Kind: ControlWebhook, ID: id, Deleted: true})
		return tx.Bucket(bktWebhooks).Delete([]byte(id))
	})
}

// failPending fails every pending delivery of a webhook.
func failPending(tx *bolt.Tx, webhookID, reason string, now int64) error {
	due := tx.Bucket(bktDeliveriesDue)
	var keys [][]byte
	prefix := []byte(webhookID)
	c := due.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		keys = append(keys, bytes.Clone(k))
		var d Delivery
		if err := getJSON(tx.Bucket(bktDeliveries), v, &d); err != nil {
			return fmt.Errorf("delivery %s: %w", v, err)
		}
		d.Status, d.CompletedAt, d.LastError = DeliveryFailed, now, reason
		if err := putJSON(tx.Bucket(bktDeliveries), []byte(d.ID), d); err != nil {
			return err
		}
	}
	return deleteKeys(due, keys)
}

// EventSubject is what an event is about: one of its fields is set.
type EventSubject struct {
	Message    *Message    `json:"message,omitempty"`
	Reaction   *Reaction   `json:"reaction,omitempty"`
	Receipt    *Receipt    `json:"receipt,omitempty"`
	ChatUpdate *ChatUpdate `json:"chat_update,omitempty"`
	// Contact is a contact opting out of the line's messages or back in.
	Contact *ContactChange `json:"contact,omitempty"`
	Handoff *Handoff       `json:"handoff,omitempty"`
	Lease   *Lease         `json:"lease,omitempty"`
	// Arrival is, for a message event, api.ArrivalCatchUp when the
	// network reported the message late ("" is live); ChatFilter is its
	// chat's Filter when the event was recorded.
	Arrival    string `json:"arrival,omitempty"`
	ChatFilter string `json:"chat_filter,omitempty"`
	// SelfChat is set on the events of the owner's chat with themselves
	// (selfchat.go), as queueEvent found it.
	SelfChat bool `json:"self_chat,omitempty"`
}

// contact is the contact whose doing the subject is: the sender of a
// contact's message or tapback, the reader of a receipt; "" for the line's
// own doings and for changes to a chat or to a contact's standing.
func (s EventSubject) contact() string {
	switch {
	case s.Message != nil && !s.Message.IsFromMe:
		return s.Message.Sender
	case s.Reaction != nil && !s.Reaction.IsFromMe:
		return s.Reaction.Sender
	case s.Receipt != nil:
		return s.Receipt.Handle
	}
	return ""
}

// queueEvent records an event and creates a delivery of it for each active
// webhook of the line that subscribes to it, in the transaction that stores
// what the event is about: the event is queued if and only if that commits.
//
// What a blocked contact did (its message, an edit or unsend of it, its
// tapback, its read receipt) is stored and makes no event.
func (db *DB) queueEvent(tx *bolt.Tx, event, lineID, chatID string, subject EventSubject) error {
	if h := subject.contact(); h != "" && blocked(tx, lineID, h) {
		return nil
	}
	now := nowMillis()
	sandboxOwner, err := db.sandboxEventOwner(tx, lineID, chatID)
	if err != nil {
		return err
	}
	chat, err := eventChat(tx, chatID)
	if err != nil {
		return err
	}
	if subject.Message != nil && chat != nil {
		subject.ChatFilter = chat.Filter
	}
	if line, ok := db.LineByID(lineID); ok && chat != nil && line.IsSelfChat(*chat) {
		subject.SelfChat = true
	}
	if err := db.appendEvent(tx, Event{Name: event, LineID: lineID, ChatID: chatID, At: now, SandboxOwner: sandboxOwner, EventSubject: subject}); err != nil {
		return err
	}
	if db.fleetDeliveries.Load() {
		return nil // the fleet's consumers deliver from the events stream
	}
	var hooks []Webhook
	err = lineWebhooks(tx, lineID, func(w Webhook) {
		if w.IsActive && slices.Contains(w.Events, event) && (sandboxOwner == nil || w.Owner == *sandboxOwner) && w.Wakes(event, subject, chat) {
			hooks = append(hooks, w)
		}
	})
	if err != nil || len(hooks) == 0 {
		return err
	}
	for _, w := range hooks {
		d := Delivery{ID: NewID("dlv_"), WebhookID: w.ID, LineID: lineID, ChatID: chatID, Event: event, EventSubject: subject,
			Status: DeliveryPending, CreatedAt: now, NextAttemptAt: now}
		if err := putJSON(appendOnly(tx, bktDeliveries), []byte(d.ID), d); err != nil {
			return err
		}
		if err := scheduleDelivery(tx, d); err != nil {
			return err
		}
	}
	tx.OnCommit(db.signalWebhooks)
	return nil
}

// eventChat is the chat an event is about, nil when there is none.
func eventChat(tx *bolt.Tx, chatID string) (*Chat, error) {
	if chatID == "" {
		return nil, nil
	}
	var c Chat
	err := getJSON(tx.Bucket(bktChats), []byte(chatID), &c)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// sandboxEventOwner is nil for an event outside the sandbox line, and
// otherwise the owner whose sandbox chat it happened in ("" for a chat no
// owner is paired with: its events go nowhere).
func (db *DB) sandboxEventOwner(tx *bolt.Tx, lineID, chatID string) (*string, error) {
	line, ok := db.LineByID(lineID)
	if !ok || !line.IsSandbox {
		return nil, nil
	}
	owner := ""
	var c Chat
	err := getJSON(tx.Bucket(bktChats), []byte(chatID), &c)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if err == nil && !c.IsGroup {
		owner = sandboxOwnerOf(tx, c.Identifier)
	}
	return &owner, nil
}

func scheduleDelivery(tx *bolt.Tx, d Delivery) error {
	due := tx.Bucket(bktDeliveriesDue)
	seq, err := due.NextSequence()
	if err != nil {
		return err
	}
	return due.Put(dueKey(d.WebhookID, d.NextAttemptAt, seq), []byte(d.ID))
}

// dueKey orders a webhook's deliveries by when they are due, then by when
// they were scheduled.
func dueKey(webhookID string, at int64, seq uint64) []byte {
	return join([]byte(webhookID), i64(at), u64(seq))
}

// WebhooksReady is signalled after a commit that queued deliveries.
func (db *DB) WebhooksReady() <-chan struct{} { return db.webhooksReady }

func (db *DB) signalWebhooks() {
	select {
	case db.webhooksReady <- struct{}{}:
	default:
	}
}

// DueDelivery is a delivery that is due, with the key that schedules it.
type DueDelivery struct {
	Delivery
	Key []byte
}

// DueDeliveries returns up to max of a webhook's deliveries due at now, in
// order, leaving out those skip reports (the ones already under way).
// nextDue is when the first one not yet due falls due, 0 when none is.
func (db *DB) DueDeliveries(ctx context.Context, webhookID string, now int64, max int, skip func(id string) bool) (due []DueDelivery, nextDue int64, err error) {
	prefix := []byte(webhookID)
	err = db.bolt.View(func(tx *bolt.Tx) error {
		deliveries := tx.Bucket(bktDeliveries)
		c := tx.Bucket(bktDeliveriesDue).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			at := int64(binary.BigEndian.Uint64(k[len(prefix):]))
			if at > now {
				nextDue = at
				return nil
			}
			if len(due) == max {
				nextDue = at
				return nil
			}
			if skip(string(v)) {
				continue
			}
			var d DueDelivery
			if err := getJSON(deliveries, v, &d.Delivery); err != nil {
				return fmt.Errorf("delivery %s: %w", v, err)
			}
			d.Key = bytes.Clone(k)
			due = append(due, d)
		}
		return nil
	})
	return due, nextDue, err
}

// AttemptResult is the outcome of one attempt at a delivery.
type AttemptResult struct {
	Delivery DueDelivery
	Attempt  Attempt
	// RetryAt is when to try again after a failure; 0 means the delivery
	// has failed for good.
	RetryAt int64
	// Postpone, when set, reschedules the delivery to RetryAt without
	// counting an attempt: it waits behind an earlier event of its chat.
	Postpone bool
}

// RecordAttempts records the outcomes of attempts in one transaction. A
// failure that leaves the webhook failing for disableAfter ms or more makes it
// inactive and fails its pending deliveries; a success clears the failing run.
// A result whose delivery is no longer scheduled by its key (the webhook was
// deleted meanwhile) is dropped.
func (db *DB) RecordAttempts(ctx context.Context, disableAfter int64, results ...AttemptResult) (disabled []string, err error) {
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		disabled = nil
		now := nowMillis()
		hooks := map[string]*Webhook{}
		due, deliveries := tx.Bucket(bktDeliveriesDue), appendOnly(tx, bktDeliveries)
		for _, res := range results {
			d := res.Delivery.Delivery
			if due.Get(res.Delivery.Key) == nil {
				continue
			}
			if err := due.Delete(res.Delivery.Key); err != nil {
				return err
			}
			w := hooks[d.WebhookID]
			if w == nil {
				w = &Webhook{}
				if err := getJSON(tx.Bucket(bktWebhooks), []byte(d.WebhookID), w); err != nil {
					return fmt.Errorf("webhook %s: %w", d.WebhookID, err)
				}
				hooks[d.WebhookID] = w
			}
			if res.Postpone {
				d.NextAttemptAt = res.RetryAt
				if err := putJSON(deliveries, []byte(d.ID), d); err != nil {
					return err
				}
				if err := scheduleDelivery(tx, d); err != nil {
					return err
				}
				continue
			}
			a := res.Attempt
			d.Attempts++
			a.N, a.DeliveryID, a.WebhookID, a.Event = d.Attempts, d.ID, d.WebhookID, d.Event
			d.LastStatus, d.LastError = a.StatusCode, a.Error
			switch {
			case a.Error == "":
				d.Status, d.CompletedAt = DeliverySucceeded, now
				w.FailingSince = 0
			case res.RetryAt > 0 && w.IsActive:
				d.NextAttemptAt = res.RetryAt
			default:
				d.Status, d.CompletedAt = DeliveryFailed, now
			}
			if a.Error != "" && w.FailingSince == 0 {
				w.FailingSince = a.At
			}
			if err := putAttempt(tx, a); err != nil {
				return err
			}
			if err := putJSON(deliveries, []byte(d.ID), d); err != nil {
				return err
			}
			if d.Status == DeliveryPending {
				if err := scheduleDelivery(tx, d); err != nil {
					return err
				}
			}
		}
		for id, w := range hooks {
			if w.IsActive && w.FailingSince > 0 && now-w.FailingSince >= disableAfter {
				w.IsActive, w.DisabledAt = false, now
				disabled = append(disabled, id)
				if err := failPending(tx, id, "the webhook was disabled after failing since "+fmt.Sprint(w.FailingSince), now); err != nil {
					return err
				}
			}
			db.noteWebhook(tx, *w)
			if err := putJSON(tx.Bucket(bktWebhooks), []byte(id), w); err != nil {
				return err
			}
		}
		return nil
	})
	return disabled, err
}

func putAttempt(tx *bolt.Tx, a Attempt) error {
	b := appendOnly(tx, bktAttempts)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return putJSON(b, join(i64(a.At), u64(seq)), a)
}

// AttemptFilter selects attempts to list.
type AttemptFilter struct {
	WebhookID  string
	DeliveryID string
	Limit      int
}

// Attempts lists recorded attempts, newest first.
func (db *DB) Attempts(ctx context.Context, f AttemptFilter) ([]Attempt, error) {
	out := []Attempt{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktAttempts).Cursor()
		for k, v := c.Last(); k != nil && len(out) < f.Limit; k, v = c.Prev() {
			var a Attempt
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode attempt %x: %w", k, err)
			}
			if f.WebhookID != "" && a.WebhookID != f.WebhookID || f.DeliveryID != "" && a.DeliveryID != f.DeliveryID {
				continue
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// DeliveryByID returns a delivery.
func (db *DB) DeliveryByID(ctx context.Context, id string) (Delivery, error) {
	var d Delivery
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bktDeliveries), []byte(id), &d) })
	return d, err
}

// Redeliver makes a delivery due again now, whatever its state: the
// operator's "send it again". Its attempts keep counting. The webhook must be
// active (ErrWebhookInactive).
func (db *DB) Redeliver(ctx context.Context, id string) (Delivery, error) {
	var d Delivery
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bktDeliveries), []byte(id), &d); err != nil {
			return err
		}
		var w Webhook
		if err := getJSON(tx.Bucket(bktWebhooks), []byte(d.WebhookID), &w); err != nil {
			return fmt.Errorf("webhook %s: %w", d.WebhookID, err)
		}
		if !w.IsActive {
			return ErrWebhookInactive
		}
		if d.Status == DeliveryPending {
			return nil // already scheduled
		}
		d.Status, d.CompletedAt, d.NextAttemptAt = DeliveryPending, 0, nowMillis()
		if err := putJSON(tx.Bucket(bktDeliveries), []byte(d.ID), d); err != nil {
			return err
		}
		tx.OnCommit(db.signalWebhooks)
		return scheduleDelivery(tx, d)
	})
	return d, err
}

// PurgeDeliveries forgets finished deliveries and attempts older than
// before (Unix ms).
func (db *DB) PurgeDeliveries(ctx context.Context, before int64) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		attempts := tx.Bucket(bktAttempts)
		var old [][]byte
		c := attempts.Cursor()
		for k, _ := c.First(); k != nil && int64(binary.BigEndian.Uint64(k)) < before; k, _ = c.Next() {
			old = append(old, bytes.Clone(k))
		}
		if err := deleteKeys(attempts, old); err != nil {
			return err
		}
		deliveries := tx.Bucket(bktDeliveries)
		old = nil
		err := deliveries.ForEach(func(k, v []byte) error {
			var d Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode delivery %s: %w", k, err)
			}
			if d.Status != DeliveryPending && d.CompletedAt < before {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		n = len(old)
		return deleteKeys(deliveries, old)
	})
	return n, err
}
