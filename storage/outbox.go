package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
)

// Outbox item states.
const (
	StatusPending = "pending"
	StatusClaimed = "claimed"
	StatusSent    = "sent"
	StatusFailed  = "failed"
)

// Kinds of outbox items.
const (
	KindMessage  = "message" // a text, attachment or voice memo
	KindReaction = "reaction"
	KindTyping   = "typing"
	KindRead     = "read" // a read receipt
	// Changes to what the line sent, and group chats (see bridge.Edit,
	// bridge.Unsend, bridge.NewGroup, bridge.GroupChange).
	KindEdit        = "edit"
	KindUnsend      = "unsend"
	KindGroupCreate = "group_create"
	KindGroupChange = "group_change"
)

// OutboxItem is one accepted write waiting for, or done with, delivery.
type OutboxItem struct {
	ID            string          `json:"id"`
	LineID        string          `json:"line_id"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	Payload       json.RawMessage `json:"payload"`
	CompletedAt   int64           `json:"completed_at"`
	Error         string          `json:"error"`
	Attempts      int             `json:"attempts"`
	MaxAttempts   int             `json:"max_attempts"`
	CreatedAt     int64           `json:"created_at"`
	NextAttemptAt int64           `json:"next_attempt_at"`
	// SendAt is when a scheduled item falls due (Unix ms); 0 for at once.
	SendAt int64 `json:"send_at,omitempty"`
	// Approval is where the owner's approval of an agent's draft stands
	// (an api.Approval… constant); "" for a write that needed none. A waiting
	// item is pending but not in the due queue: delivery cannot claim it.
	// ApprovalExpiresAt is when a waiting one expires (Unix ms);
	// ApprovalBy who answered it (a key ID, "console", "host", …).
	Approval          string `json:"approval,omitempty"`
	ApprovalExpiresAt int64  `json:"approval_expires_at,omitempty"`
	ApprovalBy        string `json:"approval_by,omitempty"`
	// PromptFor is, on the message Blueline writes in the owner's chat
	// with themselves to ask for a draft's approval, that draft's ID
	// (selfapproval.go).
	PromptFor string `json:"prompt_for,omitempty"`
	// AgentKeyID is the agent key that wrote the item ("" for other
	// keys'): delivery checks the agent rules again when it falls due
	// (holdBack).
	AgentKeyID string `json:"agent_key_id,omitempty"`

	// What to send, resolved when the request was accepted.
	ChatID         string   `json:"chat_id"`
	Text           *string  `json:"text"`
	FileIDs        []string `json:"file_ids"`
	ReplyToGUID    string   `json:"reply_to_guid"`
	IsAudioMessage bool     `json:"is_audio_message,omitempty"`
	// A reaction's target message and what to do to it.
	TargetMessageID string `json:"target_message_id,omitempty"`
	TargetGUID      string `json:"target_guid,omitempty"`
	ReactionType    string `json:"reaction_type,omitempty"`
	Remove          bool   `json:"remove,omitempty"`
	// ReactionEmoji is the emoji of an emoji tapback.
	ReactionEmoji string `json:"reaction_emoji,omitempty"`
	// TypingOn is the state a typing item sets.
	TypingOn bool `json:"typing_on,omitempty"`
	// A new group's members and name (KindGroupCreate; Text is its first
	// message), or a group change: its action (a bridge.Chat… constant),
	// the member added or removed, the new name.
	Participants []string `json:"participants,omitempty"`
	GroupName    string   `json:"group_name,omitempty"`
	GroupAction  string   `json:"group_action,omitempty"`
	Participant  string   `json:"participant,omitempty"`
	// MessageID is the stored message once the item is sent.
	MessageID string `json:"message_id"`

	// HandedAt is when the item was last handed to a network that sends at
	// most once (the Messages app): set before the hand-off, so that after
	// a crash the item is looked for there rather than sent again. 0 when
	// it was not, or when the network certainly did not take it.
	HandedAt int64 `json:"handed_at,omitempty"`
	// MayHaveSent marks an item made due again after a crash while it
	// was claimed, on any network: its earlier attempt may have gone out,
	// so the rules are not applied to it again (holdBack) — failing it
	// then could say "not sent" of a message the contact has. Cleared
	// when an attempt certainly did not reach the network.
	MayHaveSent bool `json:"may_have_sent,omitempty"`
	// The chat GUID and service the message finally went out on, and
	// whether it went out as SMS after iMessage could not reach the
	// recipient.
	SentChatGUID string `json:"sent_chat_guid,omitempty"`
	SentService  string `json:"sent_service,omitempty"`
	SMSFallback  bool   `json:"sms_fallback,omitempty"`
}

// Errors of Enqueue.
var (
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	ErrSandboxQuota        = errors.New("sandbox daily quota reached")
	ErrEditLimit           = errors.New("the message was edited as many times as allowed")
)

// EnqueueRequest is an accepted write to put in the outbox.
type EnqueueRequest struct {
	Item OutboxItem
	// IdempotencyKey, when set, makes a retry of the same request within
	// IdempotencyTTL return the first item. The caller scopes it to the API
	// key; RequestHash identifies "the same request".
	IdempotencyKey string
	RequestHash    []byte
	// SandboxDay, when set, counts the item against SandboxOwner's
	// sandbox quota of SandboxQuota sends on that UTC day.
	SandboxDay   string
	SandboxOwner string
	SandboxQuota int
	// EditLimit, for an edit (KindEdit), is how many edits its message may
	// have: counted in the transaction, so that concurrent edits cannot
	// pass it together.
	EditLimit int
	// Guard, when set, refuses a message its line's Apple ID guard does
	// not allow (a *GuardError). Messages are counted for the guard's
	// standing whether or not it is set.
	Guard *GuardLimits
	// Agent, for an agent key's write to a chat, refuses it while the
	// line's owner has the chat (*ErrHumanActive) or another key leases
	// it (*ErrChatLeased).
	Agent *AgentCheck
	// Approval, for an agent key's message, says when it waits for the
	// owner's approval instead of going out.
	Approval *ApprovalCheck
}

// IdempotencyTTL is how long an Idempotency-Key is remembered.
const IdempotencyTTL = 24 * 60 * 60 * 1000 // ms

type idempotencyRecord struct {
	Hash      []byte `json:"hash"`
	OutboxID  string `json:"outbox_id"`
	CreatedAt int64  `json:"created_at"`
}

// Enqueue durably stores a new pending item (the fsync is done when it
// returns) and wakes the delivery worker. With an idempotency key seen
// before, it returns the first item and replayed = true instead.
func (db *DB) Enqueue(ctx context.Context, req EnqueueRequest) (item OutboxItem, replayed bool, err error) {
	now := nowMillis()
	// Batch runs its functions one after another under the single writer:
	// encode outside it, keep only lookups and puts inside.
	newItem := req.Item
	newItem.Status, newItem.CreatedAt, newItem.NextAttemptAt = StatusPending, now, max(now, newItem.SendAt)
	if req.Agent != nil {
		newItem.AgentKeyID = req.Agent.KeyID
	}
	itemJSON, err := json.Marshal(newItem)
	if err != nil {
		return OutboxItem{}, false, err
	}
	draft, draftJSON, err := req.Approval.draft(newItem)
	if err != nil {
		return OutboxItem{}, false, err
	}
	var idemKey, idemJSON []byte
	if req.IdempotencyKey != "" {
		idemKey = []byte(req.IdempotencyKey)
		idemJSON, err = json.Marshal(idempotencyRecord{Hash: req.RequestHash, OutboxID: newItem.ID, CreatedAt: now})
		if err != nil {
			return OutboxItem{}, false, err
		}
	}
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		// Batch may run this function again; start from scratch each time.
		item, replayed = newItem, false
		if idemKey != nil {
			var rec idempotencyRecord
			err := getJSON(tx.Bucket(bktIdempotency), idemKey, &rec)
			if err == nil && now-rec.CreatedAt < IdempotencyTTL {
				if !bytes.Equal(rec.Hash, req.RequestHash) {
					return ErrIdempotencyMismatch
				}
				replayed = true
				return getJSON(tx.Bucket(bktOutbox), []byte(rec.OutboxID), &item)
			}
			if err != nil && err != ErrNotFound {
				return err
			}
		}
		waits, err := req.Approval.waits(db.checkAgent(tx, req.Agent, item))
		if err != nil {
			return err
		}
		stored := itemJSON
		if waits {
			item, stored = draft, draftJSON
		}
		if req.SandboxDay != "" {
			b := tx.Bucket(bktSandbox)
			n := sandboxCount(b, req.SandboxDay, req.SandboxOwner)
			if n >= req.SandboxQuota {
				return ErrSandboxQuota
			}
			if n == 0 {
				if err := dropOldQuotas(b, req.SandboxDay); err != nil {
					return err
				}
			}
			if err := b.Put(quotaKey(req.SandboxDay, req.SandboxOwner), u64(uint64(n+1))); err != nil {
				return err
			}
		}
		if err := refuseContacts(tx, item); err != nil {
			return err
		}
		if item.Kind == KindMessage {
			if err := guardCount(tx, &item, req.Guard, now); err != nil {
				return err
			}
		}
		if req.EditLimit > 0 {
			if err := countEdit(tx, item.TargetMessageID, req.EditLimit, 1); err != nil {
				return err
			}
		}
		if err := appendOnly(tx, bktOutbox).Put([]byte(item.ID), stored); err != nil {
			return err
		}
		if waits {
			if err := awaitApproval(db, tx, item); err != nil {
				return err
			}
			if err := db.promptOwner(tx, item); err != nil {
				return err
			}
		} else if err := scheduleDue(tx, item.ID, item.NextAttemptAt); err != nil {
			return err
		}
		if idemKey != nil {
			return tx.Bucket(bktIdempotency).Put(idemKey, idemJSON)
		}
		return nil
	})
	if err != nil {
		return OutboxItem{}, false, err
	}
	if !replayed && item.Approval == "" {
		// Scheduled items too: the worker learns when they fall due.
		db.signalOutbox()
	}
	return item, replayed, nil
}

// countEdit adds delta to the edits requested of a message (the accepted
// edit items that have not failed), refusing to go beyond limit (0: no
// limit) with ErrEditLimit.
func countEdit(tx *bolt.Tx, messageID string, limit, delta int) error {
	key := messageKey(tx, []byte(messageID))
	if key == nil {
		return fmt.Errorf("message %s: %w", messageID, ErrNotFound)
	}
	var m Message
	if err := loadMessage(tx, key, &m); err != nil {
		return err
	}
	if limit > 0 && m.EditRequests+delta > limit {
		return ErrEditLimit
	}
	m.EditRequests = max(m.EditRequests+delta, 0)
	return storeMessage(tx, key, &m)
}

// dropOldQuotas deletes the sandbox counts of days before today.
func dropOldQuotas(b *bolt.Bucket, today string) error {
	var old [][]byte
	c := b.Cursor()
	prefix, current := []byte("quota/"), quotaKey(today, "")
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if !bytes.HasPrefix(k, current) {
			old = append(old, bytes.Clone(k))
		}
	}
	return deleteKeys(b, old)
}

// deleteKeys deletes after iterating: deleting under a moving cursor can
// skip the key that follows each deleted one.
func deleteKeys(b *bolt.Bucket, keys [][]byte) error {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func scheduleDue(tx *bolt.Tx, id string, at int64) error {
	b := appendOnly(tx, bktOutboxDue)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(join(i64(at), u64(seq)), []byte(id))
}

// OutboxItemByID returns an outbox item.
func (db *DB) OutboxItemByID(ctx context.Context, id string) (OutboxItem, error) {
	var item OutboxItem
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bktOutbox), []byte(id), &item)
	})
	return item, err
}

// ClaimDue claims up to max pending items due at or before now, oldest
// first, counting an attempt on each. An agent key's item that the agent
// rules now refuse is failed or made a draft instead (holdBack). nextDue is when the earliest item
// still pending falls due (0 when none is). It shares a group commit with
// concurrent writes, so claiming under load costs no fsync of its own.
func (db *DB) ClaimDue(ctx context.Context, now int64, max int) (items []OutboxItem, nextDue int64, err error) {
	return db.ClaimDuePaced(ctx, now, max, nil)
}

// Pace holds back due items that may not be claimed yet (a line's pacing).
type Pace interface {
	// Start begins a claim; it may be called again for the same claim,
	// whose transaction can run twice.
	Start(now int64)
	// Hold is when a due item may be claimed, or 0 to claim it now.
	Hold(item OutboxItem) int64
}

// ClaimDuePaced is ClaimDue with pace (nil for none) deciding which due
// items to claim: a held item stays pending, due again when Hold says.
func (db *DB) ClaimDuePaced(ctx context.Context, now int64, max int, pace Pace) (items []OutboxItem, nextDue int64, err error) {
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		items, nextDue = nil, 0
		if pace != nil {
			pace.Start(now)
		}
		outbox, claimed := tx.Bucket(bktOutbox), tx.Bucket(bktOutboxClaimed)
		c := tx.Bucket(bktOutboxDue).Cursor()
		for k, v := c.First(); k != nil; k, v = c.First() {
			at := int64(binary.BigEndian.Uint64(k[:8]))
			if at > now || len(items) == max {
				nextDue = at
				break
			}
			id := bytes.Clone(v)
			if err := c.Delete(); err != nil {
				return err
			}
			var item OutboxItem
			if err := getJSON(outbox, id, &item); err != nil {
				return fmt.Errorf("due item %s: %w", id, err)
			}
			if item.Status != StatusPending || item.Approval == api.ApprovalWaiting {
				continue // cancelled while due; a draft is never due, this only makes sure
			}
			if held, err := db.holdBack(tx, &item, now); err != nil || held {
				if err != nil {
					return fmt.Errorf("due item %s: %w", id, err)
				}
				continue
			}
			if pace != nil {
				if until := pace.Hold(item); until > now {
					item.NextAttemptAt = until
					if err := putJSON(outbox, id, item); err != nil {
						return err
					}
					if err := scheduleDue(tx, item.ID, until); err != nil {
						return err
					}
					continue
				}
			}
			item.Status = StatusClaimed
			item.Attempts++
			if err := putJSON(outbox, id, item); err != nil {
				return err
			}
			if err := claimed.Put(id, nil); err != nil {
				return err
			}
			items = append(items, item)
		}
		return nil
	})
	return items, nextDue, err
}

// Sent is a successful delivery.
type Sent struct {
	OutboxID string
	// Message is what a message item became.
	Message Message
	// At is when the network took a reaction, typing change or read receipt
	// (Unix ms).
	At int64
	// ChatGUID, Service and SMSFallback say where a message went out, when
	// the network tells.
	ChatGUID    string
	Service     string
	SMSFallback bool
	// Chat is the group a KindGroupCreate item created (its ID is used if
	// the chat is new); Message is then its first message.
	Chat Chat
}

// MarkSent records successful deliveries in one transaction: each item
// becomes sent, and what it did is stored: a message in its chat, a reaction
// on its message, a read receipt; a typing change updates the chat's
// indicators. An item that is not claimed (recorded already) is skipped and
// reported in the error; the others are recorded all the same.
func (db *DB) MarkSent(ctx context.Context, sent ...Sent) error {
	var skipped []error
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		skipped = nil
		now := nowMillis()
		// A batch often holds several messages of one chat: load it once.
		type chatState struct{ saved, c Chat }
		chats := map[string]*chatState{}
		for _, s := range sent {
			var item OutboxItem
			if err := finishClaimed(tx, s.OutboxID, &item); err != nil {
				skipped = append(skipped, err)
				continue
			}
			line, _ := db.LineByID(item.LineID)
			switch item.Kind {
			case KindGroupCreate:
				want := s.Chat
				want.LineID, want.IsGroup = item.LineID, true
				c, err := upsertChat(tx, want, chatNews{})
				if err != nil {
					return err
				}
				item.ChatID = c.ID
				fallthrough
			case KindMessage:
				cs := chats[item.ChatID]
				if cs == nil {
					cs = &chatState{}
					if err := getJSON(tx.Bucket(bktChats), []byte(item.ChatID), &cs.c); err != nil {
						return fmt.Errorf("chat %s: %w", item.ChatID, err)
					}
					cs.saved = cs.c
					chats[item.ChatID] = cs
				}
				c := &cs.c
				m := s.Message
				m.ChatID, m.LineID, m.OutboxID = c.ID, c.LineID, item.ID
				if m.Attachments == nil {
					m.Attachments = []Attachment{}
				}
				adopted, err := adoptMessage(tx, &m)
				if err != nil {
					return err
				}
				if !adopted {
					if err := putMessage(tx, &cs.saved, c, &m); err != nil {
						return err
					}
					if err := db.queueEvent(tx, api.EventMessageSent, c.LineID, c.ID, EventSubject{Message: &m}); err != nil {
						return err
					}
				}
				item.MessageID = m.ID
				item.SentChatGUID, item.SentService, item.SMSFallback = s.ChatGUID, s.Service, s.SMSFallback
			case KindReaction:
				_, _, err := db.applyReaction(tx, Reaction{MessageID: item.TargetMessageID, ChatID: item.ChatID, LineID: item.LineID,
					Type: item.ReactionType, Emoji: item.ReactionEmoji, Sender: line.Handle, IsFromMe: true, Added: !item.Remove, SentAt: s.At, SyncedAt: now})
				if err != nil {
					return err
				}
			case KindRead:
				if err := lineRead(tx, item.ChatID, line.Handle, s.At, now); err != nil {
					return err
				}
				delete(chats, item.ChatID) // stored anew: a later message of the batch reloads it
			case KindTyping:
				// Indicators live in memory: set before the commit, so that
				// an item seen as sent already shows. Setting one twice (if
				// Batch reruns this) changes nothing.
				db.SetTyping(item.ChatID, line.Handle, item.TypingOn, time.UnixMilli(now))
			}
			item.Status, item.CompletedAt, item.Error = StatusSent, now, ""
			if err := putJSON(tx.Bucket(bktOutbox), []byte(item.ID), item); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(err, errors.Join(skipped...))
}

// MarkRetry puts a claimed item back in the queue, due at the given time,
// keeping reason as its last error.
func (db *DB) MarkRetry(ctx context.Context, id, reason string, at int64) error {
	return db.requeue(id, reason, at, false)
}

// MarkWaiting puts a claimed item back in the queue, due at the given
// time, without counting its attempt: the network was known not to work,
// and nothing was tried.
func (db *DB) MarkWaiting(ctx context.Context, id, reason string, at int64) error {
	return db.requeue(id, reason, at, true)
}

func (db *DB) requeue(id, reason string, at int64, uncounted bool) error {
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		var item OutboxItem
		if err := finishClaimed(tx, id, &item); err != nil {
			return err
		}
		if uncounted && item.Attempts > 0 {
			item.Attempts--
		}
		// A retried item certainly did not reach the network.
		item.Status, item.Error, item.NextAttemptAt, item.HandedAt, item.MayHaveSent = StatusPending, reason, at, 0, false
		if err := putJSON(tx.Bucket(bktOutbox), []byte(id), item); err != nil {
			return err
		}
		return scheduleDue(tx, id, at)
	})
	if err == nil {
		db.signalOutbox()
	}
	return err
}

// MarkFailed records that a claimed item will not be delivered.
func (db *DB) MarkFailed(ctx context.Context, id, reason string) (OutboxItem, error) {
	var item OutboxItem
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		if err := finishClaimed(tx, id, &item); err != nil {
			return err
		}
		if item.Kind == KindEdit {
			// An edit that failed is not one of the message's edits.
			if err := countEdit(tx, item.TargetMessageID, 0, -1); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		now := nowMillis()
		if err := guardUncount(tx, item, now); err != nil {
			return err
		}
		item.Status, item.Error, item.CompletedAt = StatusFailed, reason, now
		return putJSON(tx.Bucket(bktOutbox), []byte(id), item)
	})
	return item, err
}

// MarkHanded records, durably, that a claimed item is about to be handed to
// a network that sends at most once.
func (db *DB) MarkHanded(ctx context.Context, id string) error {
	return db.bolt.Batch(func(tx *bolt.Tx) error {
		if tx.Bucket(bktOutboxClaimed).Get([]byte(id)) == nil {
			return fmt.Errorf("outbox item %s is not claimed", id)
		}
		var item OutboxItem
		if err := getJSON(tx.Bucket(bktOutbox), []byte(id), &item); err != nil {
			return err
		}
		item.HandedAt = nowMillis()
		return putJSON(tx.Bucket(bktOutbox), []byte(id), item)
	})
}

// adoptMessage links a sent message to the one already stored under its
// GUID, if any: the network may have reported it before its send was
// recorded (after a restart mid-send, the watcher can see the row first).
// m then becomes the stored message, now carrying its outbox ID.
func adoptMessage(tx *bolt.Tx, m *Message) (bool, error) {
	if m.GUID == "" {
		return false, nil
	}
	var stored Message
	key, err := messageKeyByGUID(tx, m.GUID, &stored)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	stored.OutboxID = m.OutboxID
	*m = stored
	if err := undoTakeOver(tx, m.ChatID, m.GUID); err != nil {
		return false, err
	}
	return true, storeMessage(tx, key, m)
}

// ErrNotSentItem is MarkLateFailure's answer for a message that is not the
// sent message of an outbox item.
var ErrNotSentItem = errors.New("not the message of a sent outbox item")

// MarkLateFailure records that the network failed a message it had taken
// as sent: its outbox item moves from sent to failed with reason, the
// message gets failed_at and error, and a message.failed event goes to the
// webhooks that subscribe to it. A message already failed is left as it is
// (changed is false).
func (db *DB) MarkLateFailure(ctx context.Context, lineID, guid, reason string) (item OutboxItem, changed bool, err error) {
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		changed = false
		var m Message
		key, err := messageKeyByGUID(tx, guid, &m)
		if err != nil {
			return err
		}
		if m.LineID != lineID || m.OutboxID == "" {
			return ErrNotSentItem
		}
		if err := getJSON(tx.Bucket(bktOutbox), []byte(m.OutboxID), &item); err != nil {
			return err
		}
		if item.Status != StatusSent {
			return nil // failed already: a late failure is reported once
		}
		now := nowMillis()
		item.Status, item.Error, item.CompletedAt = StatusFailed, reason, now
		if err := putJSON(tx.Bucket(bktOutbox), []byte(item.ID), item); err != nil {
			return err
		}
		m.FailedAt, m.Error = now, reason
		if err := storeMessage(tx, key, &m); err != nil {
			return err
		}
		changed = true
		return db.queueEvent(tx, api.EventMessageFailed, m.LineID, m.ChatID, EventSubject{Message: &m})
	})
	return item, changed, err
}

// finishClaimed loads a claimed item and takes it off the claimed set.
func finishClaimed(tx *bolt.Tx, id string, item *OutboxItem) error {
	claimed := tx.Bucket(bktOutboxClaimed)
	if claimed.Get([]byte(id)) == nil {
		return fmt.Errorf("outbox item %s is not claimed", id)
	}
	if err := getJSON(tx.Bucket(bktOutbox), []byte(id), item); err != nil {
		return err
	}
	return claimed.Delete([]byte(id))
}

// RecoverClaimed makes items that were claimed when the daemon stopped due
// again. Whether their send reached the network is unknown: an item handed
// to a network that sends at most once keeps its HandedAt, and its bridge
// only looks for what the earlier attempt did; on other networks it is
// sent again (delivery is at least once).
func (db *DB) RecoverClaimed(ctx context.Context) (int, error) {
	n := 0
	now := nowMillis()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		outbox := tx.Bucket(bktOutbox)
		c := tx.Bucket(bktOutboxClaimed).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.First() {
			id := bytes.Clone(k)
			if err := c.Delete(); err != nil {
				return err
			}
			var item OutboxItem
			if err := getJSON(outbox, id, &item); err != nil {
				return fmt.Errorf("claimed item %s: %w", id, err)
			}
			item.Status, item.NextAttemptAt, item.MayHaveSent = StatusPending, now, true
			if err := putJSON(outbox, id, item); err != nil {
				return err
			}
			if err := scheduleDue(tx, string(id), now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if n > 0 {
		db.signalOutbox()
	}
	return n, err
}

// PurgeIdempotency forgets idempotency keys older than IdempotencyTTL.
func (db *DB) PurgeIdempotency(ctx context.Context) (int, error) {
	n := 0
	cutoff := nowMillis() - IdempotencyTTL
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktIdempotency)
		var expired [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var rec idempotencyRecord
			if err := json.Unmarshal(v, &rec); err != nil || rec.CreatedAt < cutoff {
				expired = append(expired, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		n = len(expired)
		return deleteKeys(b, expired)
	})
	return n, err
}

// OutboxFilter selects outbox items by line and status; empty matches all.
type OutboxFilter struct {
	LineID string
	Status string
	Since  int64 // accepted at or after (Unix ms); 0 for any time
}

// RecentOutbox lists up to max items matching f, newest first, starting
// before the item with ID before ("" starts at the newest). next is the ID
// to pass as before for the following page, "" after the last. It reads at
// most scan items, so that a rare status cannot make one page read the
// whole outbox; a page that ends early then still has a next.
func (db *DB) RecentOutbox(ctx context.Context, f OutboxFilter, before string, max, scan int) (items []OutboxItem, next string, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktOutbox).Cursor()
		var k, v []byte
		if sk, _ := c.Seek([]byte(before)); before == "" || sk == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		var last []byte // the last item read
		for read := 0; k != nil; k, v = c.Prev() {
			if len(items) == max || read == scan {
				next = string(last)
				return nil
			}
			read++
			last = k
			var it OutboxItem
			if err := json.Unmarshal(v, &it); err != nil {
				return err
			}
			if (f.LineID == "" || it.LineID == f.LineID) && (f.Status == "" || it.Status == f.Status) && it.CreatedAt >= f.Since {
				items = append(items, it)
			}
		}
		return nil
	})
	return items, next, err
}
