// Package webhook delivers events to the receivers registered for them:
// signed, durable, retried, and isolated, so that one slow or dead receiver
// delays nobody else.
//
// Deliveries are queued by storage in the transaction that stores what they
// are about. The dispatcher runs one worker per active webhook; a worker
// spreads its webhook's deliveries over a few lanes by chat, so that a chat's
// events reach the receiver one at a time, in order, while other chats go in
// parallel. Outcomes are recorded in batches by one recorder.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/storage"
)

// Options tune the dispatcher: the daemon passes [webhooks]'s settings.
// Timeout, DisableAfter and Lanes must be more than 0. How long finished
// deliveries are kept is the daemon's (its periodic purges).
type Options struct {
	Schedule     []time.Duration // waits before each retry; an attempt more than retries in all
	Timeout      time.Duration   // for a receiver to answer an attempt
	DisableAfter time.Duration   // an unbroken run of failures this long makes a webhook inactive
	Lanes        int             // concurrent deliveries per webhook
	Policy       Policy
	RootCAs      *x509.CertPool // trusted for receivers' certificates; nil means the system's
	// Metrics counts attempts; nil counts nothing.
	Metrics Metrics
}

// Metrics counts what the dispatcher does.
type Metrics interface {
	// WebhookAttempt counts an attempt's outcome: "success" or "failure".
	WebhookAttempt(outcome string)
	// Latency times a stage of a line's traffic: here "row_to_webhook".
	Latency(lineID, stage string, d time.Duration)
}

// TimeReceived records, after a receiver's 2xx answer to a delivery, how
// long the contact's message took from its time on the network (a chat.db
// row's date) to that answer. Other events are not timed.
func TimeReceived(m Metrics, event, lineID string, s storage.EventSubject, answered time.Time) {
	if m == nil || event != api.EventMessageReceived || s.Message == nil || s.Message.IsFromMe {
		return
	}
	m.Latency(lineID, "row_to_webhook", answered.Sub(time.UnixMilli(s.Message.SentAt)))
}

// Renderer turns a delivery's snapshot into the event's data, in the API's
// shapes (message attachments get fresh download URLs).
type Renderer interface {
	EventData(d storage.Delivery, lineHandle string) (json.RawMessage, error)
}

// Dispatcher delivers webhook events. Start it with Run.
type Dispatcher struct {
	db      *storage.DB
	render  Renderer
	opts    Options
	log     *slog.Logger
	results chan result
	// disabled tells Run to stop the workers of webhooks just disabled.
	disabled chan struct{}
}

// result is an attempt's outcome on its way to the recorder, which reports
// back on done once it is recorded.
type result struct {
	storage.AttemptResult
	done chan<- string
}

// New returns a dispatcher.
func New(db *storage.DB, render Renderer, opts Options, log *slog.Logger) *Dispatcher {
	return &Dispatcher{db: db, render: render, opts: opts, log: log, results: make(chan result, 1024), disabled: make(chan struct{}, 1)}
}

// Run delivers until ctx is cancelled. Deliveries under way when it stops
// are left scheduled: the next start delivers them again (at least once).
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	recorderCtx, stopRecorder := context.WithCancel(context.WithoutCancel(ctx))
	var recorder sync.WaitGroup
	recorder.Go(func() { d.record(recorderCtx) })
	defer func() {
		wg.Wait()
		stopRecorder()
		recorder.Wait()
	}()

	workers := map[string]*worker{}
	refresh := time.NewTicker(5 * time.Second)
	defer refresh.Stop()
	for {
		hooks, err := d.db.Webhooks(ctx, "")
		if err != nil && ctx.Err() == nil {
			d.log.Error("list webhooks", "err", err)
		}
		active := map[string]bool{}
		for _, h := range hooks {
			if !h.IsActive {
				continue
			}
			active[h.ID] = true
			if workers[h.ID] == nil {
				w := d.newWorker(ctx, h)
				workers[h.ID] = w
				wg.Go(w.run)
			}
		}
		for id, w := range workers {
			if !active[id] {
				w.stop()
				delete(workers, id)
			}
		}
		for _, w := range workers {
			w.poke()
		}
		select {
		case <-ctx.Done():
			for _, w := range workers {
				w.stop()
			}
			return nil
		case <-d.db.WebhooksReady():
		case <-d.disabled:
		case <-refresh.C:
		}
	}
}

