package storage

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Key is an API key. Only the SHA-256 of its secret is stored.
type Key struct {
	ID      string   `json:"id"`
	Label   string   `json:"label"`
	Scopes  []string `json:"scopes"`
	LineIDs []string `json:"line_ids"` // empty: every line
	Owner   string   `json:"owner"`
	// Agent marks a key an AI agent uses: its writes yield to the line's
	// owner (a chat the owner took over) and to other keys' chat leases.
	Agent bool `json:"agent,omitempty"`
	// ApprovalRequired makes the agent's messages wait for the owner's
	// approval, except those to chats whose every contact is in
	// ApprovalExcept (normalised handles).
	ApprovalRequired bool     `json:"approval_required,omitempty"`
	ApprovalExcept   []string `json:"approval_except,omitempty"`
	// Gate is an agent key's sender gating: the contacts it hears from
	// and writes to, and the mention that wakes it in groups.
	Gate
	// Hint is the secret's prefix and last four characters, to tell keys
	// apart: never enough to guess the secret.
	Hint      string `json:"hint,omitempty"`
	Hash      []byte `json:"hash"`
	CreatedAt int64  `json:"created_at"`
	RevokedAt int64  `json:"revoked_at,omitempty"`
	// LastUsedAt is when the key last authenticated a request, to within
	// the minute (see the server's touchKey); 0 for never.
	LastUsedAt int64 `json:"last_used_at,omitempty"`
}

// CreateKey stores a new key.
func (db *DB) CreateKey(ctx context.Context, k Key) error {
	if len(k.Hash) != 32 {
		return fmt.Errorf("create key: hash must be 32 bytes")
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := putJSON(tx.Bucket(bktKeys), []byte(k.ID), k); err != nil {
			return err
		}
		db.noteControl(tx, ControlChange{Kind: ControlKey, ID: k.ID, Key: &k})
		return tx.Bucket(bktKeyHashes).Put(k.Hash, []byte(k.ID))
	})
}

// KeyByHash finds an active key by the SHA-256 of its secret.
func (db *DB) KeyByHash(ctx context.Context, hash []byte) (Key, error) {
	var k Key
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bktKeyHashes).Get(hash)
		if id == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bktKeys), id, &k); err != nil {
			return err
		}
		// The index lookup already matched; compare the stored hash in
		// constant time anyway so no code path compares secrets byte by byte.
		if subtle.ConstantTimeCompare(k.Hash, hash) != 1 || k.RevokedAt != 0 {
			return ErrNotFound
		}
		return nil
	})
	return k, err
}

// Keys lists the keys that are not revoked, oldest first.
func (db *DB) Keys(ctx context.Context) ([]Key, error) {
	var keys []Key
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktKeys).ForEach(func(_, v []byte) error {
			var k Key
			if err := json.Unmarshal(v, &k); err != nil {
				return err
			}
			if k.RevokedAt == 0 {
				keys = append(keys, k)
			}
			return nil
		})
	})
	slices.SortStableFunc(keys, func(a, b Key) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return keys, err
}

// RevokeKey revokes a key at once: the next request made with it fails,
// and Revoked wakes the streams open with it.
func (db *DB) RevokeKey(ctx context.Context, id string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktKeys)
		var k Key
		if err := getJSON(b, []byte(id), &k); err != nil {
			return err
		}
		if k.RevokedAt != 0 {
			return ErrNotFound
		}
		k.RevokedAt = nowMillis()
		if err := tx.Bucket(bktKeyHashes).Delete(k.Hash); err != nil {
			return err
		}
		tx.OnCommit(db.revocations.broadcast)
		db.noteControl(tx, ControlChange{Kind: ControlKey, ID: id, Key: &k})
		return putJSON(b, []byte(id), k)
	})
}

// Revoked is closed after the next commit that revokes a key or ends
// console sessions (RevokeSessions), wherever it was asked for: the admin
// socket, the console. What holds a credential open for long (an event
// stream) takes it, checks its credential, and checks again when it
// closes. Take it before the check, so that no revocation in between is
// missed.
func (db *DB) Revoked() <-chan struct{} { return db.revocations.wait() }

// Fired reports whether a signal taken from Revoked (or EventsChanged) has
// fired, without waiting.
func Fired(signal <-chan struct{}) bool {
	select {
	case <-signal:
		return true
	default:
		return false
	}
}

// TouchKey records that a key was used at (Unix ms). A revoked or unknown
// key is left alone.
func (db *DB) TouchKey(ctx context.Context, id string, at int64) error {
	return db.bolt.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktKeys)
		var k Key
		if err := getJSON(b, []byte(id), &k); err != nil {
			return nil
		}
		if k.RevokedAt != 0 || k.LastUsedAt >= at {
			return nil
		}
		k.LastUsedAt = at
		db.noteControl(tx, ControlChange{Kind: ControlKey, ID: id, Key: &k})
		return putJSON(b, []byte(id), k)
	})
}
