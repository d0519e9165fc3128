package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// The control records are what a fleet of hosts shares (issue 27): API
// keys, webhooks, sandbox owners and console sessions. Each host keeps
// them here, where the API reads them; the fleet keeps a copy in its KV
// buckets. This file is the storage side of that: a change feed of the
// local writes (OnControlChange), the current record by ID
// (ControlRecord, ControlRecords), and ApplyControl, which writes a
// record received from the fleet without feeding it back.

// ControlKind is a kind of control record.
type ControlKind string

// The kinds of control records.
const (
	ControlKey     ControlKind = "key"     // by key ID
	ControlWebhook ControlKind = "webhook" // by webhook ID
	ControlSandbox ControlKind = "sandbox" // by owner
	ControlSession ControlKind = "session" // by session ID (ses_…)
)

// ControlKinds are the kinds, in the order a fleet seeds them.
var ControlKinds = []ControlKind{ControlKey, ControlWebhook, ControlSandbox, ControlSession}

// SessionRecord is a console session with the hash of its token, which
// is what a host looks a cookie up by: never the token itself.
type SessionRecord struct {
	Session
	Hash []byte `json:"hash"`
}

// ControlChange is a control record as it is after a change: one of Key,
// Webhook, Sandbox or Session is set, or Deleted is true (the record is
// gone: a deleted webhook, an ended session).
type ControlChange struct {
	Kind    ControlKind
	ID      string
	Deleted bool

	Key     *Key
	Webhook *Webhook
	Sandbox *SandboxState
	Session *SessionRecord
}

// Record is the record the change carries, nil when Deleted: what a fleet
// stores, as JSON.
func (c ControlChange) Record() any {
	switch {
	case c.Deleted:
		return nil
	case c.Key != nil:
		return c.Key
	case c.Webhook != nil:
		return c.Webhook
	case c.Sandbox != nil:
		return c.Sandbox
	case c.Session != nil:
		return c.Session
	}
	return nil
}

// DecodeControl is the change that sets a record of kind from its JSON
// (as Record marshals it).
func DecodeControl(kind ControlKind, data []byte) (ControlChange, error) {
	c := ControlChange{Kind: kind}
	var err error
	switch kind {
	case ControlKey:
		c.Key = &Key{}
		err = json.Unmarshal(data, c.Key)
		c.ID = c.Key.ID
	case ControlWebhook:
		c.Webhook = &Webhook{}
		err = json.Unmarshal(data, c.Webhook)
		c.ID = c.Webhook.ID
	case ControlSandbox:
		c.Sandbox = &SandboxState{}
		err = json.Unmarshal(data, c.Sandbox)
		c.ID = c.Sandbox.Owner
	case ControlSession:
		c.Session = &SessionRecord{}
		err = json.Unmarshal(data, c.Session)
		c.ID = c.Session.ID
	default:
		return c, fmt.Errorf("unknown control record kind %q", kind)
	}
	if err == nil && c.ID == "" {
		err = errors.New("no ID")
	}
	if err != nil {
		return c, fmt.Errorf("decode %s record: %w", kind, err)
	}
	if c.Kind == ControlKey && len(c.Key.Hash) != 32 || c.Kind == ControlSession && len(c.Session.Hash) == 0 {
		return c, fmt.Errorf("decode %s record %s: no hash", kind, c.ID)
	}
	return c, nil
}

