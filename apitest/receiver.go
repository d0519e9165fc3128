package apitest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/webhook/signature"
)

// Hook is one request a Receiver got: a webhook delivery.
type Hook struct {
	Header http.Header
	Raw    []byte
	Body   map[string]any // Raw decoded
	Err    error          // what decoding or verifying it found wrong
}

// Event is the delivery's event type.
func (h Hook) Event() string { return h.Body["event"].(string) }

// DeliveryID is the delivery's ID, the same in every attempt.
func (h Hook) DeliveryID() string { return h.Body["delivery_id"].(string) }

// Timestamp is the envelope's timestamp, in Unix seconds.
func (h Hook) Timestamp() int64 {
	ts, _ := h.Body["timestamp"].(float64)
	return int64(ts)
}

// Data is the event's data.
func (h Hook) Data() map[string]any {
	d, _ := h.Body["data"].(map[string]any)
	return d
}

// Receiver is the other end of Blueline's webhooks: a real HTTP server
// that records every request and, once it knows the webhook's secret,
// verifies its signature.
type Receiver struct {
	Server *httptest.Server
	answer func(n int, w http.ResponseWriter, r *http.Request) int

	mu          sync.Mutex
	secret      string
	checkEvents bool
	got         []Hook
}

// NewReceiver starts a receiver, over TLS if tls, that the end of the test
// stops. answer gives the status of the n-th request (from 1), or answers
// itself, status and body, and returns 0; nil answers 204.
func NewReceiver(t testing.TB, tls bool, answer func(n int, w http.ResponseWriter, r *http.Request) int) *Receiver {
	rc := &Receiver{answer: answer}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		hook := Hook{Header: r.Header.Clone(), Raw: raw}
		hook.Err = json.Unmarshal(raw, &hook.Body)
		rc.mu.Lock()
		check := rc.checkEvents
		rc.mu.Unlock()
		if check {
			if err := checkEvent(r, raw); err != nil {
				t.Errorf("webhook delivery differs from the API document: %v\nbody: %s", err, raw)
			}
		}
		rc.mu.Lock()
		if hook.Err == nil && rc.secret != "" {
			hook.Err = signature.Verify(rc.secret, raw, r.Header.Get(signature.HeaderSignature), r.Header.Get(signature.HeaderTimestamp), time.Now())
		}
		rc.got = append(rc.got, hook)
		n := len(rc.got)
		rc.mu.Unlock()
		status := http.StatusNoContent
		if rc.answer != nil {
			status = rc.answer(n, w, r)
		}
		if status != 0 {
			w.WriteHeader(status)
		}
	})
	if tls {
		rc.Server = httptest.NewTLSServer(h)
	} else {
		rc.Server = httptest.NewServer(h)
	}
	t.Cleanup(rc.Server.Close)
	return rc
}

// CheckEvents holds every delivery from now on to the API document's
// webhooks (the daemon's real deliveries; a unit test's synthetic events
// would not pass).
func (rc *Receiver) CheckEvents() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.checkEvents = true
}

// SetSecret sets the secret that the requests from now on must be signed
// with.
func (rc *Receiver) SetSecret(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
}

// Secret is the secret requests are verified with, "" before there is one.
func (rc *Receiver) Secret() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.secret
}

// Requests is what the receiver got so far, oldest first.
func (rc *Receiver) Requests() []Hook {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// Hang, among the statuses of Answers, holds a request open until its
// sender gives up or the test ends, then answers 200.
const Hang = -1

// Answers is an answer for NewReceiver: the n-th request gets statuses[n-1]
// (or, for Hang, waits), any after the last 204.
func Answers(t testing.TB, statuses ...int) func(n int, w http.ResponseWriter, r *http.Request) int {
	return func(n int, w http.ResponseWriter, r *http.Request) int {
		switch {
		case n > len(statuses):
			return http.StatusNoContent
		case statuses[n-1] == Hang:
			select {
			case <-r.Context().Done():
			case <-t.Context().Done():
			}
			return http.StatusOK
		}
		return statuses[n-1]
	}
}
