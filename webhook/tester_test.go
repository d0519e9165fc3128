package webhook_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

// A test event is signed and posted as a delivery is, marked "test", and
// its answer reported; the policy and the timeout apply to it too.
func TestTesterSendsSigned(t *testing.T) {
	rc := newReceiver(t, true, func(n int, w http.ResponseWriter, r *http.Request) int {
		if n == 2 {
			return 500
		}
		return 200
	})
	roots := x509.NewCertPool()
	roots.AddCert(rc.Server.Certificate())
	tester := webhook.NewTester(webhook.Options{Policy: loopback, RootCAs: roots, Timeout: 100 * time.Millisecond})
	hook := storage.Webhook{ID: "wh_test", URL: rc.Server.URL + "/hook", Secret: rc.Secret(), Events: []string{api.EventMessageReceived}}

	res := tester.Send(context.Background(), hook, api.EventMessageReceived, json.RawMessage(`{"id":"msg_test_1"}`))
	got := rc.Requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	req := got[0]
	if req.Err != nil || req.Header.Get(signature.HeaderDeliveryID) != res.DeliveryID || !strings.HasPrefix(res.DeliveryID, "dlv_test_") ||
		req.Header.Get("User-Agent") != "Blueline-Webhooks/1" || !strings.Contains(string(req.Raw), `"test":true`) ||
		!strings.Contains(string(req.Raw), `"event":"message.received"`) {
		t.Errorf("test request (signature: %v): %v %s", req.Err, req.Header, req.Raw)
	}
	if res.StatusCode != 200 || res.Error != "" || res.Body != "answer 1" || res.Event != api.EventMessageReceived {
		t.Errorf("result %+v", res)
	}

	// A refusal is reported with its status and body.
	res = tester.Send(context.Background(), hook, api.EventMessageReceived, nil)
	if res.StatusCode != 500 || res.Error != "HTTP 500: answer 2" || res.Body != "answer 2" {
		t.Errorf("refused: %+v", res)
	}

	// Loopback is refused unless private networks are allowed.
	strict := webhook.NewTester(webhook.Options{Policy: webhook.Policy{AllowHTTP: true}, RootCAs: roots, Timeout: 100 * time.Millisecond})
	res = strict.Send(context.Background(), hook, api.EventMessageReceived, nil)
	if res.StatusCode != 0 || !strings.Contains(res.Error, "127.0.0.1 is not a public address") || len(rc.Requests()) != 2 {
		t.Errorf("policy: %+v, %d requests", res, len(rc.Requests()))
	}
}

// A receiver that does not answer within the timeout is reported as such.
func TestTesterTimeout(t *testing.T) {
	rc := newReceiver(t, false, func(n int, w http.ResponseWriter, r *http.Request) int {
		<-r.Context().Done()
		return 200
	})
	tester := webhook.NewTester(webhook.Options{Policy: loopback, Timeout: 50 * time.Millisecond})
	hook := storage.Webhook{ID: "wh_test", URL: rc.Server.URL, Secret: rc.Secret()}
	if res := tester.Send(context.Background(), hook, api.EventMessageSent, nil); res.StatusCode != 0 || res.Error != "no answer within 50ms" {
		t.Errorf("slow receiver: %+v", res)
	}
}
