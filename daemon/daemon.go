// Package daemon wires a Blueline together: storage, then the file store,
// the bridges, the API and admin listeners, and the workers (delivery,
// webhooks, each bridge's reader).
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/console"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/purge"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

// ShutdownTimeout bounds Run's shutdown: requests in flight have this long
// to finish, the workers to stop.
const ShutdownTimeout = 10 * time.Second

// Daemon is a running Blueline.
type Daemon struct {
	log      *slog.Logger
	db       *storage.DB
	lines    []storage.Line
	sim      *sim.Network
	bridges  map[string]bridge.Bridge // by line ID
	files    *files.Store
	receiver *delivery.Receiver
	api      *http.Server
	apiAddr  net.Addr
	tls      *listener.TLS // serves api over HTTPS, when [tls] is on
	admin    *http.Server
	stop     context.CancelFunc
	finished chan struct{} // closed when the delivery worker and the bridges have stopped
}

// Start opens the database in cfg's data folder, binds the API (port 0
// picks a free one: see Addr) and the admin socket, and starts serving and
// working. ctx bounds the start only: the daemon runs until Shutdown.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (_ *Daemon, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	started := time.Now()
	lines := configuredLines(cfg)
	db, err := storage.Open(cfg.DataDir())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	if lines, err = db.SyncLines(ctx, lines); err != nil {
		return nil, err
	}
	network := sim.New(cfg.Sim.Latency.Duration)
	bridges, err := openBridges(ctx, cfg, db, lines, network, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			closeBridges(bridges)
		}
	}()

	apiLn, err := listenAPI(cfg, log)
	if err != nil {
		return nil, err
	}
	// The public URL derives from the address really bound (port 0 picks one).
	bound := *cfg
	if apiLn.tls != nil {
		bound.TLS.HTTPSListen = apiLn.Addr().String()
	} else {
		bound.Server.Listen = apiLn.Addr().String()
	}
	store, err := files.Open(ctx, filepath.Join(cfg.DataDir(), "files"), db, files.Options{
		MaxUploadBytes: cfg.Files.MaxUploadBytes, URLTTL: cfg.Files.URLTTL.Duration, BaseURL: bound.PublicBaseURL(),
	})
	if err != nil {
		apiLn.Close()
		return nil, err
	}
	receiver := delivery.NewReceiver(db, store)
	policy := webhook.Policy{AllowHTTP: cfg.Webhooks.AllowHTTP, AllowPrivateNetworks: cfg.Webhooks.AllowPrivateNetworks}
	roots, err := cfg.WebhookRoots()
	if err != nil {
		apiLn.Close()
		return nil, err
	}
	// Readiness: the workers and each bridge run until their Run returns.
	mtr := metrics.New(db, log)
	mtr.CountLines(func() []metrics.LineCounts {
		var out []metrics.LineCounts
		for _, l := range lines {
			if b, ok := bridges[l.ID].(interface{ Health() messages.Health }); ok {
				h := b.Health()
				out = append(out, metrics.LineCounts{Line: l.Handle, HistoryRows: h.HistoryRows, Twins: h.Twins, Screened: h.Screened})
			}
		}
		return out
	})
	var deliveryUp, webhooksUp atomic.Bool
	bridgeUp := map[bridge.Bridge]*atomic.Bool{}
	for _, b := range distinct(bridges) {
		bridgeUp[b] = new(atomic.Bool)
	}
	ready := func(context.Context) []server.Check {
		checks := []server.Check{
			{Name: "delivery", OK: deliveryUp.Load(), Reason: "the delivery worker stopped (see the log)"},
			{Name: "webhooks", OK: webhooksUp.Load(), Reason: "the webhook dispatcher stopped (see the log)"},
		}
		for _, l := range lines {
			up := bridgeUp[bridges[l.ID]]
			c := server.Check{Name: "line " + l.Handle, OK: up != nil && up.Load(), Reason: "its " + l.Bridge + " bridge stopped (see the log)"}
			if h, ok := bridges[l.ID].(interface{ Health() messages.Health }); ok {
				c.Info = h.Health().String()
			}
			checks = append(checks, c)
		}
		return checks
	}
	hookOpts := webhook.Options{
		Schedule: cfg.Webhooks.Schedule(), Timeout: cfg.Webhooks.Timeout.Duration, DisableAfter: cfg.Webhooks.DisableAfter.Duration,
		Lanes: cfg.Webhooks.Concurrency, Policy: policy, RootCAs: roots, Retention: cfg.Webhooks.Retention.Duration,
		Metrics: mtr,
	}
	var con *console.Console
	if cfg.Dashboard.On() {
		conOpts := console.Options{
			DB: db, Log: log, BaseURL: bound.PublicBaseURL(), TrustedProxies: cfg.Server.Proxies(), SessionTTL: cfg.Dashboard.SessionTTL.Duration,
			Version: o.version, Started: started, Health: ready,
			StreamsPerSession: cfg.Limits.StreamsPerKey, StreamLifetime: cfg.Limits.StreamLifetime.Duration,
		}
		if apiLn.tls != nil {
			conOpts.TLS = apiLn.tls.State
		}
		con, err = console.New(conOpts)
		if err != nil {
			apiLn.Close()
			return nil, err
		}
	}
	guards := guardPolicies(cfg, lines)
	srvOpts := server.Options{
		RequestsPerHour: cfg.Limits.RequestsPerHour,
		MaxBodyBytes:    cfg.Limits.MaxBodyBytes,
		MaxAttempts:     cfg.Delivery.MaxAttempts,
		SandboxQuota:    cfg.Sandbox.DailyQuota,
		WebhookPolicy:   policy,
		WebhookTester:   webhook.NewTester(hookOpts),
		Advanced:        advanced(bridges),
		Capabilities:    capabilities(bridges),
		LineHealth:      lineHealth(bridges),
		Availability:    availability(bridges),
		SimAvailability: network.SetAvailability,
		Simulator:       network,
		Guard:           guards.policy,
		Ready:           ready,
		Metrics:         mtr,
		BodyIdleTimeout: cfg.Limits.BodyIdleTimeout.Duration,
		StreamsPerKey:   cfg.Limits.StreamsPerKey,
		StreamLifetime:  cfg.Limits.StreamLifetime.Duration,
	}
	if con != nil {
		srvOpts.Dashboard = con
	}
	// MCP for agents at /mcp: its tools call the API's own handler in
	// process (set once the server is built), as the request's key.
	var apiHandler http.Handler
	var srv *server.Server
	mcpHandler := mcpserver.NewHandler(mcpserver.HandlerOptions{
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apiHandler.ServeHTTP(w, r) }),
		CheckKey: func(ctx context.Context, authorization string, scopes ...string) error {
			return clientError(srv.CheckKey(ctx, authorization, scopes...))
		},
		AllowPrivateURLs: cfg.Webhooks.AllowPrivateNetworks,
		RequestsPerHour:  cfg.Limits.RequestsPerHour,
		SandboxQuota:     cfg.Sandbox.DailyQuota,
		Version:          o.version,
		MaxBodyBytes:     cfg.Limits.MaxBodyBytes,
		Log:              log,
	})
	srvOpts.MCP = mcpHandler
	srv = server.New(db, receiver, store, srvOpts, log)
	apiHandler = srv.Handler()
	adminLn, err := server.ListenAdmin(cfg.DataDir(), log)
	if err != nil {
		apiLn.Close()
		return nil, err
	}
	// The API may face the internet: at most max_connections connections
	// (more wait to be accepted), of which unauthenticated ones, and those
	// of any one address, may hold only a share; heads of at most 64 KiB
	// read within 10 s, bodies cut off when nothing arrives for
	// body_idle_timeout.
	connLimits := listener.Limits{Max: cfg.Limits.MaxConnections, TrustedProxies: cfg.Server.Proxies(), Log: log}
	if apiLn.tls != nil {
		apiLn.tls.LimitConnections(connLimits)
	} else {
		apiLn.plain = listener.Limit(apiLn.plain, connLimits)
	}
	d := &Daemon{
		log: log, db: db, lines: lines, sim: network, bridges: bridges, files: store, receiver: receiver,
		apiAddr: apiLn.Addr(), tls: apiLn.tls,
		api: &http.Server{
			Handler:           srv.Handler(),
			ConnContext:       listener.ConnContext, // lets BodyIdleTimeout reach the connection
			MaxHeaderBytes:    listener.MaxHeaderBytes,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		admin:    &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: 10 * time.Second},
		finished: make(chan struct{}),
	}
	if con != nil {
		// The console acts through the API's and the admin socket's own
		// handlers; its live streams end when the API shuts down.
		con.Connect(srv.Handler(), srv.AdminHandler())
		d.api.RegisterOnShutdown(con.Close)
	}
	d.api.RegisterOnShutdown(srv.CloseStreams)
	d.api.RegisterOnShutdown(mcpHandler.Close) // pending waits answer, so their requests end
	workerCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	// Shutting down ends admin requests still streaming (a backup) instead
	// of waiting for them.
	adminCtx, endAdmin := context.WithCancel(context.WithoutCancel(ctx))
	d.admin.BaseContext = func(net.Listener) context.Context { return adminCtx }
	d.admin.RegisterOnShutdown(endAdmin)
	worker := delivery.NewWorker(db, bridges, store, delivery.Options{
		Workers: cfg.Delivery.Workers, RetryBase: cfg.Delivery.RetryBase.Duration, RetryMax: cfg.Delivery.RetryMax.Duration,
		Metrics: mtr, Pace: guards.pace(),
	}, log)
	dispatcher := webhook.New(db, srv, hookOpts, log)
	var running sync.WaitGroup
	deliveryUp.Store(true)
	running.Go(func() {
		defer deliveryUp.Store(false)
		if err := worker.Run(workerCtx); err != nil {
			log.Error("delivery worker stopped", "err", err)
		}
	})
	webhooksUp.Store(true)
	running.Go(func() {
		defer webhooksUp.Store(false)
		if err := dispatcher.Run(workerCtx); err != nil {
			log.Error("webhook dispatcher stopped", "err", err)
		}
	})
	for _, b := range distinct(bridges) {
		bridgeUp[b].Store(true)
		running.Go(func() {
			defer bridgeUp[b].Store(false)
			if err := b.Run(workerCtx, receiver); err != nil {
				log.Error("bridge stopped", "err", err)
			}
		})
	}
	// What is kept only for a while: the event log (as long as webhook
	// deliveries), and the console's expired sign-ins.
	running.Go(func() {
		purge.Every(workerCtx, time.Hour, log, "events", func(ctx context.Context) (int, error) {
			return db.PurgeEvents(ctx, time.Now().Add(-cfg.Webhooks.Retention.Duration).UnixMilli())
		})
	})
	running.Go(func() {
		purge.Every(workerCtx, time.Hour, log, "expired dashboard sign-ins", func(ctx context.Context) (int, error) {
			return db.PurgeConsole(ctx, time.Now().UnixMilli())
		})
	})
	go func() {
		running.Wait()
		close(d.finished)
	}()
	apiLn.serve(d.api, log)
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
	var err error
	if d.tls != nil {
		err = d.tls.Shutdown(ctx) // the API, the HTTP server and certificate management
	} else {
		err = d.api.Shutdown(ctx)
	}
	d.admin.Shutdown(ctx)
	d.stop()
	select {
	case <-d.finished:
	case <-ctx.Done():
		d.log.Warn("delivery worker did not stop in time")
	}
	closeBridges(d.bridges)
	return errors.Join(err, d.db.Close())
}

// Option adjusts how Start builds a daemon.
type Option func(*options)

type options struct {
	version string
}

// WithVersion is the binary's version, which the console shows.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// Addr is the address the API listens on (HTTPS when [tls] is on).
func (d *Daemon) Addr() net.Addr { return d.apiAddr }

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