// record writes outcomes in batches: a busy receiver's successes share a
// commit instead of paying one each.
func (d *Dispatcher) record(ctx context.Context) {
	for {
		var batch []result
		select {
		case <-ctx.Done():
			// Stopped once the workers have: what they left is final.
			for {
				select {
				case r := <-d.results:
					batch = append(batch, r)
				default:
					if len(batch) > 0 {
						d.recordBatch(context.WithoutCancel(ctx), batch)
					}
					return
				}
			}
		case r := <-d.results:
			batch = append(batch, r)
		}
	gather:
		for len(batch) < maxRecord {
			select {
			case r := <-d.results:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		d.recordBatch(ctx, batch)
	}
}

func (d *Dispatcher) recordBatch(ctx context.Context, batch []result) {
	attempts := make([]storage.AttemptResult, len(batch))
	for i, r := range batch {
		attempts[i] = r.AttemptResult
	}
	disabled, err := d.db.RecordAttempts(ctx, d.opts.DisableAfter.Milliseconds(), attempts...)
	if err != nil {
		// The deliveries stay scheduled and are tried again.
		d.log.Error("record webhook attempts", "count", len(batch), "err", err)
	}
	for _, id := range disabled {
		d.log.Warn("webhook disabled: its deliveries have failed for too long", "webhook_id", id, "after", d.opts.DisableAfter)
	}
	if len(disabled) > 0 {
		select {
		case d.disabled <- struct{}{}:
		default:
		}
	}
	for _, r := range batch {
		r.done <- r.Delivery.ID
	}
}

const maxRecord = 256

// worker delivers one webhook's events.
type worker struct {
	d      *Dispatcher
	hook   storage.Webhook
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	client *http.Client
	// done hears from the recorder about each delivery recorded; it has
	// room for every delivery the worker can have under way.
	done chan string
}

// queueDepth is how many deliveries wait per lane.
const queueDepth = 32

func (d *Dispatcher) newWorker(ctx context.Context, h storage.Webhook) *worker {
	ctx, cancel := context.WithCancel(ctx)
	return &worker{
		d: d, hook: h, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		done:   make(chan string, d.opts.Lanes*queueDepth),
		client: newClient(d.opts),
	}
}

// newClient is the HTTP client that posts to receivers: every connection
// checked by the policy, receivers' certificates checked against RootCAs,
// redirects not followed.
func newClient(opts Options) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: opts.Policy.control}
	transport := &http.Transport{
		// No Proxy: a proxy would connect on our behalf, past the policy.
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: opts.Lanes,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer, and not a 2xx
	}}
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) stop() { w.cancel() }

// run loads due deliveries and hands them to lanes by chat until stopped.
func (w *worker) run() {
	defer w.client.CloseIdleConnections()
	lanes := make([]chan storage.DueDelivery, w.d.opts.Lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = make(chan storage.DueDelivery, queueDepth)
		wg.Go(func() { w.lane(lanes[i]) })
	}
	defer func() {
		for _, l := range lanes {
			close(l)
		}
		wg.Wait()
	}()
	inflight := map[string]bool{}
	capacity := len(lanes) * queueDepth
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		nextDue := int64(0)
		if free := capacity - len(inflight); free > 0 {
			due, next, err := w.d.db.DueDeliveries(w.ctx, w.hook.ID, time.Now().UnixMilli(), free, func(id string) bool { return inflight[id] })
			if err != nil && w.ctx.Err() == nil {
				w.d.log.Error("load webhook deliveries", "webhook_id", w.hook.ID, "err", err)
				next = time.Now().Add(time.Second).UnixMilli()
			}
			nextDue = next
			for _, dd := range due {
				inflight[dd.ID] = true
				select {
				case lanes[laneOf(dd.ChatID, len(lanes))] <- dd:
				case <-w.ctx.Done():
					return
				}
			}
		}
		wait := time.Hour
		if nextDue > 0 {
			wait = max(time.Until(time.UnixMilli(nextDue)), 0)
		}
		timer.Reset(wait)
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		case id := <-w.done:
			delete(inflight, id)
		}
		for drained := false; !drained; {
			select {
			case id := <-w.done:
				delete(inflight, id)
			default:
				drained = true
			}
		}
	}
}

func laneOf(chatID string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(chatID))
	return int(h.Sum32() % uint32(n))
}

