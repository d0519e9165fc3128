package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/storage"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type renderer struct{}

func (renderer) EventData(d storage.Delivery, lineHandle string) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"id": d.ID})
}

// stalledBody gives nothing until the request's deadline, then fails as a
// body cut by it does.
type stalledBody struct{ ctx context.Context }

func (b stalledBody) Read([]byte) (int, error) { <-b.ctx.Done(); return 0, b.ctx.Err() }
func (b stalledBody) Close() error             { return nil }

// An answer must be in before the timeout. http.Transport can return a
// response that raced with the deadline (the receiver answered when the
// cancellation closed the connection): the attempt is then a timeout, not a
// success. The transport here answers just that late, every time.
func TestLateAnswerIsATimeout(t *testing.T) {
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	const timeout = 50 * time.Millisecond
	d := New(db, renderer{}, Options{Timeout: timeout, Schedule: []time.Duration{time.Minute}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w := d.newWorker(context.Background(), storageWebhook("https://receiver.test/hook/s3cret?token=t0ken"))
	dd := storage.DueDelivery{Delivery: storage.Delivery{ID: "dlv_test", LineID: "ln_test", ChatID: "ch_test", Event: "message.received"}}
	answer := func(r *http.Request, body io.ReadCloser) *http.Response {
		return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: body, Request: r}
	}

	cases := []struct {
		name      string
		rt        roundTripFunc
		status    int
		wantError string
	}{
		{"in time", func(r *http.Request) (*http.Response, error) {
			return answer(r, io.NopCloser(strings.NewReader("ok"))), nil
		}, 200, ""},
		{"after the deadline", func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return answer(r, io.NopCloser(strings.NewReader("ok"))), nil
		}, 0, "no answer within 50ms"},
		{"body cut by the deadline", func(r *http.Request) (*http.Response, error) {
			return answer(r, stalledBody{r.Context()}), nil
		}, 0, "no answer within 50ms"},
		{"no answer", func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}, 0, "no answer within 50ms"},
		// The record keeps what went wrong, not the URL's path and query.
		{"connection error", func(r *http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset by peer")
		}, 0, "connection reset by peer"},
	}
	for _, c := range cases {
		w.client.Transport = c.rt
		a, retryAt := w.attempt(dd)
		if a.StatusCode != c.status || a.Error != c.wantError || (c.wantError != "") != (retryAt > 0) {
			t.Errorf("%s: status %d, error %q, retry at %d; want status %d, error %q", c.name, a.StatusCode, a.Error, retryAt, c.status, c.wantError)
		}
	}
}
