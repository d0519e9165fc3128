package daemon

import (
	"context"
	"time"

	"github.com/blueline-app/blueline/fleet/relay"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/webhook"
)

// In a fleet, events go through the fleet's events stream: this node
// publishes what it records, the webhooks are delivered from the stream by
// whichever node is alive (in place of the local dispatcher, and storage
// queues no local deliveries: see startFleet), and the API's event stream
// reads the stream, so that it shows the whole fleet.

// fleetEventJobs are the jobs of a node of a fleet that carry its events:
// the publisher of its event log, and its share of the webhook consumers.
func (d *Daemon) fleetEventJobs(hookOpts webhook.Options, render webhook.Renderer) []*job {
	publisher := relay.NewPublisher(d.fleet, d.db, d.log)
	sender := webhook.NewSender(hookOpts)
	hooks := relay.NewWebhooks(d.fleet, d.db, render, sender, hookOpts, d.log)
	return []*job{
		{name: "fleet event publisher", run: publisher.Run, ready: "fleet events", reason: "the fleet's event publisher stopped (see the log)"},
		{name: "fleet webhook consumers", run: func(ctx context.Context) error {
			defer sender.Close()
			return hooks.Run(ctx)
		}, ready: "webhooks", reason: "the fleet's webhook consumers stopped (see the log)"},
	}
}

// eventLog is where the API's event stream reads: the fleet's events
// stream in a fleet, else (nil) the local event log.
func (d *Daemon) eventLog() server.EventLog {
	if d.fleet == nil {
		return nil
	}
	return relay.NewStream(d.fleet, d.log)
}

// fleetCounts are the fleet's figures of /metrics: how far this node's
// publisher is behind its event log, and each webhook consumer's backlog.
// A figure that cannot be read within a second is left out.
func (d *Daemon) fleetCounts() metrics.FleetCounts {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var f metrics.FleetCounts
	last, err := d.db.LastEventSeq(ctx)
	if cur, cerr := d.db.PublishCursor(ctx); err == nil && cerr == nil && last > cur.Seq {
		f.StreamLag = last - cur.Seq
	}
	if st, err := d.fleet.Status(ctx); err == nil {
		f.Backlog, f.InFlight = map[string]uint64{}, map[string]int{}
		for _, c := range st.Consumers {
			f.Backlog[c.Name], f.InFlight[c.Name] = c.Pending, c.AckPending
		}
	}
	return f
}
