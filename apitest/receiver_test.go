package apitest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/testkit"
)

// deliver posts a delivery of body to rc, signed with secret at ts (Unix
// ms), and returns the status it got.
func deliver(t *testing.T, rc *apitest.Receiver, secret string, ts int64, body []byte) int {
	t.Helper()
	req, err := http.NewRequest("POST", rc.Server.URL+"/hook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signature.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(signature.HeaderSignature, signature.Sign(secret, ts, body))
	resp, err := rc.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func envelope(ts int64, id string) []byte {
	return fmt.Appendf(nil, `{"event":"message.received","delivery_id":%q,"timestamp":%d,"data":{"id":"msg_1","text":"hi"}}`, id, ts)
}

func TestReceiverVerifiesSignatures(t *testing.T) {
	rc := apitest.NewReceiver(t, false, nil)
	if rc.Secret() != "" {
		t.Fatalf("a new receiver has secret %q", rc.Secret())
	}
	// Before it knows the secret, a receiver records without verifying.
	now := time.Now().UnixMilli()
	if st := deliver(t, rc, "whsec_unknown", now, envelope(now, "dlv_0")); st != http.StatusNoContent {
		t.Errorf("status %d, want 204", st)
	}
	rc.SetSecret("whsec_right")
	if rc.Secret() != "whsec_right" {
		t.Errorf("Secret() = %q", rc.Secret())
	}
	deliver(t, rc, "whsec_right", now, envelope(now, "dlv_1"))
	deliver(t, rc, "whsec_wrong", now, envelope(now, "dlv_2"))
	old := time.Now().Add(-time.Hour).UnixMilli()
	deliver(t, rc, "whsec_right", old, envelope(old, "dlv_3"))

	got := rc.Requests()
	if len(got) != 4 {
		t.Fatalf("%d requests recorded, want 4", len(got))
	}
	if got[0].Err != nil || got[0].DeliveryID() != "dlv_0" {
		t.Errorf("before the secret: %v, %s", got[0].Err, got[0].DeliveryID())
	}
	h := got[1]
	if h.Err != nil {
		t.Errorf("a correctly signed delivery was refused: %v", h.Err)
	}
	if h.Event() != "message.received" || h.DeliveryID() != "dlv_1" || h.Timestamp() != now || h.Data()["text"] != "hi" {
		t.Errorf("delivery read as event %q, id %q, timestamp %d, data %v", h.Event(), h.DeliveryID(), h.Timestamp(), h.Data())
	}
	if h.Header.Get(signature.HeaderSignature) == "" || !bytes.Equal(h.Raw, envelope(now, "dlv_1")) {
		t.Errorf("headers %v, raw %s", h.Header, h.Raw)
	}
	if !errors.Is(got[2].Err, signature.ErrMismatch) {
		t.Errorf("a wrong signature: %v, want %v", got[2].Err, signature.ErrMismatch)
	}
	if !errors.Is(got[3].Err, signature.ErrTimestamp) {
		t.Errorf("an hour-old delivery: %v, want %v", got[3].Err, signature.ErrTimestamp)
	}
	// Requests is a copy.
	got[0].Raw = nil
	if rc.Requests()[0].Raw == nil {
		t.Error("Requests shares its slice")
	}
}

func TestReceiverBodyNotJSON(t *testing.T) {
	rc := apitest.NewReceiver(t, false, nil)
	rc.SetSecret("whsec_x")
	deliver(t, rc, "whsec_x", time.Now().UnixMilli(), []byte("not json"))
	got := rc.Requests()
	if len(got) != 1 || got[0].Err == nil || got[0].Body != nil {
		t.Errorf("a body that is not JSON: %+v", got)
	}
	if got[0].Timestamp() != 0 || got[0].Data() != nil {
		t.Errorf("timestamp %d, data %v of nothing", got[0].Timestamp(), got[0].Data())
	}
}

// Answers gives each request its status in turn, holds one open for Hang,
// then answers 204; it works over TLS too.
func TestReceiverAnswersOverTLS(t *testing.T) {
	rc := apitest.NewReceiver(t, true, apitest.Answers(t, 500, apitest.Hang, 202))
	if !strings.HasPrefix(rc.Server.URL, "https://") {
		t.Fatalf("URL %s, want https", rc.Server.URL)
	}
	post := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", rc.Server.URL, strings.NewReader(`{}`))
		resp, err := rc.Server.Client().Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if st, err := post(context.Background()); err != nil || st != 500 {
		t.Errorf("first: %d, %v; want 500", st, err)
	}
	// The second hangs until its sender gives up.
	ctx, cancel := context.WithCancel(context.Background())
	hung := make(chan error, 1)
	go func() { _, err := post(ctx); hung <- err }()
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rc.Requests()) == 2 })
	select {
	case err := <-hung:
		t.Fatalf("the hung request ended on its own: %v", err)
	default:
	}
	cancel()
	if err := <-hung; !errors.Is(err, context.Canceled) {
		t.Errorf("the hung request: %v, want canceled", err)
	}
	for i, want := range []int{202, 204, 204} {
		if st, err := post(context.Background()); err != nil || st != want {
			t.Errorf("request %d: %d, %v; want %d", i+3, st, err, want)
		}
	}
}

// An answer function may write the answer itself and return 0.
func TestReceiverAnswerWritesItself(t *testing.T) {
	rc := apitest.NewReceiver(t, false, func(n int, w http.ResponseWriter, r *http.Request) int {
		w.Header().Set("X-N", strconv.Itoa(n))
		w.WriteHeader(http.StatusTeapot)
		return 0
	})
	resp, err := http.Post(rc.Server.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-N") != "1" {
		t.Errorf("%d, X-N %q", resp.StatusCode, resp.Header.Get("X-N"))
	}
}

// With CheckEvents, a delivery the API document does not describe fails
// the test.
func TestReceiverCheckEvents(t *testing.T) {
	rec := &testkit.Recorder{TB: t}
	rc := apitest.NewReceiver(rec, false, nil)
	deliver(t, rc, "s", time.Now().UnixMilli(), []byte(`{"event":"no.such.event"}`))
	if f := rec.Failures(); len(f) > 0 {
		t.Fatalf("checked before CheckEvents: %v", f)
	}
	rc.CheckEvents()
	deliver(t, rc, "s", time.Now().UnixMilli(), []byte(`{"event":"no.such.event"}`))
	f := rec.Failures()
	if len(f) != 1 || !strings.Contains(f[0], "differs from the API document") || !strings.Contains(f[0], "no.such.event") {
		t.Errorf("failures %q, want the unknown event reported", f)
	}
	if n := len(rc.Requests()); n != 2 {
		t.Errorf("%d requests recorded, want 2 (a checked one is still recorded)", n)
	}
}
