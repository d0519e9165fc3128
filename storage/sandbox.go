package storage

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// SandboxState is the sandbox line's pairing: before activation it talks to
// nobody; texting it the activation code pairs it with that phone.
type SandboxState struct {
	ActivationCode string `json:"activation_code"`
	Activated      bool   `json:"activated"`
	PairedHandle   string `json:"paired_handle"`
	ActivatedAt    int64  `json:"activated_at"`
}

var sandboxStateKey = []byte("state")

// Letters and digits that cannot be mistaken for one another when read off a
// screen and typed on a phone.
const activationAlphabet = "ACDEFGHJKLMNPQRTUVWXY34679"

func ensureSandbox(tx *bolt.Tx) error {
	b := tx.Bucket(bktSandbox)
	if b.Get(sandboxStateKey) != nil {
		return nil
	}
	var raw [8]byte
	rand.Read(raw[:])
	code := make([]byte, len(raw))
	for i, v := range raw {
		code[i] = activationAlphabet[int(v)%len(activationAlphabet)]
	}
	return putJSON(b, sandboxStateKey, SandboxState{ActivationCode: "BL-" + string(code)})
}

// activateSandbox pairs the sandbox with sender when text carries the
// activation code. Pairing happens once.
func activateSandbox(tx *bolt.Tx, text, sender string) (bool, error) {
	b := tx.Bucket(bktSandbox)
	var st SandboxState
	if err := getJSON(b, sandboxStateKey, &st); err != nil {
		return false, err
	}
	if st.Activated || !strings.Contains(strings.ToUpper(text), st.ActivationCode) {
		return false, nil
	}
	st.Activated, st.PairedHandle, st.ActivatedAt = true, sender, nowMillis()
	return true, putJSON(b, sandboxStateKey, st)
}

// Sandbox returns the sandbox line's pairing state.
func (db *DB) Sandbox(ctx context.Context) (SandboxState, error) {
	var st SandboxState
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bktSandbox), sandboxStateKey, &st)
	})
	return st, err
}

// SandboxSends returns how many sends the sandbox accepted on a UTC day
// ("2006-01-02").
func (db *DB) SandboxSends(ctx context.Context, day string) (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = sandboxCount(tx.Bucket(bktSandbox), day)
		return nil
	})
	return n, err
}

func quotaKey(day string) []byte { return []byte("quota/" + day) }

func sandboxCount(b *bolt.Bucket, day string) int {
	v := b.Get(quotaKey(day))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}
