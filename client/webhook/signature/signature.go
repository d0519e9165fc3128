// Package signature signs Blueline's webhook deliveries and lets receivers
// verify them. A delivery is signed with HMAC-SHA256, keyed by the webhook's
// secret, over "<timestamp>.<raw body>", where the timestamp (Unix ms) is
// both the X-Webhook-Timestamp header and the body's "timestamp" field.
//
// A receiver verifies the raw body before parsing it:
//
//	body, _ := io.ReadAll(r.Body)
//	if err := signature.Verify(secret, body, r.Header.Get(signature.HeaderSignature),
//		r.Header.Get(signature.HeaderTimestamp), time.Now()); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// The headers of a delivery.
const (
	HeaderSignature  = "X-Webhook-Signature"
	HeaderTimestamp  = "X-Webhook-Timestamp"
	HeaderDeliveryID = "X-Webhook-Delivery-Id"
	// UserAgent is the User-Agent of every delivery.
	UserAgent = "Blueline-Webhooks/1"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock. An older delivery may be a replay.
const Tolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrMissing   = errors.New("webhook signature or timestamp missing")
	ErrMismatch  = errors.New("webhook signature does not match")
	ErrTimestamp = errors.New("webhook timestamp is more than 5 minutes away")
)

// Sign returns the lowercase hex signature of body sent at timestamp (Unix ms).
func Sign(secret string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a delivery: its signature (compared in constant time), that
// the timestamp header matches the body's timestamp, and that it is within
// Tolerance of now.
func Verify(secret string, body []byte, sig, timestamp string, now time.Time) error {
	if sig == "" || timestamp == "" {
		return ErrMissing
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrMismatch
	}
	if !hmac.Equal([]byte(sig), []byte(Sign(secret, ts, body))) {
		return ErrMismatch
	}
	// The signature covers the body, so its timestamp field is as
	// trustworthy as the header; they must agree.
	var envelope struct {
		Timestamp int64 `json:"timestamp"`
	}
	if json.Unmarshal(body, &envelope) != nil || envelope.Timestamp != ts {
		return ErrMismatch
	}
	if d := now.Sub(time.UnixMilli(ts)); d > Tolerance || d < -Tolerance {
		return ErrTimestamp
	}
	return nil
}