// Equal reports whether c and o leave the same record (or none).
func (c ControlChange) Equal(o ControlChange) bool {
	if c.Kind != o.Kind || c.Deleted != o.Deleted {
		return false
	}
	if c.Deleted {
		return true
	}
	a, err1 := json.Marshal(c.Record())
	b, err2 := json.Marshal(o.Record())
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// controlFeed holds the observer of local changes; nil when none.
type controlFeed struct {
	observer atomic.Pointer[func(ControlChange)]
}

// OnControlChange sets f to be called after each committed local change
// of a control record (a key created, revoked or used, a webhook created,
// deleted, disabled or failing, a sandbox started or activated, a console
// session created or ended), in the goroutine that committed it, after
// the commit: f must not block or write to the database. nil removes it.
// Without an observer nothing is fed: a host alone pays nothing. Changes
// written by ApplyControl are not fed.
func (db *DB) OnControlChange(f func(ControlChange)) {
	if f == nil {
		db.control.observer.Store(nil)
		return
	}
	db.control.observer.Store(&f)
}

// noteControl feeds c to the observer once tx commits, if there is one.
func (db *DB) noteControl(tx *bolt.Tx, c ControlChange) {
	f := db.control.observer.Load()
	if f == nil {
		return
	}
	tx.OnCommit(func() { (*f)(c) })
}

// noteWebhook feeds a webhook's new state unless it is what tx holds
// already (called before the write).
func (db *DB) noteWebhook(tx *bolt.Tx, w Webhook) {
	if db.control.observer.Load() == nil {
		return
	}
	var old Webhook
	if getJSON(tx.Bucket(bktWebhooks), []byte(w.ID), &old) == nil {
		a, _ := json.Marshal(old)
		b, _ := json.Marshal(w)
		if bytes.Equal(a, b) {
			return
		}
	}
	db.noteControl(tx, ControlChange{Kind: ControlWebhook, ID: w.ID, Webhook: &w})
}

// ControlRecord reads a control record as it is now: Deleted when there
// is none.
func (db *DB) ControlRecord(ctx context.Context, kind ControlKind, id string) (ControlChange, error) {
	var c ControlChange
	err := db.bolt.View(func(tx *bolt.Tx) (err error) {
		c, err = controlRecord(tx, kind, id)
		return err
	})
	return c, err
}

func controlRecord(tx *bolt.Tx, kind ControlKind, id string) (ControlChange, error) {
	c := ControlChange{Kind: kind, ID: id}
	var err error
	switch kind {
	case ControlKey:
		c.Key = &Key{}
		err = getJSON(tx.Bucket(bktKeys), []byte(id), c.Key)
	case ControlWebhook:
		c.Webhook = &Webhook{}
		err = getJSON(tx.Bucket(bktWebhooks), []byte(id), c.Webhook)
	case ControlSandbox:
		c.Sandbox = &SandboxState{}
		err = getJSON(tx.Bucket(bktSandbox), sandboxOwnerKey(id), c.Sandbox)
	case ControlSession:
		var hash []byte
		if hash, c.Session, err = sessionByID(tx, id); err == nil {
			c.Session.Hash = hash
		}
	default:
		return c, fmt.Errorf("unknown control record kind %q", kind)
	}
	if errors.Is(err, ErrNotFound) {
		return ControlChange{Kind: kind, ID: id, Deleted: true}, nil
	}
	return c, err
}

// sessionByID finds a session by its ID (the bucket is keyed by token
// hash; it holds a few sessions).
func sessionByID(tx *bolt.Tx, id string) ([]byte, *SessionRecord, error) {
	c := tx.Bucket(bktConsoleSess).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var s SessionRecord
		if err := json.Unmarshal(v, &s.Session); err != nil {
			return nil, nil, err
		}
		if s.ID == id {
			return bytes.Clone(k), &s, nil
		}
	}
	return nil, nil, ErrNotFound
}

// ControlRecords lists every control record: every key (revoked ones
// too), webhook, sandbox state and console session (expired ones too,
// until purged), by kind in the order of ControlKinds.
func (db *DB) ControlRecords(ctx context.Context) ([]ControlChange, error) {
	var out []ControlChange
	err := db.bolt.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bktKeys).ForEach(func(k, v []byte) error {
			c, err := DecodeControl(ControlKey, v)
			out = append(out, c)
			return err
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bktWebhooks).ForEach(func(k, v []byte) error {
			c, err := DecodeControl(ControlWebhook, v)
			out = append(out, c)
			return err
		})
		if err != nil {
			return err
		}
		err = eachSandbox(tx.Bucket(bktSandbox), func(s SandboxState) {
			out = append(out, ControlChange{Kind: ControlSandbox, ID: s.Owner, Sandbox: &s})
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bktConsoleSess).ForEach(func(k, v []byte) error {
			s := &SessionRecord{Hash: bytes.Clone(k)}
			if err := json.Unmarshal(v, &s.Session); err != nil {
				return err
			}
			out = append(out, ControlChange{Kind: ControlSession, ID: s.ID, Session: s})
			return nil
		})
	})
	return out, err
}

