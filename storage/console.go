package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The console's credentials: one-time login links, sessions and the
// optional password. Only hashes of links and session tokens are stored
// (the console hashes them), so a copy of the database lets no one in.

// Session is a signed-in console browser.
type Session struct {
	ID string `json:"id"` // ses_…
	// Owner limits the session to what a key of that owner may see; ""
	// is the host's operator, who sees everything.
	Owner string `json:"owner"`
	// CSRF is the token every state-changing request of the session
	// carries. It is no credential on its own: it is useless without the
	// session's cookie.
	CSRF      string `json:"csrf"`
	Via       string `json:"via"` // "link" or "password"
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
}

type loginLink struct {
	Owner     string `json:"owner"`
	ExpiresAt int64  `json:"expires_at"`
}

var keyConsolePassword = []byte("password")

// CreateLoginLink stores a one-time login link by the hash of its token.
func (db *DB) CreateLoginLink(ctx context.Context, hash []byte, owner string, expiresAt int64) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bktConsoleLinks), hash, loginLink{Owner: owner, ExpiresAt: expiresAt})
	})
}

// UseLoginLink consumes a login link: it answers the link's owner once, and
// ErrNotFound for a link that is unknown, used or expired at now (Unix ms).
func (db *DB) UseLoginLink(ctx context.Context, hash []byte, now int64) (owner string, err error) {
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktConsoleLinks)
		var l loginLink
		if err := getJSON(b, hash, &l); err != nil {
			return err
		}
		if err := b.Delete(hash); err != nil {
			return err
		}
		if l.ExpiresAt <= now {
			return ErrNotFound
		}
		owner = l.Owner
		return nil
	})
	return owner, err
}

// CreateSession stores a session by the hash of its token.
func (db *DB) CreateSession(ctx context.Context, hash []byte, s Session) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		db.noteControl(tx, ControlChange{Kind: ControlSession, ID: s.ID, Session: &SessionRecord{Session: s, Hash: bytes.Clone(hash)}})
		return putJSON(tx.Bucket(bktConsoleSess), hash, s)
	})
}

// SessionByHash finds the session of a token's hash that is still valid at
// now (Unix ms).
func (db *DB) SessionByHash(ctx context.Context, hash []byte, now int64) (Session, error) {
	var s Session
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bktConsoleSess), hash, &s); err != nil {
			return err
		}
		if s.ExpiresAt <= now {
			return ErrNotFound
		}
		return nil
	})
	return s, err
}

// Sessions lists the sessions valid at now, newest first.
func (db *DB) Sessions(ctx context.Context, now int64) ([]Session, error) {
	var out []Session
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktConsoleSess).ForEach(func(_, v []byte) error {
			var s Session
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			if s.ExpiresAt > now {
				out = append(out, s)
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Session) int { return bytes.Compare([]byte(b.ID), []byte(a.ID)) })
	return out, err
}

// RevokeSessions ends the sessions whose ID is in ids, or every session
// when ids is empty, and wakes their streams (Revoked). It answers how
// many ended.
func (db *DB) RevokeSessions(ctx context.Context, ids ...string) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktConsoleSess)
		var gone [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var s Session
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			if len(ids) == 0 || slices.Contains(ids, s.ID) {
				gone = append(gone, k)
				db.noteControl(tx, ControlChange{Kind: ControlSession, ID: s.ID, Deleted: true})
			}
			return nil
		})
		if err != nil {
			return err
		}
		n = len(gone)
		if n > 0 {
			tx.OnCommit(db.revocations.broadcast)
		}
		return deleteKeys(b, gone)
	})
	return n, err
}

// SetConsolePassword stores the console password's slow hash; nil removes
// the password, so that only login links let anyone in.
func (db *DB) SetConsolePassword(ctx context.Context, hash []byte) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktConsole)
		if hash == nil {
			return b.Delete(keyConsolePassword)
		}
		return b.Put(keyConsolePassword, hash)
	})
}

// ConsolePassword is the console password's slow hash, nil when none is set.
func (db *DB) ConsolePassword(ctx context.Context) ([]byte, error) {
	var hash []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		hash = bytes.Clone(tx.Bucket(bktConsole).Get(keyConsolePassword))
		return nil
	})
	return hash, err
}

// PurgeConsole forgets the login links and sessions expired at now (Unix
// ms).
func (db *DB) PurgeConsole(ctx context.Context, now int64) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bktConsoleLinks, bktConsoleSess} {
			b := tx.Bucket(name)
			var gone [][]byte
			err := b.ForEach(func(k, v []byte) error {
				var exp struct {
					ExpiresAt int64 `json:"expires_at"`
				}
				if err := json.Unmarshal(v, &exp); err != nil {
					return err
				}
				if exp.ExpiresAt <= now {
					gone = append(gone, k)
				}
				return nil
			})
			if err != nil {
				return err
			}
			n += len(gone)
			if err := deleteKeys(b, gone); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
