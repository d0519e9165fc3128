package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
)

// Handoff states: the owner holds a chat, or gave it back to the agents.
const (
	HandoffHumanActive  = "human_active"
	HandoffAgentResumed = "agent_resumed"
)

// Why a lease ended (Lease.Released).
const (
	LeaseReleased = "released"
	LeaseExpired  = "expired"
)

// Handoff is a chat the line's owner took over by writing in it from
// another device: agent keys may not write to it until Until (Unix ms).
// As an event's subject it also says the change (State).
type Handoff struct {
	ChatID string `json:"chat_id"`
	LineID string `json:"line_id"`
	State  string `json:"state"`
	Until  int64  `json:"until,omitempty"`
	// GUID is the owner's message that took the chat over.
	GUID string `json:"guid,omitempty"`
}

// Lease is a chat held by one API key: other agent keys may not write to
// it until it expires or is released.
type Lease struct {
	ChatID    string `json:"chat_id"`
	LineID    string `json:"line_id"`
	KeyID     string `json:"key_id"`
	KeyLabel  string `json:"key_label"`
	Label     string `json:"label,omitempty"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
	// Released is, as the subject of chat.released, why the lease ended:
	// released (by its holder, another key's override or the console) or
	// expired.
	Released string `json:"released,omitempty"`
}

// Live reports whether the lease still holds at now (Unix ms).
func (l Lease) Live(now int64) bool { return l.ExpiresAt > now }

// ErrHumanActive is a write of an agent key to a chat its owner took over.
type ErrHumanActive struct{ Until int64 }

func (e *ErrHumanActive) Error() string {
	return fmt.Sprintf("the owner took the chat over until %d", e.Until)
}

// ErrChatLeased is a chat another key holds.
type ErrChatLeased struct{ Lease Lease }

func (e *ErrChatLeased) Error() string {
	return fmt.Sprintf("chat leased by key %s until %d", e.Lease.KeyID, e.Lease.ExpiresAt)
}

// AgentCheck is what an agent key's write must pass, checked in the
// transaction that stores the write: the owner has not taken its chat
// over, and no other key holds its lease, at Now (Unix ms); and the key's
// Gate allows its recipients.
type AgentCheck struct {
	KeyID  string
	ChatID string // "" for a write that makes a chat (a new group)
	Now    int64
	Gate   Gate
}

// checkAgent refuses an agent's write of item (an *ErrHumanActive, an
// *ErrChatLeased or a *ContactError). The owner's chat with themselves
// is no contact's: the gate lets an agent answer the owner there.
func (db *DB) checkAgent(tx *bolt.Tx, c *AgentCheck, item OutboxItem) error {
	if c == nil {
		return nil
	}
	if !db.inSelfChat(tx, item.LineID, item.ChatID) {
		if err := c.Gate.refuse(tx, item); err != nil {
			return err
		}
	}
	if c.ChatID == "" {
		return nil
	}
	var h Handoff
	err := getJSON(tx.Bucket(bktHandoffs), []byte(c.ChatID), &h)
	switch {
	case err == nil && h.Until > c.Now:
		return &ErrHumanActive{Until: h.Until}
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	var l Lease
	err = getJSON(tx.Bucket(bktLeases), []byte(c.ChatID), &l)
	switch {
	case err == nil && l.Live(c.Now) && l.KeyID != c.KeyID:
		return &ErrChatLeased{Lease: l}
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	return nil
}

// takeOver records that the owner wrote message m in chat c from another
// device: the chat is the owner's for the line's quiet window from when m
// was sent (no later than it was recorded: a clock ahead gains nothing),
// with its chat.handoff event. A message whose window had passed when it
// was recorded (caught up late), or that ends before the window of a
// later one, changes nothing.
func (db *DB) takeOver(tx *bolt.Tx, line Line, c Chat, m Message) error {
	if line.TakeoverQuiet <= 0 {
		return nil
	}
	until := min(m.SentAt, m.SyncedAt) + line.TakeoverQuiet
	if until <= m.SyncedAt {
		return nil
	}
	var held Handoff
	err := getJSON(tx.Bucket(bktHandoffs), []byte(c.ID), &held)
	switch {
	case err == nil && held.Until >= until:
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	h := Handoff{ChatID: c.ID, LineID: c.LineID, State: HandoffHumanActive, Until: until, GUID: m.GUID}
	if err := putJSON(tx.Bucket(bktHandoffs), []byte(c.ID), h); err != nil {
		return err
	}
	return db.queueEvent(tx, api.EventChatHandoff, c.LineID, c.ID, EventSubject{Handoff: &h})
}

// undoTakeOver forgets the takeover that message guid made, when that
// message turns out to be an outbox item's (adoptMessage): the network
// reported Blueline's own send before its send was recorded. The receivers
// had its human_active event: the next ExpireAgentHolds tells them
// agent_resumed; no write is refused meanwhile.
func undoTakeOver(tx *bolt.Tx, chatID, guid string) error {
	var h Handoff
	err := getJSON(tx.Bucket(bktHandoffs), []byte(chatID), &h)
	if errors.Is(err, ErrNotFound) || err == nil && h.GUID != guid {
		return nil
	}
	if err != nil {
		return err
	}
	h.Until = 0
	return putJSON(tx.Bucket(bktHandoffs), []byte(chatID), h)
}

// HandoffOf is chat chatID's handoff: ErrNotFound when the owner has not
// taken it over, or gave it back. Its Until may have passed.
func (db *DB) HandoffOf(ctx context.Context, chatID string) (Handoff, error) {
	var h Handoff
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bktHandoffs), []byte(chatID), &h) })
	return h, err
}

// ResumeAgents gives a chat the owner took over back to the agents at
// once, with a chat.handoff event (agent_resumed). It reports whether the
// chat was taken over at now (Unix ms); one with no takeover recorded is
// left alone, with no event.
func (db *DB) ResumeAgents(ctx context.Context, chatID string, now int64) (bool, error) {
	var active bool
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktHandoffs)
		var h Handoff
		err := getJSON(b, []byte(chatID), &h)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := b.Delete([]byte(chatID)); err != nil {
			return err
		}
		// One that ran out is resumed here rather than by ExpireAgentHolds:
		// its event is due either way.
		active = h.Until > now
		h.State, h.Until = HandoffAgentResumed, 0
		return db.queueEvent(tx, api.EventChatHandoff, h.LineID, chatID, EventSubject{Handoff: &h})
	})
	return active, err
}

// AcquireLease gives lease l (its ChatID, LineID, key and expiry) to its
// key: a new lease, or the key's own renewed, with a chat.leased event.
// Another key's live lease is an *ErrChatLeased unless override, which
// releases it first (chat.released).
func (db *DB) AcquireLease(ctx context.Context, l Lease, override bool, now int64) (Lease, error) {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktLeases)
		var held Lease
		err := getJSON(b, []byte(l.ChatID), &held)
		switch {
		case errors.Is(err, ErrNotFound):
			l.CreatedAt = now
		case err != nil:
			return err
		case !held.Live(now):
			if err := releaseLease(db, tx, held, LeaseExpired); err != nil {
				return err
			}
			l.CreatedAt = now
		case held.KeyID == l.KeyID:
			l.CreatedAt = held.CreatedAt
		case !override:
			return &ErrChatLeased{Lease: held}
		default:
			if err := releaseLease(db, tx, held, LeaseReleased); err != nil {
				return err
			}
			l.CreatedAt = now
		}
		if err := putJSON(b, []byte(l.ChatID), l); err != nil {
			return err
		}
		return db.queueEvent(tx, api.EventChatLeased, l.LineID, l.ChatID, EventSubject{Lease: &l})
	})
	return l, err
}

// ReleaseLease ends chat chatID's lease: its holder keyID's, or anyone's
// when override. No live lease is ErrNotFound; another key's without
// override an *ErrChatLeased.
func (db *DB) ReleaseLease(ctx context.Context, chatID, keyID string, override bool, now int64) (Lease, error) {
	var held Lease
	var expired bool
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		err := getJSON(tx.Bucket(bktLeases), []byte(chatID), &held)
		switch {
		case err != nil:
			return err
		case !held.Live(now):
			// Ended already: told now rather than by ExpireAgentHolds.
			expired = true
			return releaseLease(db, tx, held, LeaseExpired)
		case held.KeyID != keyID && !override:
			return &ErrChatLeased{Lease: held}
		}
		return releaseLease(db, tx, held, LeaseReleased)
	})
	if err == nil && expired {
		return held, ErrNotFound
	}
	return held, err
}

// ExpireAgentHolds ends the takeovers and leases that ran out at now
// (Unix ms), each with its event (chat.handoff agent_resumed, chat.released
// expired), and returns how many. Writes are checked against the clock,
// not against this: it only tells the receivers and frees the records.
func (db *DB) ExpireAgentHolds(ctx context.Context, now int64) (int, error) {
	var n int
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		var handoffs []Handoff
		var leases []Lease
		err := tx.Bucket(bktHandoffs).ForEach(func(_, v []byte) error {
			var h Handoff
			if err := json.Unmarshal(v, &h); err != nil {
				return err
			}
			if h.Until <= now {
				handoffs = append(handoffs, h)
			}
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bktLeases).ForEach(func(_, v []byte) error {
			var l Lease
			if err := json.Unmarshal(v, &l); err != nil {
				return err
			}
			if !l.Live(now) {
				leases = append(leases, l)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, h := range handoffs {
			if err := tx.Bucket(bktHandoffs).Delete([]byte(h.ChatID)); err != nil {
				return err
			}
			h.State, h.Until = HandoffAgentResumed, 0
			if err := db.queueEvent(tx, api.EventChatHandoff, h.LineID, h.ChatID, EventSubject{Handoff: &h}); err != nil {
				return err
			}
		}
		for _, l := range leases {
			if err := releaseLease(db, tx, l, LeaseExpired); err != nil {
				return err
			}
		}
		n = len(handoffs) + len(leases)
		return nil
	})
	return n, err
}

// releaseLease deletes lease l with its chat.released event.
func releaseLease(db *DB, tx *bolt.Tx, l Lease, why string) error {
	if err := tx.Bucket(bktLeases).Delete([]byte(l.ChatID)); err != nil {
		return err
	}
	l.Released = why
	return db.queueEvent(tx, api.EventChatReleased, l.LineID, l.ChatID, EventSubject{Lease: &l})
}

// LeaseOf is chat chatID's live lease at now (Unix ms), or ErrNotFound.
func (db *DB) LeaseOf(ctx context.Context, chatID string, now int64) (Lease, error) {
	var l Lease
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bktLeases), []byte(chatID), &l) })
	if err == nil && !l.Live(now) {
		return Lease{}, ErrNotFound
	}
	return l, err
}

// holdBack applies again, as delivery claims an agent key's due item at
// now (Unix ms), the agent rules that can change after it was accepted:
// its contact opted out or was blocked, the owner took its chat over,
// another key leased it. A refused item is failed with the API's code for
// the refusal (contact_opted_out, contact_blocked, human_active,
// chat_leased), or, refused human_active on a line with takeover = "hold",
// becomes a draft waiting for approval as it would have at acceptance;
// either is stored, in the claim's transaction, and held is true. An item
// the owner approved passes the takeover and the lease (the owner
// answered it); one handed to a network that sends at most once, or
// claimed when the daemon stopped, passes all of them, as it may have
// gone out already.
func (db *DB) holdBack(tx *bolt.Tx, item *OutboxItem, now int64) (held bool, err error) {
	if item.AgentKeyID == "" || item.HandedAt != 0 || item.MayHaveSent {
		return false, nil
	}
	refusal := refuseContacts(tx, *item)
	if refusal == nil && item.Approval != api.ApprovalApproved {
		refusal = db.checkAgent(tx, &AgentCheck{KeyID: item.AgentKeyID, ChatID: item.ChatID, Now: now}, *item)
	}
	code := HandoffHumanActive
	contact, isContact := errors.AsType[*ContactError](refusal)
	_, isLeased := errors.AsType[*ErrChatLeased](refusal)
	_, isHuman := errors.AsType[*ErrHumanActive](refusal)
	switch {
	case refusal == nil:
		return false, nil
	case isContact && errors.Is(contact.Err, ErrContactBlocked):
		code = "contact_blocked"
	case isContact:
		code = "contact_opted_out"
	case isLeased:
		code = "chat_leased"
	case !isHuman:
		return false, refusal
	default:
		if line, _ := db.LineByID(item.LineID); line.TakeoverHold && item.Draftable() {
			item.Approval, item.ApprovalExpiresAt = api.ApprovalWaiting, now+line.ApprovalTTL
			if err := putJSON(tx.Bucket(bktOutbox), []byte(item.ID), *item); err != nil {
				return false, err
			}
			return true, awaitApproval(db, tx, *item)
		}
	}
	if err := abandonPending(tx, item, code, now); err != nil {
		return false, err
	}
	return true, putJSON(tx.Bucket(bktOutbox), []byte(item.ID), *item)
}

// Draftable reports whether the item can wait for the owner's approval:
// what puts words in a contact's Messages (a message, an audio message or
// voice note, an edit, a new group's first message). Reactions, typing,
// receipts, unsends and group changes never wait.
func (item OutboxItem) Draftable() bool {
	switch item.Kind {
	case KindMessage, KindEdit, KindGroupCreate:
		return true
	}
	return false
}
