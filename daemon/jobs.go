package daemon

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/purge"
	"github.com/blueline-app/blueline/webhook"
)

// job is a part of the daemon that runs until the daemon stops: a worker,
// a line's bridge, or a periodic purge.
type job struct {
	name string
	run  func(ctx context.Context) error
	// ready names the job in the readiness checks (GET /readyz, the
	// console), with why it fails once the job stopped; "" for none.
	ready, reason string
	// bridge is the bridge the job reads from; nil for the others.
	bridge bridge.Bridge
	up     atomic.Bool
}

// periodic is a job that forgets, every interval, what storage no longer
// needs.
type periodic struct {
	what     string
	interval time.Duration
	forget   func(ctx context.Context) (int, error)
}

// jobs are the daemon's jobs: started together after the listeners are
// bound, stopped together after the listeners are shut.
type jobs struct {
	all      []*job
	cancel   context.CancelFunc
	finished chan struct{}
}

// newJobs lists the daemon's jobs: the delivery worker, the webhook
// dispatcher, each bridge's reader, and the table of periodic purges (what
// is kept only for a while).
func (d *Daemon) newJobs(cfg *config.Config, mtr *metrics.Metrics, guards guardSet, hookOpts webhook.Options, render webhook.Renderer) *jobs {
	worker := delivery.NewWorker(d.db, d.bridges, d.files, delivery.Options{
		Workers: cfg.Delivery.Workers, RetryBase: cfg.Delivery.RetryBase.Duration, RetryMax: cfg.Delivery.RetryMax.Duration,
		Metrics: mtr, Pace: guards.pace(),
	}, d.log)
	js := &jobs{all: []*job{
		{name: "delivery worker", run: worker.Run, ready: "delivery", reason: "the delivery worker stopped (see the log)"},
		{name: "search index", run: func(ctx context.Context) error { d.search.Run(ctx); return nil }},
	}}
	if d.fleet == nil {
		dispatcher := webhook.New(d.db, render, hookOpts, d.log)
		js.all = append(js.all, &job{name: "webhook dispatcher", run: dispatcher.Run, ready: "webhooks", reason: "the webhook dispatcher stopped (see the log)"})
	} else {
		// The fleet's webhook consumers deliver instead (fleet_events.go).
		js.all = append(js.all, d.fleetEventJobs(hookOpts, render)...)
	}
	for _, b := range distinct(d.bridges) {
		js.all = append(js.all, &job{name: "bridge", bridge: b, run: func(ctx context.Context) error { return b.Run(ctx, d.receiver) }})
	}
	if d.fleet != nil {
		js.all = append(js.all, &job{name: "fleet line directory", run: func(ctx context.Context) error {
			stop := d.fleetDir.Run(ctx)
			defer stop()
			d.beat(ctx)
			return nil
		}})
	}
	retention := cfg.Webhooks.Retention.Duration
	for _, p := range []periodic{
		{"events", time.Hour, func(ctx context.Context) (int, error) {
			return d.db.PurgeEvents(ctx, time.Now().Add(-retention).UnixMilli())
		}},
		{"webhook deliveries", time.Hour, func(ctx context.Context) (int, error) {
			return d.db.PurgeDeliveries(ctx, time.Now().Add(-retention).UnixMilli())
		}},
		{"idempotency keys", time.Hour, d.db.PurgeIdempotency},
		{"expired dashboard sign-ins", time.Hour, func(ctx context.Context) (int, error) {
			return d.db.PurgeConsole(ctx, time.Now().UnixMilli())
		}},
		// Writes are checked against the clock; this tells the receivers
		// (agent_resumed, chat.released) within a minute of the end.
		{"ended takeovers and chat leases", time.Minute, func(ctx context.Context) (int, error) {
			return d.db.ExpireAgentHolds(ctx, time.Now().UnixMilli())
		}},
		// An answer is checked against the clock; this fails the drafts
		// no one answered, within a minute of their expiry.
		{"expired drafts", time.Minute, func(ctx context.Context) (int, error) {
			return d.db.ExpireApprovals(ctx, time.Now().UnixMilli())
		}},
	} {
		js.all = append(js.all, &job{name: "purge " + p.what, run: func(ctx context.Context) error {
			purge.Every(ctx, p.interval, d.log, p.what, p.forget)
			return nil
		}})
	}
	return js
}

// start runs every job until stop; ctx bounds nothing past the start.
func (js *jobs) start(ctx context.Context, log *slog.Logger) {
	ctx, js.cancel = context.WithCancel(context.WithoutCancel(ctx))
	js.finished = make(chan struct{})
	var running sync.WaitGroup
	for _, j := range js.all {
		j.up.Store(true)
		running.Go(func() {
			defer j.up.Store(false)
			if err := j.run(ctx); err != nil {
				log.Error(j.name+" stopped", "err", err)
			}
		})
	}
	go func() {
		running.Wait()
		close(js.finished)
	}()
}

// stop ends the jobs and waits for them, or until ctx ends.
func (js *jobs) stop(ctx context.Context, log *slog.Logger) {
	js.cancel()
	select {
	case <-js.finished:
	case <-ctx.Done():
		log.Warn("the daemon's jobs did not stop in time")
	}
}

// checks are the jobs' readiness checks, then each line's: up while its
// bridge's job runs.
func (d *Daemon) checks(context.Context) []api.Check {
	var checks []api.Check
	bridgeUp := map[bridge.Bridge]bool{}
	for _, j := range d.jobs.all {
		if j.ready != "" {
			checks = append(checks, api.Check{Name: j.ready, OK: j.up.Load(), Reason: j.reason})
		}
		if j.bridge != nil {
			bridgeUp[j.bridge] = j.up.Load()
		}
	}
	for _, l := range d.lines {
		b := d.bridges[l.ID]
		c := api.Check{Name: "line " + l.Handle, OK: bridgeUp[b], Reason: "its " + l.Bridge + " bridge stopped (see the log)"}
		if h, ok := b.(healthReporter); ok {
			c.Info = h.Health().String()
		}
		checks = append(checks, c)
	}
	return checks
}
