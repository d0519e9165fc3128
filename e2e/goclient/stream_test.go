package goclient_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// follow runs Stream in the background and collects the texts of the
// messages it yields, and its errors.
type follow struct {
	mu    sync.Mutex
	texts []string
	errs  []error
	done  chan struct{}
}

func startFollow(ctx context.Context, c *client.Client, p client.EventStreamParams) *follow {
	f := &follow{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for ev, err := range c.Events.Stream(ctx, p) {
			f.mu.Lock()
			if err != nil {
				f.errs = append(f.errs, err)
			} else if m, err := ev.Message(); err == nil && m.Text != nil {
				f.texts = append(f.texts, *m.Text)
			}
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *follow) got() ([]string, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.texts), slices.Clone(f.errs)
}

// countStreams counts the stream's connections the server accepted.
type countStreams struct{ n atomic.Int32 }

func (c *countStreams) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusOK {
		c.n.Add(1)
	}
	return resp, err
}

// The daemon ends each stream after [limits] stream_lifetime; Stream
// follows it again by itself, from where it was: nothing lost, nothing
// twice, no error yielded.
func TestEventStreamOutlivesItsLifetime(t *testing.T) {
	td := startDaemon(t, "[limits]\nstream_lifetime = \"1s\"\n")
	var conns countStreams
	c := client.New(td.URL(), client.WithAPIKey(td.key("", "")), client.WithHTTPClient(&http.Client{Transport: &conns}))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f := startFollow(ctx, c, client.EventStreamParams{Lines: []string{mainLine}, Since: time.Now()})
	var want []string
	for i := range 3 {
		// Each on a later connection than the one before: the texts
		// straddle the streams' ends.
		n := conns.n.Load()
		testkit.Eventually(t, 10*time.Second, func() bool { return conns.n.Load() > n })
		text := "message " + strconv.Itoa(i)
		td.Inbound(mainLine, alice, text)
		want = append(want, text)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { texts, _ := f.got(); return len(texts) >= len(want) })
	cancel()
	<-f.done
	if texts, errs := f.got(); !slices.Equal(texts, want) || len(errs) > 0 {
		t.Errorf("across the streams' ends: %q (errors %v), want %q and no error", texts, errs, want)
	}
}

// A key revoked through the admin socket (`blueline keys revoke`) ends its
// streams: Stream ends with the API's 401 within a second or two, and
// yields nothing that came after the revocation.
func TestEventStreamEndsWhenKeyRevoked(t *testing.T) {
	td := startDaemon(t, "")
	var key api.KeyInfo
	if err := td.Admin().Do(t.Context(), http.MethodPost, "/keys", api.KeyRequest{Label: "doomed", Scopes: "all"}, &key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f := startFollow(ctx, td.client(key.Secret), client.EventStreamParams{Lines: []string{mainLine}, Since: time.Now()})
	td.Inbound(mainLine, alice, "before")
	testkit.Eventually(t, 5*time.Second, func() bool { texts, _ := f.got(); return len(texts) == 1 })

	revoked := time.Now()
	if err := td.Admin().Do(t.Context(), http.MethodPost, "/keys/revoke", map[string]string{"id": key.ID}, nil); err != nil {
		t.Fatal(err)
	}
	td.Inbound(mainLine, alice, "after the revocation")
	select {
	case <-f.done:
	case <-ctx.Done():
		t.Fatal("the stream did not end")
	}
	if d := time.Since(revoked); d > 2*time.Second {
		t.Errorf("the stream ended %s after the revocation", d)
	}
	texts, errs := f.got()
	if !slices.Equal(texts, []string{"before"}) {
		t.Errorf("the stream yielded %q, want only what came before the revocation", texts)
	}
	if len(errs) != 1 || !errors.Is(errs[0], client.ErrAuthentication) {
		t.Errorf("the stream ended with %v, want the API's 401", errs)
	}
}
