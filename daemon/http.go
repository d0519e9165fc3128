package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/blueline-app/blueline/admin"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/console"
	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/webhook"
)

// webhookOptions are [webhooks]'s settings for the dispatcher and the
// tester.
func webhookOptions(cfg *config.Config, mtr *metrics.Metrics) (webhook.Options, error) {
	roots, err := cfg.WebhookRoots()
	if err != nil {
		return webhook.Options{}, err
	}
	w := cfg.Webhooks
	return webhook.Options{
		Schedule: w.Schedule(), Timeout: w.Timeout.Duration, DisableAfter: w.DisableAfter.Duration, Lanes: w.Concurrency,
		Policy: webhookPolicy(cfg), RootCAs: roots, Metrics: mtr,
	}, nil
}

func webhookPolicy(cfg *config.Config) webhook.Policy {
	return webhook.Policy{AllowHTTP: cfg.Webhooks.AllowHTTP, AllowPrivateNetworks: cfg.Webhooks.AllowPrivateNetworks}
}

// newServer is the /v1 API over the daemon's storage, files and bridges.
func (d *Daemon) newServer(cfg *config.Config, mtr *metrics.Metrics, guards guardSet) *server.Server {
	return server.New(d.db, d.files, server.Options{
		RequestsPerHour: cfg.Limits.RequestsPerHour,
		MaxBodyBytes:    cfg.Limits.MaxBodyBytes,
		MaxAttempts:     cfg.Delivery.MaxAttempts,
		SandboxQuota:    cfg.Sandbox.DailyQuota,
		WebhookPolicy:   webhookPolicy(cfg),
		Advanced:        advanced(d.bridges),
		Capabilities:    capabilities(d.bridges),
		LineHealth:      lineHealth(d.bridges),
		LineLatency:     lineLatency(mtr),
		Availability:    availability(d.bridges),
		Guard:           guards.policy,
		Ready:           d.checks,
		Metrics:         mtr,
		BodyIdleTimeout: cfg.Limits.BodyIdleTimeout.Duration,
		StreamsPerKey:   cfg.Limits.StreamsPerKey,
		StreamLifetime:  cfg.Limits.StreamLifetime.Duration,
		Events:          d.eventLog(),
		Search:          d.search,
	}, d.log)
}

// servers builds the API's listener's HTTP server and the admin socket's
// from the parts: the API, the admin commands, MCP and the console, each
// handed what it calls.
func (d *Daemon) servers(cfg *config.Config, o options, baseURL string, srv *server.Server, mtr *metrics.Metrics, hookOpts webhook.Options) (web, adm *http.Server, err error) {
	log := d.log
	// The API's routes; in a fleet, with the entry in front that sends
	// line-scoped requests to the node of their line. The console, the
	// admin socket and MCP call the API through them too, so that each
	// sees the whole fleet.
	routes, err := d.fleetRouting(srv, srv.Routes(), mtr, log)
	if err != nil {
		return nil, nil, err
	}
	apiHandler := srv.Middleware(routes)
	adminOpts := admin.Options{
		API: server.AsHost(apiHandler), Inbound: d.receiver, Simulator: d.sim, SimAvailability: d.sim.SetAvailability,
		WebhookTester: webhook.NewTester(hookOpts), Metrics: mtr.Handler(),
	}
	if cfg.Dashboard.On() {
		adminOpts.Dashboard = console.NewSignIns(d.db, baseURL)
	}
	if d.fleet != nil {
		adminOpts.Fleet = d.fleetStatus
		adminOpts.FleetLines = fleetLines{d.fleet}
	}
	admins := admin.New(d.db, srv, adminOpts, log)
	// MCP for agents: its tools call the API's own handler in process, as
	// the request's key (in a fleet, routed as the listener's requests are).
	mcp := mcpserver.NewHandler(mcpserver.HandlerOptions{
		API: apiHandler,
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
	// One router in front: the console under /dashboard, MCP at /mcp,
	// everything else the API's (which answers unknown paths in its error
	// shape); every request under the API's middleware.
	front := httprouter.New()
	front.RedirectTrailingSlash, front.RedirectFixedPath = false, false
	front.HandleMethodNotAllowed, front.HandleOPTIONS = false, false
	front.NotFound = routes
	mount(front, server.MCPPath, srv.RequireKey(mcp))
	var con *console.Console
	if cfg.Dashboard.On() {
		conOpts := console.Options{
			DB: d.db, Log: log, BaseURL: baseURL, TrustedProxies: cfg.Server.Proxies(), SessionTTL: cfg.Dashboard.SessionTTL.Duration,
			Version: o.version, Started: o.started, Health: d.checks, API: apiHandler, Admin: admins.Handler(),
			StreamsPerSession: cfg.Limits.StreamsPerKey, StreamLifetime: cfg.Limits.StreamLifetime.Duration, Dev: cfg.Dev,
		}
		if d.api.tls != nil {
			conOpts.TLS = d.api.tls.State
		}
		if con, err = console.New(conOpts); err != nil {
			return nil, nil, err
		}
		mount(front, "/dashboard", con)
		mount(front, "/dashboard/*path", con)
	}
	web = &http.Server{
		Handler:           srv.Middleware(front),
		ConnContext:       listener.ConnContext, // lets listener.BodyIdleTimeout reach the connection
		MaxHeaderBytes:    listener.MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Live streams end when the API shuts down: the console's, the
	// API's own, and MCP's pending waits, so their requests end.
	if con != nil {
		web.RegisterOnShutdown(con.Close)
	}
	web.RegisterOnShutdown(srv.CloseStreams)
	web.RegisterOnShutdown(mcp.Close)
	adm = &http.Server{Handler: admins.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// Shutting down ends admin requests still streaming (a backup) instead
	// of waiting for them.
	adminCtx, endAdmin := context.WithCancel(context.Background())
	adm.BaseContext = func(net.Listener) context.Context { return adminCtx }
	adm.RegisterOnShutdown(endAdmin)
	return web, adm, nil
}

// mount serves h at path for every method: what is allowed there is h's to
// say.
func mount(r *httprouter.Router, path string, h http.Handler) {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		r.Handler(m, path, h)
	}
}
