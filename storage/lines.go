package storage

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Line is a phone number or account-ID handle the daemon sends and receives
// through. Lines come from the configuration; the database gives each a
// stable ID the first time its handle is seen.
type Line struct {
	ID               string `json:"id"`
	Handle           string `json:"handle"`
	Label            string `json:"label"`
	Service          string `json:"service"`
	Bridge           string `json:"bridge"`
	AdvancedFeatures bool   `json:"advanced_features"`
	IsSandbox        bool   `json:"is_sandbox"`
	// The line's opt-out and opt-in keywords, folded (keyword.Fold), and
	// what it answers a contact who opts out ("" for nothing), from its
	// configuration.
	OptOutWords []string `json:"-"`
	OptInWords  []string `json:"-"`
	OptOutReply string   `json:"-"`
	// TakeoverQuiet is how long (ms) a chat stays the owner's after the
	// owner writes in it from another device: agent keys may not write to
	// it until then. 0: the owner's messages take nothing over.
	TakeoverQuiet int64 `json:"takeover_quiet,omitempty"`
	// SelfHandles are the handles of the owner's Apple ID: a one-to-one
	// chat with one of them is the owner's chat with themselves (selfchat.go).
	SelfHandles []string `json:"-"`
	// ApprovalRequired makes agent keys' messages on the line wait for
	// the owner's approval, except those to chats whose every contact is
	// in ApprovalExcept; a draft expires ApprovalTTL (ms) after it is
	// accepted. TakeoverHold makes an agent's message to a chat the owner
	// took over a draft waiting for approval instead of a 409.
	ApprovalRequired bool     `json:"approval_required,omitempty"`
	ApprovalExcept   []string `json:"approval_except,omitempty"`
	ApprovalTTL      int64    `json:"approval_ttl,omitempty"`
	TakeoverHold     bool     `json:"takeover_hold,omitempty"`
	CreatedAt        int64    `json:"created_at"`
}

// SyncLines records the configured lines, keeping the ID of every handle seen
// before, and makes them the lines the daemon serves. Lines are fixed for the
// life of the process, so lookups afterwards need no transaction.
func (db *DB) SyncLines(ctx context.Context, configured []Line) ([]Line, error) {
	out := make([]Line, len(configured))
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktLines)
		for i, l := range configured {
			var stored Line
			err := getJSON(b, []byte(l.Handle), &stored)
			switch {
			case err == nil:
				l.ID, l.CreatedAt = stored.ID, stored.CreatedAt
			case err == ErrNotFound:
				l.ID, l.CreatedAt = NewID("ln_"), nowMillis()
			default:
				return fmt.Errorf("read line %s: %w", l.Handle, err)
			}
			if err := putJSON(b, []byte(l.Handle), l); err != nil {
				return err
			}
			if l.IsSandbox {
				if err := migrateSandbox(tx); err != nil {
					return err
				}
			}
			out[i] = l
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sync lines: %w", err)
	}
	db.mu.Lock()
	db.lines = out
	db.mu.Unlock()
	return out, nil
}

// Lines returns the lines the daemon serves, in configuration order.
func (db *DB) Lines() []Line {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.lines
}

// LineByHandle finds a served line by its normalised handle.
func (db *DB) LineByHandle(h string) (Line, bool) {
	for _, l := range db.Lines() {
		if l.Handle == h {
			return l, true
		}
	}
	return Line{}, false
}

// LineByID finds a served line by ID.
func (db *DB) LineByID(id string) (Line, bool) {
	for _, l := range db.Lines() {
		if l.ID == id {
			return l, true
		}
	}
	return Line{}, false
}

// SandboxLine returns the sandbox line, if one is configured.
func (db *DB) SandboxLine() (Line, bool) {
	for _, l := range db.Lines() {
		if l.IsSandbox {
			return l, true
		}
	}
	return Line{}, false
}
