package daemon

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/fleet/route"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

// joinFleet makes this host a node of its fleet, when [fleet] says so:
// the node, the line directory, the control plane. What it starts is
// appended to undo, for a start that fails later.
func (d *Daemon) joinFleet(ctx context.Context, cfg *config.Config, undo *[]func() error) (err error) {
	if d.fleet, err = d.startFleet(ctx, cfg, d.log); err != nil || d.fleet == nil {
		return err
	}
	*undo = append(*undo, d.fleet.Close)
	if d.fleetDir, err = d.fleet.Directory(fleet.DirectoryOptions{Lines: d.fleetLines}); err != nil {
		return err
	}
	return d.startControl(ctx, undo)
}

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
		// The API's certificates, for the names in the routes: the routes
		// are encrypted and each node proves its name; a dialing node
		// proves the fleet's secret (an ACME certificate may not serve as
		// a client's).
		roots, err := cfg.TLSRoots()
		if err != nil {
			return nil, err
		}
		t := fleet.RouteTLSFromCertificate(d.api.tls.GetCertificate, roots)
		if f.Embedded() {
			o.RouteTLS = t
		} else {
			o.ClientTLS = t
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
		out = append(out, fleet.LineEntry{Line: l.ID, Handle: l.Handle, Health: health, BaseURL: d.baseURL})
	}
	return out
}

// fleetBeat is how often a node writes its heartbeat; a node whose last one
// is older than fleetSilence is down.
const (
	fleetBeat    = 10 * time.Second
	fleetSilence = 3 * fleetBeat
)

// beat writes this node's heartbeat every fleetBeat until ctx ends.
func (d *Daemon) beat(ctx context.Context) {
	t := time.NewTicker(fleetBeat)
	defer t.Stop()
	for {
		var handles []string
		for _, l := range d.lines {
			handles = append(handles, l.Handle)
		}
		e := fleet.NodeEntry{Version: cmp.Or(d.version, "dev"), BaseURL: d.baseURL, Lines: handles, StartedAt: d.started}
		if err := d.fleet.Beat(ctx, e, time.Now()); err != nil && ctx.Err() == nil {
			d.log.Warn("fleet: heartbeat", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fleetStatus is what `blueline fleet status` shows, as this node sees it.
func (d *Daemon) fleetStatus(ctx context.Context) (api.FleetStatus, error) {
	st := api.FleetStatus{Node: d.fleet.Name(), Nodes: []api.FleetNode{}, Lines: []api.FleetLine{}, Consumers: []api.FleetConsumer{}}
	now := time.Now()
	nodes, err := d.fleet.Nodes(ctx)
	if err != nil {
		return st, err
	}
	for _, n := range nodes {
		st.Nodes = append(st.Nodes, api.FleetNode{Node: n.Node, Up: now.Sub(n.UpdatedAt) <= fleetSilence, Version: n.Version,
			BaseURL: n.BaseURL, Lines: n.Lines, StartedAt: n.StartedAt.UnixMilli(), LastSeen: n.UpdatedAt.UnixMilli()})
	}
	dir := d.fleetDir
	lines, err := dir.Lines(ctx)
	if err != nil {
		return st, err
	}
	for _, l := range lines {
		st.Lines = append(st.Lines, api.FleetLine{Handle: l.Handle, LineID: l.Line, Node: l.Node, Health: l.Health, Up: dir.Up(l)})
	}
	js, err := d.fleet.Status(ctx)
	if err != nil {
		return st, err
	}
	st.Stream = api.FleetAsset(js.Stream)
	for _, b := range js.Buckets {
		st.Buckets = append(st.Buckets, api.FleetAsset(b))
	}
	for _, c := range js.Consumers {
		st.Consumers = append(st.Consumers, api.FleetConsumer(c))
	}
	return st, nil
}

// fleetRouting is the API's router as a fleet's node serves it: this node
// answers the requests other nodes forward to it, and api (the router)
// gets the entry in front, which sends line-scoped requests to the node of
// their line (package fleet/route). api itself without [fleet].
func (d *Daemon) fleetRouting(srv *server.Server, api http.Handler, mtr *metrics.Metrics, log *slog.Logger) (http.Handler, error) {
	if d.fleet == nil {
		return api, nil
	}
	a := route.API{Routes: srv.Routes(), AsCaller: server.WithCaller, Authenticate: srv.Authenticate, Files: fleetFiles{d}}
	if _, err := route.Serve(d.fleet, a, 0, log); err != nil {
		return nil, err
	}
	entry := route.NewEntry(route.EntryOptions{Node: d.fleet, Directory: d.fleetDir, API: a, Log: log, Observe: mtr.Forwards()})
	return entry.Handler(api), nil
}

// fleetFiles is the node's file store as the fleet's routing shares it.
type fleetFiles struct{ d *Daemon }

func (f fleetFiles) Shared(ctx context.Context, id string) (storage.File, string, bool) {
	file, err := f.d.db.FileByID(ctx, id)
	if err != nil {
		return storage.File{}, "", false
	}
	return file, f.d.files.URL(id, time.Now()), true
}

func (f fleetFiles) Has(ctx context.Context, id string) bool {
	ok, err := f.d.db.HasFile(ctx, id)
	return ok && err == nil
}

func (f fleetFiles) Adopt(ctx context.Context, file storage.File, body io.Reader) error {
	return f.d.files.Adopt(ctx, file, body)
}
