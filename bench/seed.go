package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/storage"
)

type seedStats struct {
	messages int
	took     time.Duration
	seeders  int
}

// seed fills the data folder before the daemon starts: the small chat, then
// the big one, each message recorded through delivery.Receiver, the path a
// message the network delivers takes. Many goroutines record at once
// because RecordInbound group-commits concurrent callers into one fsync.
func seed(ctx context.Context, e *env, o options) (_ seedStats, err error) {
	db, err := storage.Open(e.dataDir)
	if err != nil {
		return seedStats{}, err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close the seeded database: %w", cerr)
		}
	}()
	if _, err := db.SyncLines(ctx, e.lines); err != nil {
		return seedStats{}, err
	}
	rec := delivery.NewReceiver(db, nil) // text messages only: no files to import

	total := o.small + o.big
	// Message i of a chat is sent i seconds after the chat's first one, so
	// the history spans a realistic range of timestamps and pages walk
	// through distinct sent_at values, oldest first in insertion order.
	first := time.Now().Add(-time.Duration(o.big+1) * time.Second)
	var next, done atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range o.seeders {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total || ctx.Err() != nil {
					return
				}
				contact, n := contactSmall, i
				if i >= o.small {
					contact, n = contactBig, i-o.small
				}
				text := fmt.Sprintf("seed message %d from %s", n, contact)
				_, err := rec.Record(ctx, bridge.Inbound{
					Line:    lineHandle,
					Service: "imessage",
					Chat:    sim.OneToOne("imessage", contact),
					GUID:    sim.NewGUID(),
					Sender:  contact,
					Text:    &text,
					SentAt:  first.Add(time.Duration(n) * time.Second),
				})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("seed message %d: %w", i, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	lastN, lastT := int64(0), start
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		case now := <-tick.C:
			n := done.Load()
			slog.Info("seeding", "done", n, "of", total,
				"rate_per_s", int(float64(n-lastN)/now.Sub(lastT).Seconds()),
				"eta", eta(total-int(n), float64(n)/now.Sub(start).Seconds()))
			lastN, lastT = n, now
		}
	}
	if firstErr != nil {
		return seedStats{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return seedStats{}, err
	}
	s := seedStats{messages: total, took: time.Since(start), seeders: o.seeders}
	slog.Info("seeded", "messages", total, "took", s.took.Round(time.Millisecond),
		"rate_per_s", int(float64(total)/s.took.Seconds()))
	return s, nil
}

func eta(left int, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return (time.Duration(float64(left)/rate) * time.Second).Round(time.Second)
}
