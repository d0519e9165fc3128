package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// Tester sends test events: each signed and posted exactly as a delivery
// is, through the same address policy, certificates and timeout, but once,
// and recorded nowhere.
type Tester struct {
	opts   Options
	client *http.Client
}

// NewTester returns a tester that posts as a dispatcher with opts does.
func NewTester(opts Options) *Tester {
	return &Tester{opts: opts, client: newClient(opts)}
}

// TestResult is what a receiver made of a test event.
type TestResult struct {
	DeliveryID string `json:"delivery_id"`
	Event      string `json:"event"`
	// StatusCode is the receiver's HTTP status; 0 when none came.
	StatusCode int   `json:"status_code"`
	LatencyMs  int64 `json:"latency_ms"`
	// Body is the first bytes of the receiver's answer.
	Body string `json:"body"`
	// Error says what went wrong, as a delivery attempt's record would;
	// "" for a 2xx.
	Error string `json:"error,omitempty"`
}

// Send posts event, with data as its data and a "test": true mark, to
// hook's receiver once, and says how it answered.
func (t *Tester) Send(ctx context.Context, hook storage.Webhook, event string, data json.RawMessage) TestResult {
	start := time.Now()
	res := TestResult{DeliveryID: storage.NewID("dlv_test_"), Event: event}
	ans, err := send(ctx, t.client, t.opts.Timeout, hook,
		api.Event{Type: event, Data: data, Timestamp: start.UnixMilli(), DeliveryID: res.DeliveryID, Test: true})
	res.LatencyMs = time.Since(start).Milliseconds()
	res.StatusCode, res.Body = ans.StatusCode, string(ans.Excerpt)
	if err != nil {
		res.Error = err.Error()
	}
	// One connection per test: nothing to keep open.
	t.client.CloseIdleConnections()
	return res
}
