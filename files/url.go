package files

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// URL returns a signed download URL for file id that works without an API
// key until it expires, like a presigned object-store URL. Changing its id or
// expiry breaks the signature.
func (s *Store) URL(id string, now time.Time) string {
	// Rounding the expiry up to the minute makes the URLs handed out for a
	// file within one minute identical, so caches see one URL, not many.
	exp := now.Add(s.ttl + time.Minute - 1).Truncate(time.Minute)
	expires := strconv.FormatInt(exp.Unix(), 10)
	return s.baseURL + "/files/" + id + "?expires=" + expires + "&signature=" + hex.EncodeToString(s.sign(id, expires))
}

// Verify checks the parts of a download URL made by URL: ErrURLInvalid if it
// was not made by us for id, ErrURLExpired if it was but is past its expiry.
func (s *Store) Verify(id, expires, signature string, now time.Time) error {
	sig, err := hex.DecodeString(signature)
	if err != nil || !storage.ValidID(id, "file_") || !hmac.Equal(sig, s.sign(id, expires)) {
		return ErrURLInvalid
	}
	// Only a signed expiry is parsed, so a forged URL learns nothing from
	// whether it would have expired.
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return ErrURLInvalid
	}
	if now.After(time.Unix(exp, 0)) {
		return ErrURLExpired
	}
	return nil
}

// sign is HMAC-SHA256 over id and expiry; the newline keeps the two fields
// from running into each other.
func (s *Store) sign(id, expires string) []byte {
	mac := hmac.New(sha256.New, s.secret)
	mac.Write([]byte(id + "\n" + expires))
	return mac.Sum(nil)
}
