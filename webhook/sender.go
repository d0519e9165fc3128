package webhook

import (
	"context"
	"net/http"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// Sender posts events to receivers exactly as the dispatcher does: through
// a client that the address policy checks, trusting RootCAs, following no
// redirect, signed with the webhook's secret and timed out after
// Options.Timeout. A fleet's webhook consumers deliver with it.
type Sender struct {
	opts   Options
	client *http.Client
}

// NewSender returns a sender with opts' policy, roots and timeout.
func NewSender(opts Options) *Sender { return &Sender{opts: opts, client: newClient(opts)} }

// Send posts ev to hook's receiver, signed with ev.Timestamp, with
// ev.DeliveryID in its delivery header. status is the receiver's answer (0
// when none came); an answer other than a 2xx is an error, whose text is
// fit for the attempt's record. ctx is the sender's life: when it ends, the
// attempt was cut short.
func (s *Sender) Send(ctx context.Context, hook storage.Webhook, ev api.Event) (status int, err error) {
	ans, err := send(ctx, s.client, s.opts.Timeout, hook, ev)
	return ans.StatusCode, err
}

// Close releases the sender's idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Jitter spreads a retry's wait by ±10%, as the dispatcher's retries are,
// so that deliveries failed together do not all come back at once.
func Jitter(d time.Duration) time.Duration { return jitter(d) }
