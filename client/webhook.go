package client

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/webhook/signature"
)

// The headers of a webhook delivery.
const (
	HeaderSignature  = signature.HeaderSignature
	HeaderTimestamp  = signature.HeaderTimestamp
	HeaderDeliveryID = signature.HeaderDeliveryID
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock unless VerifyWebhook is told otherwise.
const DefaultTolerance = signature.Tolerance

// ErrSignature is what every refusal of VerifyWebhook wraps: a signature
// or timestamp missing, not matching, or too far from now.
var ErrSignature = errors.New("blueline: webhook signature verification failed")

// VerifyWebhook checks a delivery and returns its event. The signature
// (X-Webhook-Signature) must be HMAC-SHA256 keyed by secret over the
// timestamp, a dot and the raw body, compared in constant time; the
// timestamp is X-Webhook-Timestamp, which must equal the body's timestamp
// field (the field alone is used when the header is absent, as the
// reference SDK does), and be within tolerance of now (0 is
// DefaultTolerance). Pass the body exactly as received. Every refusal
// wraps ErrSignature.
func VerifyWebhook(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) (*api.Event, error) {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sig := header.Get(HeaderSignature)
	if sig == "" {
		return nil, fmt.Errorf("%w: no %s header", ErrSignature, HeaderSignature)
	}
	var ev api.Event
	// Decoding before verifying only reads the timestamp; nothing of the
	// event is trusted or returned unless the signature matches.
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: the body is not a JSON event", ErrSignature)
	}
	ts := ev.Timestamp
	if h := header.Get(HeaderTimestamp); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not a number", ErrSignature, HeaderTimestamp)
		}
		if n != ts {
			return nil, fmt.Errorf("%w: %s differs from the body's timestamp", ErrSignature, HeaderTimestamp)
		}
	}
	if ts == 0 {
		return nil, fmt.Errorf("%w: no timestamp", ErrSignature)
	}
	if !hmac.Equal([]byte(sig), []byte(signature.Sign(secret, ts, body))) {
		return nil, fmt.Errorf("%w: signature does not match", ErrSignature)
	}
	if d := now.Sub(time.UnixMilli(ts)); d > tolerance || d < -tolerance {
		return nil, fmt.Errorf("%w: timestamp is %s away from now, more than %s", ErrSignature, d.Round(time.Second), tolerance)
	}
	return &ev, nil
}

// SignWebhook makes a delivery of ev as the daemon does: the body, with
// its timestamp set to at (Unix ms) and a new dlv_ delivery ID if it has
// none, and the headers Content-Type, X-Webhook-Signature,
// X-Webhook-Timestamp and X-Webhook-Delivery-Id. To forward an event
// re-signed for another receiver, pass time.Now(); to keep its timestamp,
// pass ev.Time().
func SignWebhook(secret string, ev api.Event, at time.Time) (body []byte, header http.Header, err error) {
	ev.Timestamp = at.UnixMilli()
	if ev.DeliveryID == "" {
		ev.DeliveryID = newDeliveryID()
	}
	if ev.Data == nil {
		ev.Data = json.RawMessage("null")
	}
	body, err = json.Marshal(ev)
	if err != nil {
		return nil, nil, fmt.Errorf("blueline: encode event: %w", err)
	}
	header = http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set(HeaderSignature, signature.Sign(secret, ev.Timestamp, body))
	header.Set(HeaderTimestamp, strconv.FormatInt(ev.Timestamp, 10))
	header.Set(HeaderDeliveryID, ev.DeliveryID)
	header.Set("User-Agent", signature.UserAgent)
	return body, header, nil
}

func newDeliveryID() string {
	var b [16]byte
	rand.Read(b[:])
	return "dlv_" + hex.EncodeToString(b[:])
}
