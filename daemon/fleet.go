package daemon

import (
	"context"
	"errors"
	"log/slog"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/fleet"
)

// startFleet makes this host a node of the fleet its [fleet] section names:
// its embedded NATS server (or a connection to the team's NATS), and the
// line directory's entries of this host's lines. Nil without [fleet]:
// nothing is started, nothing held in memory.
func (d *Daemon) startFleet(ctx context.Context, cfg *config.Config, log *slog.Logger) (*fleet.Node, error) {
	if !cfg.Fleet.On() {
		return nil, nil
	}
	f := cfg.Fleet
	o := fleet.Options{
		Node: f.Node, Secret: f.Secret, URL: f.URL, Logger: log,
	}
	if f.Embedded() {
		o.Listen, o.Cluster, o.Routes, o.StoreDir = f.Listen, f.Cluster, f.Routes, cfg.FleetStoreDir()
	}
	switch cfg.FleetRouteTLS() {
	case config.FleetTLSFiles:
		t, err := fleet.RouteTLSFromFiles(f.TLSCert, f.TLSKey, f.TLSCA)
		if err != nil {
			return nil, err
		}
		if f.Embedded() {
			o.RouteTLS = t
		} else {
			o.ClientTLS = t
		}
	case config.FleetTLSACME:
		if len(f.Routes) > 0 || f.URL != "" {
			// Not built yet: ACME certificates as the routes' mutual TLS
			// (an ACME certificate may not be usable as a client's).
			return nil, errors.New("[fleet]: routes over the [tls] section's ACME certificates are not supported yet; set [fleet] tls_cert, tls_key and tls_ca")
		}
	}
	n, err := fleet.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	// Webhooks are delivered from the fleet's events stream: events
	// recorded from now on queue no local deliveries (fleet_events.go).
	d.db.SetFleetDeliveries(true)
	return n, nil
}

// fleetLines are this host's lines as the line directory lists them.
func (d *Daemon) fleetLines() []fleet.LineEntry {
	checks := d.checks(context.Background())
	var out []fleet.LineEntry
	for _, l := range d.lines {
		health := "ok"
		for _, c := range checks {
			if c.Name == "line "+l.Handle && !c.OK {
				health = "down"
			}
		}
		out = append(out, fleet.LineEntry{Line: l.ID, Handle: l.Handle, Health: health})
	}
	return out
}
