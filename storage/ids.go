package storage

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// IDLen is the length of the random part of every ID: 16 random bytes in
// lower-case base32.
const IDLen = 26

// NewID returns prefix followed by 26 random base32 characters, e.g. "msg_…".
func NewID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s is prefix followed by a well-formed random part.
func ValidID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != IDLen {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7') {
			return false
		}
	}
	return true
}
