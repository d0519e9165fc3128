// Package daemon wires a Blueline together: storage, then the file store,
// the bridges, the API and admin listeners, and the jobs (delivery,
// webhooks, each bridge's reader, the periodic purges).
//
// Start returns a running daemon; Shutdown stops it. Run is the foreground
// form `blueline serve` uses: on a started daemon it blocks until its
// context is done, then shuts the daemon down within ShutdownTimeout. The
// end-to-end tests (e2e/) start daemons on port 0 in temporary folders
// through this surface alone.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/fleet/control"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/search"
	"github.com/blueline-app/blueline/storage"
)

// ShutdownTimeout bounds Run's shutdown: requests in flight have this long
// to finish, the jobs to stop.
const ShutdownTimeout = 10 * time.Second

// Daemon is a running Blueline.
type Daemon struct {
	log      *slog.Logger
	db       *storage.DB
	search   *search.Index // the full-text index of the messages, beside db
	lines    []storage.Line
	sim      *sim.Network
	bridges  map[string]bridge.Bridge // by line ID
	files    *files.Store
	receiver *delivery.Receiver
	api      apiListener
	web      *http.Server // the API's listener: /v1, the console, MCP, health
	admin    *http.Server
	jobs     *jobs
	fleet    *fleet.Node      // nil without [fleet]
	fleetDir *fleet.Directory // the line directory; nil without [fleet]
	control  *control.Control // the fleet's control records; nil without [fleet]
	version  string
	started  time.Time
	baseURL  string // the API's public URL
}

// Start opens the database in cfg's data folder, binds the API (port 0
// picks a free one: see Addr) and the admin socket, and starts serving and
// working. ctx bounds the start only: the daemon runs until Shutdown. The
// parts start in order; on a failure, those started are closed in reverse.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (_ *Daemon, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.started = time.Now()
	d := &Daemon{log: log, sim: sim.New(cfg.Sim.Latency.Duration), version: o.version, started: o.started}
	var undo []func() error
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if d.db, err = storage.Open(cfg.DataDir()); err != nil {
		return nil, err
	}
	undo = append(undo, d.db.Close)
	if d.search, err = search.Open(ctx, filepath.Join(cfg.DataDir(), "search.db"), d.db, log); err != nil {
		return nil, err
	}
	undo = append(undo, d.search.Close)
	if d.lines, err = d.db.SyncLines(ctx, configuredLines(cfg)); err != nil {
		return nil, err
	}
	if d.api, err = listenAPI(cfg, log); err != nil {
		return nil, err
	}
	undo = append(undo, d.api.Close)
	if err = d.joinFleet(ctx, cfg, &undo); err != nil {
		return nil, err
	}
	if d.bridges, err = openBridges(ctx, cfg, d.db, d.lines, d.sim, log); err != nil {
		return nil, err
	}
	undo = append(undo, func() error { closeBridges(d.bridges); return nil })
	baseURL := d.api.publicBaseURL(cfg)
	d.baseURL = baseURL
	d.files, err = files.Open(ctx, filepath.Join(cfg.DataDir(), "files"), d.db, files.Options{
		MaxUploadBytes: cfg.Files.MaxUploadBytes, URLTTL: cfg.Files.URLTTL.Duration, BaseURL: baseURL,
	})
	if err != nil {
		return nil, err
	}
	d.receiver = delivery.NewReceiver(d.db, d.files)
	mtr := metrics.New(d.db, log)
	d.receiver.Latency = mtr
	mtr.CountLines(d.lineCounts)
	if d.fleet != nil {
		mtr.CountFleet(d.fleetCounts)
	}
	guards := guardPolicies(cfg, d.lines)
	hookOpts, err := webhookOptions(cfg, mtr)
	if err != nil {
		return nil, err
	}
	srv := d.newServer(cfg, mtr, guards)
	d.jobs = d.newJobs(cfg, mtr, guards, hookOpts, srv)
	if d.web, d.admin, err = d.servers(cfg, o, baseURL, srv, mtr, hookOpts); err != nil {
		return nil, err
	}
	adminLn, err := adminsock.Listen(cfg.DataDir(), log)
	if err != nil {
		return nil, err
	}
	d.jobs.start(ctx, log)
	d.api.serve(d.web, log)
	go serveUntilClosed(d.admin, adminLn, log)
	return d, nil
}

// Run serves until ctx is done, then shuts the daemon down within
// ShutdownTimeout: requests in flight finish, the workers stop, the
// database is closed.
func (d *Daemon) Run(ctx context.Context) error {
	<-ctx.Done()
	d.log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	return d.Shutdown(shutdownCtx)
}

// Shutdown stops accepting requests, lets those in flight finish, stops the
// workers and the bridges and closes the database. When ctx ends first, it
// stops waiting for the workers.
func (d *Daemon) Shutdown(ctx context.Context) error {
	err := d.api.shutdown(ctx, d.web)
	d.admin.Shutdown(ctx)
	d.jobs.stop(ctx, d.log)
	closeBridges(d.bridges)
	d.stopControl(ctx)
	if d.fleet != nil {
		err = errors.Join(err, d.fleet.Close())
	}
	return errors.Join(err, d.search.Close(), d.db.Close())
}

// Option adjusts how Start builds a daemon.
type Option func(*options)

type options struct {
	version string
	started time.Time
}

// WithVersion is the binary's version, which the console shows.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// Addr is the address the API listens on (HTTPS when [tls] is on).
func (d *Daemon) Addr() net.Addr { return d.api.Addr() }

// Lines are the lines the daemon serves, with their IDs.
func (d *Daemon) Lines() []storage.Line { return d.lines }

// HasKeys reports whether any API key exists.
func (d *Daemon) HasKeys(ctx context.Context) (bool, error) {
	keys, err := d.db.Keys(ctx)
	return len(keys) > 0, err
}

// Sim is the simulated network the lines with the sim bridge are on: what
// they sent, and failures to make it answer with.
func (d *Daemon) Sim() *sim.Network { return d.sim }

// Record stores a message arriving on a line, as a bridge reports it, with
// its events and webhooks.
func (d *Daemon) Record(ctx context.Context, in bridge.Inbound) (storage.InboundResult, error) {
	return d.receiver.Record(ctx, in)
}

// FileURL is a signed download URL of a stored file, as it is handed out
// at now (it expires the URL TTL later).
func (d *Daemon) FileURL(id string, now time.Time) string { return d.files.URL(id, now) }

// TypingIndicators are the typing indicators of a chat that are still on at
// now.
func (d *Daemon) TypingIndicators(chatID string, now time.Time) []storage.Indicator {
	return d.db.TypingIndicators(chatID, now)
}

// BridgeCursor is the saved chat.db position of the Messages line with this
// handle; saved is false until one was saved.
func (d *Daemon) BridgeCursor(ctx context.Context, handle string) (pos int64, saved bool, err error) {
	l, ok := d.db.LineByHandle(handle)
	if !ok {
		return 0, false, fmt.Errorf("no line %s", handle)
	}
	return d.db.BridgeCursor(ctx, l.ID)
}
