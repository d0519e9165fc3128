package purge_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blueline-app/blueline/purge"
)

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Read only once Every has returned.
		var out strings.Builder
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime}))
		results := []struct {
			n   int
			err error
		}{{0, nil}, {3, nil}, {0, errors.New("disk full")}}
		var calls atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			purge.Every(ctx, time.Hour, log, "old things", func(context.Context) (int, error) {
				r := results[calls.Add(1)-1]
				return r.n, r.err
			})
		}()

		// Look half-way through each hour: none before the first, then one
		// an hour.
		time.Sleep(time.Hour / 2)
		for want := range len(results) + 1 {
			synctest.Wait()
			if got := int(calls.Load()); got != want {
				t.Fatalf("after %d.5 hours: %d purges, want %d", want, got, want)
			}
			if want < len(results) {
				time.Sleep(time.Hour)
			}
		}
		cancel()
		<-done

		want := "level=DEBUG msg=\"purged old things\" count=3\n" +
			"level=ERROR msg=\"purge old things\" err=\"disk full\"\n"
		if got := out.String(); got != want {
			t.Errorf("log:\n%s\nwant:\n%s", got, want)
		}
	})
}

func TestEveryStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	purge.Every(ctx, time.Hour, slog.New(slog.DiscardHandler), "old things", func(context.Context) (int, error) {
		t.Error("purged after the context was cancelled")
		return 0, nil
	})
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}
