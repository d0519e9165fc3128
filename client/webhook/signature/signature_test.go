package signature_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/webhook/signature"
)

const (
	secret = "whsec_test"
	body   = `{"event":"message.received","data":{},"timestamp":1700000000000,"delivery_id":"dlv_x"}`
	// HMAC-SHA256("whsec_test", "1700000000000." + body), computed apart
	// from this package (Python's hmac module).
	vector = "1814db86f2c33705a6a65faa1005bcbdc5b4c19761ab8ae97f7e939d1bee6a15"
)

var sent = time.UnixMilli(1700000000000)

func TestSignMatchesVector(t *testing.T) {
	if got := signature.Sign(secret, 1700000000000, []byte(body)); got != vector {
		t.Fatalf("Sign = %s, want %s", got, vector)
	}
}

func TestVerify(t *testing.T) {
	cases := []struct {
		name                  string
		secret, body, sig, ts string
		now                   time.Time
		want                  error
	}{
		{"valid", secret, body, vector, "1700000000000", sent.Add(4 * time.Minute), nil},
		{"valid, receiver clock behind", secret, body, vector, "1700000000000", sent.Add(-4 * time.Minute), nil},
		{"upper-case signature", secret, body, strings.ToUpper(vector), "1700000000000", sent, signature.ErrMismatch},
		{"wrong secret", "whsec_other", body, vector, "1700000000000", sent, signature.ErrMismatch},
		{"altered body", secret, strings.Replace(body, "received", "sent", 1), vector, "1700000000000", sent, signature.ErrMismatch},
		{"header timestamp moved", secret, body, signature.Sign(secret, 1700000000001, []byte(body)), "1700000000001", sent, signature.ErrMismatch},
		{"too old", secret, body, vector, "1700000000000", sent.Add(5*time.Minute + time.Millisecond), signature.ErrTimestamp},
		{"from the future", secret, body, vector, "1700000000000", sent.Add(-6 * time.Minute), signature.ErrTimestamp},
		{"no signature", secret, body, "", "1700000000000", sent, signature.ErrMissing},
		{"no timestamp", secret, body, vector, "", sent, signature.ErrMissing},
		{"timestamp not a number", secret, body, vector, "soon", sent, signature.ErrMismatch},
	}
	for _, c := range cases {
		if err := signature.Verify(c.secret, []byte(c.body), c.sig, c.ts, c.now); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}
