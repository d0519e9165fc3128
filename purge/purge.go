// Package purge runs the periodic clean-ups of the daemon's workers: a loop
// that forgets what has outlived its use every so often and logs what it
// forgot.
package purge

import (
	"context"
	"log/slog"
	"time"
)

// Every calls forget every interval, the first time one interval after it
// is called, until ctx is cancelled. It logs an error forget returns, and at
// debug level how many items it forgot, naming them with what ("webhook
// deliveries" logs "purged webhook deliveries").
func Every(ctx context.Context, interval time.Duration, log *slog.Logger, what string, forget func(context.Context) (int, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := forget(ctx); err != nil {
				log.Error("purge "+what, "err", err)
			} else if n > 0 {
				log.Debug("purged "+what, "count", n)
			}
		}
	}
}
