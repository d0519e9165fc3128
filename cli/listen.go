package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// envListenSecret is the secret listen signs with when --secret is not given.
const envListenSecret = "BLUELINE_LISTEN_SECRET"

// forwardTimeout is how long the local server has to answer a forward, as
// long as a receiver has to answer a delivery.
const forwardTimeout = 15 * time.Second

func (a *app) listenCommand() *cobra.Command {
	var f apiFlags
	var forwardTo, secret, since string
	var events, lines []string
	c := &cobra.Command{
		Use:   "listen [--forward-to URL] [--event EVENT…] [--line HANDLE…] [--since UNIX_MS] [--secret SECRET]",
		Short: "Follow the daemon's events live, and forward them as signed webhooks",
		Long: `Follow the events the daemon's webhooks get, as they happen, from a minute ago
(or --since, Unix ms), of every line (or each --line) and of the reference
service's four events (or each --event). On the host, as the host's
operator, the sandbox line's events are left out, as the API keeps each to
its owner: listen says so at the start, and --owner NAME follows that
owner's sandbox.

With --forward-to, each event is posted to that URL as a webhook delivery
is: the same body (its delivery_id is the event's evt_ ID, its timestamp the
time of signing), the same headers (Content-Type, User-Agent,
X-Webhook-Signature, -Timestamp and -Delivery-Id), signed with --secret,
else $` + envListenSecret + `, else a secret generated and printed at the start.
Each event is posted once, in order: one line per event says the time, the
event, its delivery ID, and what the URL answered (status and latency, or
what went wrong); a URL that is down or answers other than 2xx is reported
and listen goes on. With --json, one JSON object per event.

Without --forward-to, the events are printed: one line each, or with --json
each event's body as it would be delivered, one per line.

A stream that breaks (the daemon restarted) is followed again after the last
event seen, and says so on stderr. Ctrl-C ends listen.`,
		Example: `  blueline listen --forward-to http://localhost:3000/webhooks
  blueline listen -f http://localhost:3000/webhooks --event message.received --line +15550000001
  blueline listen --json | jq .data.text
  BLUELINE_API_KEY=sk_live_… blueline listen -f http://localhost:3000/webhooks --base-url https://blueline.example.com`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p := client.EventStreamParams{Events: splitList(strings.Join(events, ",")), Lines: splitList(strings.Join(lines, ","))}
			if since != "" {
				ms, err := strconv.ParseInt(since, 10, 64)
				if err != nil || ms < 0 {
					return usageErrorf("--since is a time in Unix milliseconds, not %q", since)
				}
				p.Since = time.UnixMilli(ms)
				if ms == 0 {
					p.Since = time.UnixMilli(1) // the beginning: zero would be the default
				}
			}
			l := &listener{a: a, json: f.json, operator: strings.TrimSpace(f.owner) == ""}
			if forwardTo != "" {
				u, err := url.Parse(forwardTo)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usageErrorf("--forward-to %q is not an http:// or https:// URL", forwardTo)
				}
				l.forwardTo = forwardTo
				l.secret = secret
				if l.secret == "" {
					l.secret = a.env.getenv(envListenSecret)
				}
				if l.secret == "" {
					l.secret = newListenSecret()
					fmt.Fprintf(a.stderr, "listen: signing with the generated secret: %s (pass --secret or set %s to keep one)\n", l.secret, envListenSecret)
				}
				l.http = &http.Client{Timeout: forwardTimeout, CheckRedirect: func(*http.Request, []*http.Request) error {
					return http.ErrUseLastResponse // as the daemon: a redirect is an answer, not followed
				}}
			}
			c, err := a.connect(&f, l.watch)
			if err != nil {
				return err
			}
			return c.explain(l.run(cmd.Context(), c, p))
		},
	}
	f.add(c)
	fl := c.Flags()
	fl.StringVarP(&forwardTo, "forward-to", "f", "", "post each event to this URL, signed as a webhook delivery")
	fl.StringArrayVar(&events, "event", nil, "an event to follow, repeatable (default: message.received, message.sent, reaction.added, reaction.removed)")
	fl.StringArrayVar(&lines, "line", nil, "a line to follow (handle or ln_ ID), repeatable (default: every line)")
	fl.StringVar(&since, "since", "", "start at this time, Unix ms (default: a minute ago)")
	fl.StringVar(&secret, "secret", "", "the secret forwards are signed with (default $"+envListenSecret+", else a generated one)")
	return c
}

// newListenSecret is a random secret shaped as a webhook's.
func newListenSecret() string {
	var b [24]byte
	rand.Read(b[:])
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// listener is one run of listen.
type listener struct {
	a         *app
	json      bool
	operator  bool // no --owner: on the host, the host's operator
	forwardTo string
	secret    string
	http      *http.Client

	// connected counts the stream's connections (watch); broken is the
	// count when the stream last broke, -1 while it is not broken.
	connected atomic.Int64
	broken    int64
}

// watch wraps the client's transport to see the stream connect, so that
// listen can say when a stream that broke is back.
func (l *listener) watch(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusOK && r.URL.Path == "/v1/events" {
			l.connected.Add(1)
		}
		return resp, err
	})
}

