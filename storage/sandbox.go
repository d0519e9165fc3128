package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The sandbox line is shared by every owner, as a hosted service's sandbox
// number is: each owner starts its own activation, gets its own code, and is
// paired with the phone that texts that code. An owner's sandbox is the
// one-to-one chat with its paired phone: what happens in it (messages,
// reactions, outbox items, webhook events) is that owner's alone.

// SandboxState is one owner's sandbox pairing.
type SandboxState struct {
	Owner          string `json:"owner"`
	ActivationCode string `json:"activation_code"`
	Activated      bool   `json:"activated"`
	PairedHandle   string `json:"paired_handle"`
	ActivatedAt    int64  `json:"activated_at"`
	CreatedAt      int64  `json:"created_at"`
}

// Keys of the sandbox bucket.
func sandboxOwnerKey(owner string) []byte  { return []byte("owner/" + owner) }
func sandboxPhoneKey(handle string) []byte { return []byte("phone/" + handle) }
func quotaKey(day, owner string) []byte    { return []byte("quota/" + day + "/" + owner) }

var sandboxOwnerPrefix = []byte("owner/")

// Letters and digits that cannot be mistaken for one another when read off a
// screen and typed on a phone.
const activationAlphabet = "ACDEFGHJKLMNPQRTUVWXY34679"

// ErrNoOwner is returned for a sandbox operation without an owner.
var ErrNoOwner = errors.New("the sandbox needs an owner")

// migrateSandbox drops the single pairing of the shared sandbox that came
// before owners: it belonged to nobody in particular.
func migrateSandbox(tx *bolt.Tx) error {
	b := tx.Bucket(bktSandbox)
	if b.Get([]byte("state")) == nil {
		return nil
	}
	return b.Delete([]byte("state"))
}

// Sandbox returns an owner's sandbox state; ok is false when the owner has
// not started an activation.
func (db *DB) Sandbox(ctx context.Context, owner string) (st SandboxState, ok bool, err error) {
	if owner == "" {
		return st, false, ErrNoOwner
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		err := getJSON(tx.Bucket(bktSandbox), sandboxOwnerKey(owner), &st)
		ok = err == nil
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	return st, ok, err
}

// StartSandbox gives an owner an activation code (created is true), or
// returns the state it already has.
func (db *DB) StartSandbox(ctx context.Context, owner string) (st SandboxState, created bool, err error) {
	if owner == "" {
		return st, false, ErrNoOwner
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktSandbox)
		err := getJSON(b, sandboxOwnerKey(owner), &st)
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		created = true
		codes := map[string]bool{}
		if err := eachSandbox(b, func(s SandboxState) { codes[s.ActivationCode] = true }); err != nil {
			return err
		}
		st = SandboxState{Owner: owner, CreatedAt: nowMillis()}
		for st.ActivationCode == "" || codes[st.ActivationCode] {
			st.ActivationCode = newActivationCode()
		}
		db.noteControl(tx, ControlChange{Kind: ControlSandbox, ID: owner, Sandbox: &st})
		return putJSON(b, sandboxOwnerKey(owner), st)
	})
	return st, created, err
}

// SandboxStates returns every owner's sandbox state, by owner.
func (db *DB) SandboxStates(ctx context.Context) ([]SandboxState, error) {
	var out []SandboxState
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return eachSandbox(tx.Bucket(bktSandbox), func(s SandboxState) { out = append(out, s) })
	})
	return out, err
}

// SandboxOwner returns the owner paired with a phone on the sandbox line,
// or "".
func (db *DB) SandboxOwner(ctx context.Context, handle string) (string, error) {
	var owner string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		owner = sandboxOwnerOf(tx, handle)
		return nil
	})
	return owner, err
}

func sandboxOwnerOf(tx *bolt.Tx, handle string) string {
	return string(tx.Bucket(bktSandbox).Get(sandboxPhoneKey(handle)))
}

func eachSandbox(b *bolt.Bucket, visit func(SandboxState)) error {
	c := b.Cursor()
	for k, v := c.Seek(sandboxOwnerPrefix); k != nil && bytes.HasPrefix(k, sandboxOwnerPrefix); k, v = c.Next() {
		var s SandboxState
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		visit(s)
	}
	return nil
}

func newActivationCode() string {
	var raw [8]byte
	rand.Read(raw[:])
	code := make([]byte, len(raw))
	for i, v := range raw {
		code[i] = activationAlphabet[int(v)%len(activationAlphabet)]
	}
	return "BL-" + string(code)
}

// activateSandbox pairs sender with the owner whose pending activation code
// text carries. A phone pairs with one owner, once and for all.
func (db *DB) activateSandbox(tx *bolt.Tx, text, sender string) (bool, error) {
	b := tx.Bucket(bktSandbox)
	if b.Get(sandboxPhoneKey(sender)) != nil {
		return false, nil
	}
	upper := strings.ToUpper(text)
	var match *SandboxState
	err := eachSandbox(b, func(s SandboxState) {
		if match == nil && !s.Activated && strings.Contains(upper, s.ActivationCode) {
			match = &s
		}
	})
	if err != nil || match == nil {
		return false, err
	}
	match.Activated, match.PairedHandle, match.ActivatedAt = true, sender, nowMillis()
	if err := putJSON(b, sandboxOwnerKey(match.Owner), match); err != nil {
		return false, err
	}
	db.noteControl(tx, ControlChange{Kind: ControlSandbox, ID: match.Owner, Sandbox: match})
	return true, b.Put(sandboxPhoneKey(sender), []byte(match.Owner))
}

// SandboxSends returns how many sends an owner's sandbox accepted on a UTC
// day ("2006-01-02").
func (db *DB) SandboxSends(ctx context.Context, owner, day string) (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = sandboxCount(tx.Bucket(bktSandbox), day, owner)
		return nil
	})
	return n, err
}

func sandboxCount(b *bolt.Bucket, day, owner string) int {
	v := b.Get(quotaKey(day, owner))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}