// ApplyControl writes a record received from the fleet exactly as given
// (or deletes it), with the side effects of a local write: a key revoked
// or a session ended wakes the streams open with it (Revoked), a webhook's
// change wakes the dispatcher, a deleted webhook's pending deliveries
// fail. It feeds nothing to OnControlChange. When the record is as given
// already it writes nothing (applied is false). When only is not nil, it
// is called in the write transaction with the record as it is, and the
// record is written only if it answers true: the caller's check that no
// local change came in between.
func (db *DB) ApplyControl(ctx context.Context, c ControlChange, only func(current ControlChange) bool) (applied bool, err error) {
	if !c.Deleted && c.Record() == nil {
		return false, fmt.Errorf("apply %s %s: no record", c.Kind, c.ID)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		applied = false
		cur, err := controlRecord(tx, c.Kind, c.ID)
		if err != nil {
			return err
		}
		if cur.Equal(c) || only != nil && !only(cur) {
			return nil
		}
		applied = true
		switch c.Kind {
		case ControlKey:
			return db.applyKey(tx, cur, c)
		case ControlWebhook:
			return db.applyWebhook(tx, cur, c)
		case ControlSandbox:
			return applySandbox(tx, cur, c)
		case ControlSession:
			return db.applySession(tx, cur, c)
		}
		return fmt.Errorf("unknown control record kind %q", c.Kind)
	})
	return applied, err
}

func (db *DB) applyKey(tx *bolt.Tx, cur, c ControlChange) error {
	keys, hashes := tx.Bucket(bktKeys), tx.Bucket(bktKeyHashes)
	wasActive := !cur.Deleted && cur.Key.RevokedAt == 0
	if !cur.Deleted {
		if err := hashes.Delete(cur.Key.Hash); err != nil {
			return err
		}
	}
	active := !c.Deleted && c.Key.RevokedAt == 0
	if wasActive && !active {
		tx.OnCommit(db.revocations.broadcast)
	}
	if c.Deleted {
		return keys.Delete([]byte(c.ID))
	}
	if err := putJSON(keys, []byte(c.ID), c.Key); err != nil {
		return err
	}
	if active {
		return hashes.Put(c.Key.Hash, []byte(c.ID))
	}
	return nil
}

func (db *DB) applyWebhook(tx *bolt.Tx, cur, c ControlChange) error {
	hooks, lines := tx.Bucket(bktWebhooks), tx.Bucket(bktWebhookLines)
	tx.OnCommit(db.signalWebhooks)
	if !cur.Deleted {
		if err := cur.Webhook.indexLines(lines, true); err != nil {
			return err
		}
	}
	if c.Deleted {
		if err := failPending(tx, c.ID, "the webhook was deleted", nowMillis()); err != nil {
			return err
		}
		return hooks.Delete([]byte(c.ID))
	}
	if !c.Webhook.IsActive && (cur.Deleted || cur.Webhook.IsActive) {
		if err := failPending(tx, c.ID, "the webhook was disabled", nowMillis()); err != nil {
			return err
		}
	}
	if err := putJSON(hooks, []byte(c.ID), c.Webhook); err != nil {
		return err
	}
	return c.Webhook.indexLines(lines, false)
}

func applySandbox(tx *bolt.Tx, cur, c ControlChange) error {
	b := tx.Bucket(bktSandbox)
	if !cur.Deleted && cur.Sandbox.PairedHandle != "" {
		if err := b.Delete(sandboxPhoneKey(cur.Sandbox.PairedHandle)); err != nil {
			return err
		}
	}
	if c.Deleted {
		return b.Delete(sandboxOwnerKey(c.ID))
	}
	if c.Sandbox.Activated && c.Sandbox.PairedHandle != "" {
		if err := b.Put(sandboxPhoneKey(c.Sandbox.PairedHandle), []byte(c.ID)); err != nil {
			return err
		}
	}
	return putJSON(b, sandboxOwnerKey(c.ID), c.Sandbox)
}

func (db *DB) applySession(tx *bolt.Tx, cur, c ControlChange) error {
	b := tx.Bucket(bktConsoleSess)
	if !cur.Deleted {
		if err := b.Delete(cur.Session.Hash); err != nil {
			return err
		}
		if c.Deleted {
			tx.OnCommit(db.revocations.broadcast)
		}
	}
	if c.Deleted {
		return nil
	}
	return putJSON(b, c.Session.Hash, c.Session.Session)
}

// FleetJoined is the identity of the fleet this host's control records
// were last shared with ("" for none): see SetFleetJoined.
func (db *DB) FleetJoined(ctx context.Context) (string, error) {
	var id string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bktMeta).Get(keyFleetJoined))
		return nil
	})
	return id, err
}

// SetFleetJoined records that this host's control records are shared with
// the fleet of that identity, so that a restart reconciles with it instead
// of refusing to join.
func (db *DB) SetFleetJoined(ctx context.Context, fleet string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktMeta).Put(keyFleetJoined, []byte(fleet))
	})
}

var keyFleetJoined = []byte("fleet_joined")