// sayWhatIsLeftOut says at the start that the host's operator follows no
// sandbox: the API keeps each sandbox chat's events to its owner, and
// listen follows what a webhook of its caller would get. Left unsaid, the
// sandbox's traffic would just never show.
func (l *listener) sayWhatIsLeftOut(ctx context.Context, c *apiConn, p client.EventStreamParams) {
	if !c.local || !l.operator {
		return // a key's owner, or --owner, follows their own sandbox
	}
	lines, err := c.Lines.List(ctx)
	if err != nil {
		return // the stream, next, says what is wrong, or waits for the daemon
	}
	for _, ln := range lines {
		if ln.IsSandbox && (len(p.Lines) == 0 || slices.Contains(p.Lines, ln.Handle) || slices.Contains(p.Lines, ln.ID)) {
			fmt.Fprintf(l.a.stderr, "listen: the sandbox line %s is left out: its events are its owners'; --owner NAME follows one owner's sandbox\n", ln.Handle)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// run follows the stream until ctx ends (nil) or the API refuses it.
func (l *listener) run(ctx context.Context, c *apiConn, p client.EventStreamParams) error {
	a := l.a
	where := "the local daemon"
	if !c.local {
		where = "the daemon"
	}
	l.sayWhatIsLeftOut(ctx, c, p)
	if l.forwardTo != "" {
		fmt.Fprintf(a.stderr, "listen: forwarding the events of %s to %s (Ctrl-C to stop)\n", where, l.forwardTo)
	} else {
		fmt.Fprintf(a.stderr, "listen: following the events of %s (Ctrl-C to stop)\n", where)
	}
	l.broken = -1
	for ev, err := range c.Events.Stream(ctx, p) {
		if err != nil {
			if _, ok := errors.AsType[*client.Error](err); ok {
				return err // the API refused the stream: it has ended
			}
			if l.broken < 0 {
				l.broken = l.connected.Load()
				fmt.Fprintf(a.stderr, "listen: the event stream broke (%v); following it again…\n", c.explain(errors.Unwrap(err)))
			}
			continue
		}
		l.resumed()
		if l.forwardTo == "" {
			l.print(ev)
			continue
		}
		l.forward(ctx, ev)
	}
	return nil
}

// resumed says, once, that a stream that broke is back.
func (l *listener) resumed() {
	if l.broken >= 0 && l.connected.Load() > l.broken {
		fmt.Fprintln(l.a.stderr, "listen: the event stream is back, from where it broke")
		l.broken = -1
	}
}

// print prints an event: its body with --json, else a line.
func (l *listener) print(ev client.StreamedEvent) {
	w := l.a.stdout
	if l.json {
		fmt.Fprintf(w, "%s\n", bytes.TrimSpace(ev.Raw))
		return
	}
	fmt.Fprintln(w, printable(fmt.Sprintf("%s  %s  %s", ev.Time().Format("15:04:05"), ev.Type, eventSummary(ev.Event))))
}

// eventSummary is the gist of an event, for its line.
func eventSummary(ev api.Event) string {
	switch {
	case strings.HasPrefix(ev.Type, "message."):
		m, err := ev.Message()
		if err != nil {
			break
		}
		parts := []string{m.Sender}
		if len(m.Attachments) > 0 {
			name := "attachment"
			if a := m.Attachments[0]; a.Filename != nil {
				name = *a.Filename
			} else if a.MimeType != nil {
				name = *a.MimeType
			}
			if m.IsAudioMessage {
				name = "voice memo"
			}
			parts = append(parts, "["+name+"]")
		}
		if m.Text != nil && *m.Text != "" {
			parts = append(parts, truncate(*m.Text, 100))
		}
		return strings.Join(parts, "  ")
	case strings.HasPrefix(ev.Type, "reaction."):
		r, err := ev.Reaction()
		if err != nil {
			break
		}
		verb := "added"
		if !r.Added {
			verb = "removed"
		}
		return fmt.Sprintf("%s  %s %s on %s", r.Sender, verb, r.Type, r.MessageID)
	}
	return truncate(string(ev.Data), 100)
}

// forwarded is the outcome of one forward, as --json prints it.
type forwarded struct {
	Time       int64  `json:"time"` // Unix ms, when it was posted
	Event      string `json:"event"`
	DeliveryID string `json:"delivery_id"`
	Seq        uint64 `json:"seq"`
	URL        string `json:"url"`
	Status     int    `json:"status,omitempty"` // the answer's HTTP status; none when no answer came
	LatencyMs  int64  `json:"latency_ms"`
	OK         bool   `json:"ok"`
	Error      string `json:"error,omitempty"`
}

// forward posts ev to the URL, signed, once, and prints the outcome.
func (l *listener) forward(ctx context.Context, ev client.StreamedEvent) {
	start := time.Now()
	out := forwarded{Time: start.UnixMilli(), Event: ev.Type, DeliveryID: ev.DeliveryID, Seq: ev.Seq, URL: l.forwardTo}
	status, err := l.post(ctx, ev.Event, start)
	if ctx.Err() != nil {
		return // Ctrl-C while posting: nothing to report
	}
	out.LatencyMs = time.Since(start).Milliseconds()
	out.Status = status
	if err != nil {
		out.Error = err.Error()
	} else {
		out.OK = true
	}
	if l.json {
		b, _ := json.Marshal(out)
		fmt.Fprintf(l.a.stdout, "%s\n", b)
		return
	}
	outcome := strconv.Itoa(status)
	if status == 0 {
		outcome = "-"
	}
	line := fmt.Sprintf("%s  %s  %s  %s  %dms", start.Format("15:04:05"), out.Event, out.DeliveryID, outcome, out.LatencyMs)
	if out.Error != "" {
		line += "  " + out.Error
	}
	fmt.Fprintln(l.a.stdout, printable(line))
}

// post signs ev at time at, as the daemon signs a delivery, posts it, and
// returns the answer's status; an error when none came or it is not a 2xx.
func (l *listener) post(ctx context.Context, ev api.Event, at time.Time) (int, error) {
	body, header, err := client.SignWebhook(l.secret, ev, at)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.forwardTo, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := l.http.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return 0, err
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("redirect to %q, not followed", resp.Header.Get("Location"))
	}
	msg := oneLine(string(excerpt))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(msg, 120))
}