// lane delivers its chats' events in order. After a failure, the chat's
// later events wait for the failed one's retry instead of overtaking it, so
// that a receiver that comes back gets them in order.
func (w *worker) lane(queue <-chan storage.DueDelivery) {
	heldUntil := map[string]int64{} // chat ID → retry time of a failed delivery
	for dd := range queue {
		if w.ctx.Err() != nil {
			continue // left scheduled: the next start delivers it
		}
		now := time.Now().UnixMilli()
		res := storage.AttemptResult{Delivery: dd}
		if until, held := heldUntil[dd.ChatID]; held && until > now {
			res.Postpone, res.RetryAt = true, until
		} else {
			delete(heldUntil, dd.ChatID)
			res.Attempt, res.RetryAt = w.attempt(dd)
			if w.ctx.Err() != nil {
				continue // cut short by the stop: not a failure of the receiver
			}
			if m := w.d.opts.Metrics; m != nil {
				outcome := "success"
				if res.Attempt.Error != "" {
					outcome = "failure"
				}
				m.WebhookAttempt(outcome)
				if outcome == "success" {
					TimeReceived(m, dd.Event, dd.LineID, dd.EventSubject, time.Now())
				}
			}
			if res.Attempt.Error != "" && res.RetryAt > 0 {
				heldUntil[dd.ChatID] = res.RetryAt
			}
		}
		select {
		case w.d.results <- result{AttemptResult: res, done: w.done}:
		case <-w.ctx.Done():
		}
	}
}

// attempt makes one attempt and says when to retry after a failure (0: no
// more retries).
func (w *worker) attempt(dd storage.DueDelivery) (storage.Attempt, int64) {
	start := time.Now()
	a := storage.Attempt{At: start.UnixMilli()}
	err := w.post(dd, &a)
	a.LatencyMs = time.Since(start).Milliseconds()
	if err == nil {
		return a, 0
	}
	a.Error = err.Error()
	n := dd.Attempts + 1 // this attempt's number
	if n > len(w.d.opts.Schedule) {
		return a, 0
	}
	return a, time.Now().Add(jitter(w.d.opts.Schedule[n-1])).UnixMilli()
}

// jitter spreads a wait by ±10% so that deliveries failed together do not
// all come back at once.
func jitter(d time.Duration) time.Duration {
	spread := int64(d) / 10
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread) + time.Duration(rand.Int64N(2*spread+1))
}

// post sends a delivery, signed with a fresh timestamp, and reads the answer.
func (w *worker) post(dd storage.DueDelivery, a *storage.Attempt) error {
	line, _ := w.d.db.LineByID(dd.LineID)
	data, err := w.d.render.EventData(dd.Delivery, line.Handle)
	if err != nil {
		return fmt.Errorf("render event: %w", err)
	}
	ans, err := send(w.ctx, w.client, w.d.opts.Timeout, w.hook, api.Event{Type: dd.Event, Data: data, Timestamp: a.At, DeliveryID: dd.ID})
	a.StatusCode = ans.StatusCode
	return err
}

// answer is what a receiver answered: its status (0 when none came) and
// the first bytes of its body.
type answer struct {
	StatusCode int
	Excerpt    []byte
}

// excerptLen is how much of an answer's body is kept for the operator.
const excerptLen = 256

// send posts ev to hook's receiver, signed with ev.Timestamp, and reads
// the answer within timeout. An answer other than a 2xx is an error. ctx
// is the sender's life: when it ends, the attempt was cut short, not timed
// out.
func send(ctx context.Context, client *http.Client, timeout time.Duration, hook storage.Webhook, ev api.Event) (answer, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return answer{}, fmt.Errorf("encode event: %w", err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", signature.UserAgent)
	req.Header.Set(signature.HeaderSignature, signature.Sign(hook.Secret, ev.Timestamp, body))
	req.Header.Set(signature.HeaderTimestamp, fmt.Sprint(ev.Timestamp))
	req.Header.Set(signature.HeaderDeliveryID, ev.DeliveryID)
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return answer{}, fmt.Errorf("no answer within %s", timeout)
		}
		// The error's text starts with the whole URL, whose path and query
		// may carry the receiver's credential: the attempt's record, like
		// the logs, keeps what went wrong without it.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return answer{}, ue.Err
		}
		return answer{}, err
	}
	defer resp.Body.Close()
	// Read a little of the answer for the operator, and drain a little more
	// so the connection can be reused.
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptLen))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	// An answer must be in before the deadline. The transport can hand over
	// one that raced with it: cancelling closes the connection, a receiver
	// may answer as it sees it close (its request's context ends), and a
	// response that reaches us before the socket is gone is returned as if
	// in time. Such an answer, or one whose body the deadline cut, is no
	// answer within the timeout, whatever its status.
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return answer{}, fmt.Errorf("no answer within %s", timeout)
	}
	ans := answer{StatusCode: resp.StatusCode, Excerpt: excerpt}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return ans, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return ans, fmt.Errorf("HTTP %d redirect to %q, not followed", resp.StatusCode, resp.Header.Get("Location"))
	default:
		return ans, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(excerpt))
	}
}
