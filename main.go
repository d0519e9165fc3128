// Command blueline is the Blueline daemon and its admin commands.
//
//	blueline serve [--config FILE]
//	blueline keys create|list|revoke …
//	blueline sim inbound|reaction|typing|edit|unsend|read|group …
//	blueline sandbox
//	blueline version
package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

// Stamped at build time with -ldflags "-X main.version=…".
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Blueline: a messaging API for the lines of a Mac host, or of a simulated network.

Usage:
  blueline serve   [--config FILE]      run the daemon in the foreground
  blueline keys create [--config FILE] --label TEXT [--scopes all|scope,…] [--lines HANDLE_OR_ID,…] [--owner NAME]
  blueline keys list   [--config FILE]
  blueline keys revoke [--config FILE] ID
  blueline sim inbound [--config FILE] --line HANDLE --from HANDLE [--text TEXT] [--attach PATH | --audio PATH [--transcription TEXT]]
                       [--chat cht_… | --group NAME --participants a,b,c]
  blueline sim reaction [--config FILE] --line HANDLE --from HANDLE --message MSG_ID_OR_GUID --type TYPE [--emoji EMOJI] [--remove]
  blueline sim typing [--config FILE] --line HANDLE --from HANDLE [--chat cht_…] [--state on|off]
  blueline sim edit [--config FILE] --line HANDLE --from HANDLE --message MSG_ID_OR_GUID --text TEXT
  blueline sim unsend [--config FILE] --line HANDLE --from HANDLE --message MSG_ID_OR_GUID
  blueline sim read [--config FILE] --line HANDLE --from HANDLE [--message MSG_ID_OR_GUID] [--delivered-only]
  blueline sim group [--config FILE] --line HANDLE --chat cht_… --by HANDLE
                     --add HANDLE | --remove HANDLE | --leave | --rename NAME | --photo | --remove-photo
  blueline sandbox [--owner NAME]       every owner's sandbox; --owner starts that owner's activation
  blueline webhooks list [--config FILE]
  blueline webhooks deliveries [--config FILE] [--webhook wh_…] [--delivery dlv_…] [--limit N]
  blueline webhooks redeliver [--config FILE] DELIVERY_ID
  blueline backup  [--config FILE] [--force] FILE   hot copy of the running daemon's database
  blueline restore [--config FILE] FILE             put a backup in place (daemon stopped)
  blueline install --config FILE [--user NAME]      install the system service
  blueline uninstall | start | stop | restart | status
  blueline version

Without --config, the embedded default is used: 127.0.0.1:8080, data in ./blueline-data,
a simulated sandbox line and one simulated line with advanced features.
`

// errUsage marks a command line that is wrong; it exits 2.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = cmdServe(ctx, rest, stderr)
	case "keys":
		err = cmdKeys(ctx, rest, stdout)
	case "sim":
		err = cmdSim(ctx, rest, stdout)
	case "sandbox":
		err = cmdSandbox(ctx, rest, stdout)
	case "webhooks":
		err = cmdWebhooks(ctx, rest, stdout)
	case "backup":
		err = cmdBackup(ctx, rest, stdout)
	case "restore":
		err = cmdRestore(ctx, rest, stdout)
	case "install", "uninstall", "start", "stop", "restart", "status":
		err = cmdService(ctx, cmd, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "blueline %s (commit %s, built %s)\n", version, commit, date)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp):
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "blueline: %v\n\n", err)
		}
		fmt.Fprint(stderr, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "blueline: %v\n", err)
		return 1
	}
}

// parseFlags parses flags wherever they stand among the positional
// arguments ("revoke ID --config F" as well as "revoke --config F ID").
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// parseNoArgs parses a command's flags and refuses positional arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	rest, err := parseFlags(fs, args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %s takes no argument %q", errUsage, fs.Name(), rest[0])
	}
	return err
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	// The same program the system service runs (cmd_service.go).
	return runProgram(ctx, newProgram(*cfgPath, stderr))
}

// serve runs the daemon until ctx is done, then shuts it down within 10
// seconds: requests in flight finish, the workers stop, bbolt is closed. It is
// the one code path of `serve` in a terminal and of the system service.
func serve(ctx context.Context, cfgPath string, stderr io.Writer) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	d, err := startDaemon(ctx, cfg, log)
	if err != nil {
		return err
	}
	if keys, err := d.db.Keys(ctx); err == nil && len(keys) == 0 {
		flagCfg := ""
		if cfgPath != "" {
			flagCfg = " --config " + cfgPath
		}
		fmt.Fprintf(stderr, "\nNo API key exists yet. In another terminal, create one:\n\n  blueline keys create%s --label my-app --owner you@example.com\n\n", flagCfg)
	}
	<-ctx.Done()
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.Shutdown(shutdownCtx)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// daemon is a running Blueline: storage, the API and admin listeners, and
// the delivery worker, wired together.
type daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	db       *storage.DB
	sim      *sim.Network
	bridges  map[string]bridge.Bridge // by line ID
	files    *files.Store
	receiver *delivery.Receiver
	api      *http.Server
	apiAddr  net.Addr
	tls      *server.TLS // serves api over HTTPS, when [tls] is on
	admin    *http.Server
	stop     context.CancelFunc
	finished chan struct{} // closed when the delivery worker and the bridges have stopped
}

func startDaemon(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *daemon, err error) {
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
	roots, err := webhookRoots(cfg)
	if err != nil {
		apiLn.Close()
		return nil, err
	}
	// Readiness: the workers and each bridge run until their Run returns.
	mtr := metrics.New(db, log)
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
			if a, ok := bridges[l.ID].(interface{ Advanced() bool }); ok {
				c.Info = "advanced features: helper not connected"
				if a.Advanced() {
					c.Info = "advanced features: helper connected"
				}
			}
			checks = append(checks, c)
		}
		return checks
	}
	srv := server.New(db, receiver, store, server.Options{
		RequestsPerHour: cfg.Limits.RequestsPerHour,
		MaxBodyBytes:    cfg.Limits.MaxBodyBytes,
		MaxAttempts:     cfg.Delivery.MaxAttempts,
		SandboxQuota:    cfg.Sandbox.DailyQuota,
		WebhookPolicy:   policy,
		Advanced:        advanced(bridges),
		Ready:           ready,
		Metrics:         mtr,
		BodyIdleTimeout: cfg.Limits.BodyIdleTimeout.Duration,
	}, log)
	adminLn, err := server.ListenAdmin(cfg.DataDir())
	if err != nil {
		apiLn.Close()
		return nil, err
	}
	// The API may face the internet: at most max_connections connections
	// (more wait to be accepted), heads of at most 64 KiB read within 10 s,
	// bodies cut off when nothing arrives for body_idle_timeout.
	if apiLn.tls != nil {
		apiLn.tls.LimitConnections(cfg.Limits.MaxConnections)
	} else {
		apiLn.plain = server.LimitListener(apiLn.plain, cfg.Limits.MaxConnections)
	}
	d := &daemon{
		cfg: cfg, log: log, db: db, sim: network, bridges: bridges, files: store, receiver: receiver, apiAddr: apiLn.Addr(), tls: apiLn.tls,
		api: &http.Server{
			Handler:           srv.Handler(),
			ConnContext:       server.ConnContext, // lets BodyIdleTimeout reach the connection
			MaxHeaderBytes:    server.MaxHeaderBytes,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		admin:    &http.Server{Handler: srv.AdminHandler(), ReadHeaderTimeout: 10 * time.Second},
		finished: make(chan struct{}),
	}
	workerCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	// Shutting down ends admin requests still streaming (a backup) instead
	// of waiting for them.
	adminCtx, endAdmin := context.WithCancel(context.WithoutCancel(ctx))
	d.admin.BaseContext = func(net.Listener) context.Context { return adminCtx }
	d.admin.RegisterOnShutdown(endAdmin)
	worker := delivery.NewWorker(db, bridges, store, delivery.Options{
		Workers: cfg.Delivery.Workers, RetryBase: cfg.Delivery.RetryBase.Duration, RetryMax: cfg.Delivery.RetryMax.Duration,
		Metrics: mtr,
	}, log)
	schedule := make([]time.Duration, len(cfg.Webhooks.RetrySchedule))
	for i, d := range cfg.Webhooks.RetrySchedule {
		schedule[i] = d.Duration
	}
	dispatcher := webhook.New(db, srv, webhook.Options{
		Schedule: schedule, Timeout: cfg.Webhooks.Timeout.Duration, DisableAfter: cfg.Webhooks.DisableAfter.Duration,
		Lanes: cfg.Webhooks.Concurrency, Policy: policy, RootCAs: roots, Retention: cfg.Webhooks.Retention.Duration,
		Metrics: mtr,
	}, log)
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
	go func() {
		running.Wait()
		close(d.finished)
	}()
	apiLn.serve(d.api, log)
	go serveUntilClosed(d.admin, adminLn, log)
	log.Info("blueline serving", "version", version, "listen", d.apiAddr.String(), "data", cfg.DataDir(),
		"admin_socket", server.AdminSocketPath(cfg.DataDir()), "lines", len(lines))
	return d, nil
}

// webhookRoots is the system's certificate pool plus [webhooks] ca_file.
func webhookRoots(cfg *config.Config) (*x509.CertPool, error) {
	if cfg.Webhooks.CAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(cfg.Webhooks.CAFile)
	if err != nil {
		return nil, fmt.Errorf("config %s: webhooks.ca_file: %w", cfgName(cfg), err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("config %s: webhooks.ca_file: %s holds no PEM certificate", cfgName(cfg), cfg.Webhooks.CAFile)
	}
	return pool, nil
}

// openBridges gives each line its bridge: the simulated network, or the
// Messages app of this Mac.
func openBridges(ctx context.Context, cfg *config.Config, db *storage.DB, lines []storage.Line, network *sim.Network, log *slog.Logger) (map[string]bridge.Bridge, error) {
	bridges := map[string]bridge.Bridge{}
	for _, l := range lines {
		if l.Bridge != "messages" {
			bridges[l.ID] = network
			continue
		}
		i := slices.IndexFunc(cfg.Lines, func(c config.Line) bool { return c.Handle == l.Handle })
		lc := cfg.Lines[i]
		mb, err := messages.Open(ctx, messages.Config{
			Line: l.Handle, Service: l.Service, ChatDB: lc.ChatDB, Osascript: lc.Osascript,
			AttachmentsDir: lc.AttachmentsDir, HelperPort: lc.HelperPort, PollOnly: !*lc.Watch, SMSFallback: lc.SMSFallback,
			TextTimeout: lc.SendTimeout.Duration, FileTimeout: lc.FileSendTimeout.Duration, Poll: lc.Poll.Duration,
			TransferWait: lc.TransferWait.Duration, Cursor: lineCursor{db, l.ID}, Log: log,
		})
		if err != nil {
			closeBridges(bridges)
			return nil, err
		}
		bridges[l.ID] = mb
	}
	return bridges, nil
}

// closeBridges releases what bridges hold open (the Messages database, the
// helper's listener).
func closeBridges(bridges map[string]bridge.Bridge) {
	for _, b := range distinct(bridges) {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
	}
}

// advanced reports whether a line's advanced features work now: a Messages
// line's only while its private-API helper is connected.
func advanced(bridges map[string]bridge.Bridge) func(storage.Line) bool {
	return func(l storage.Line) bool {
		if a, ok := bridges[l.ID].(interface{ Advanced() bool }); ok {
			return a.Advanced()
		}
		return l.AdvancedFeatures
	}
}

// lineCursor keeps a Messages line's chat.db position in the database.
type lineCursor struct {
	db     *storage.DB
	lineID string
}

func (c lineCursor) Load(ctx context.Context) (int64, bool, error) {
	return c.db.BridgeCursor(ctx, c.lineID)
}
func (c lineCursor) Save(ctx context.Context, pos int64) error {
	return c.db.SetBridgeCursor(ctx, c.lineID, pos)
}

// distinct lists each bridge once, however many lines it serves.
func distinct(bridges map[string]bridge.Bridge) []bridge.Bridge {
	var out []bridge.Bridge
	for _, b := range bridges {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// apiListener is where the API is served: plain HTTP on [server] listen, or
// HTTPS with certificates from an ACME CA when [tls] lists domains.
type apiListener struct {
	plain net.Listener
	tls   *server.TLS
}

func listenAPI(cfg *config.Config, log *slog.Logger) (apiListener, error) {
	if !cfg.TLS.Enabled() {
		ln, err := net.Listen("tcp", cfg.Server.Listen)
		if err != nil {
			return apiListener{}, fmt.Errorf("listen on %s: %w", cfg.Server.Listen, err)
		}
		return apiListener{plain: ln}, nil
	}
	t := cfg.TLS
	var roots *x509.CertPool
	if t.TrustedRoots != "" {
		pem, err := os.ReadFile(t.TrustedRoots)
		if err != nil {
			return apiListener{}, fmt.Errorf("config %s: tls.trusted_roots: %w", cfgName(cfg), err)
		}
		if roots, err = x509.SystemCertPool(); err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return apiListener{}, fmt.Errorf("config %s: tls.trusted_roots: %s holds no PEM certificate", cfgName(cfg), t.TrustedRoots)
		}
	}
	s, err := server.ListenTLS(server.TLSOptions{
		Domains: t.Domains, Email: t.Email, CA: t.DirectoryURL(), TrustedRoots: roots,
		HTTPListen: t.HTTPListen, HTTPSListen: t.HTTPSListen, StorageDir: filepath.Join(cfg.DataDir(), "certmagic"),
		RenewCheckInterval: t.RenewCheck.Duration,
	}, log)
	if err != nil {
		return apiListener{}, err
	}
	return apiListener{tls: s}, nil
}

// Addr is the API's address: HTTPS when TLS is on.
func (l apiListener) Addr() net.Addr {
	if l.tls != nil {
		return l.tls.Addr()
	}
	return l.plain.Addr()
}

// Close releases the listeners of an API that will not be served.
func (l apiListener) Close() error {
	if l.tls != nil {
		return l.tls.Close()
	}
	return l.plain.Close()
}

// serve starts serving api, and with TLS obtaining its certificates.
func (l apiListener) serve(api *http.Server, log *slog.Logger) {
	if l.tls == nil {
		go serveUntilClosed(api, l.plain, log)
		return
	}
	l.tls.Serve(api)
}

func serveUntilClosed(s *http.Server, l net.Listener, log *slog.Logger) {
	if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("listener stopped", "addr", l.Addr().String(), "err", err)
	}
}

// configuredLines turns the configuration's lines into the lines to serve.
func configuredLines(cfg *config.Config) []storage.Line {
	var lines []storage.Line
	if cfg.Sandbox.Handle != "" {
		lines = append(lines, storage.Line{Handle: cfg.Sandbox.Handle, Label: cfg.Sandbox.Label, Service: "imessage",
			Bridge: "sim", AdvancedFeatures: cfg.Sandbox.Advanced(), IsSandbox: true})
	}
	for _, l := range cfg.Lines {
		lines = append(lines, storage.Line{Handle: l.Handle, Label: l.Label, Service: l.Service, Bridge: l.Bridge,
			AdvancedFeatures: l.AdvancedFeatures})
	}
	return lines
}

func cfgName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "(embedded default)"
	}
	return cfg.Path
}

// Shutdown stops accepting requests, lets those in flight finish, stops the
// delivery worker and closes the database.
func (d *daemon) Shutdown(ctx context.Context) error {
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

func adminClient(cfgPath string) (*server.AdminClient, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	return server.NewAdminClient(cfg.DataDir()), nil
}

func cmdKeys(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: keys needs create, list or revoke", errUsage)
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	switch args[0] {
	case "create":
		label := fs.String("label", "", "what the key is for")
		scopes := fs.String("scopes", "all", "all, or scope,scope,…")
		lines := fs.String("lines", "", "handles or line IDs the key is limited to")
		owner := fs.String("owner", "", "who the key belongs to")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if strings.TrimSpace(*label) == "" {
			return fmt.Errorf("%w: keys create needs --label", errUsage)
		}
		c, err := adminClient(*cfgPath)
		if err != nil {
			return err
		}
		var info server.KeyInfo
		req := server.KeyRequest{Label: *label, Scopes: *scopes, Lines: splitList(*lines), Owner: *owner}
		if err := c.Do(ctx, http.MethodPost, "/keys", req, &info); err != nil {
			return err
		}
		fmt.Fprintln(stdout, info.Secret)
	case "list":
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		var keys struct{ Data []server.KeyInfo }
		if err := adminGet(ctx, *cfgPath, "/keys", &keys); err != nil {
			return err
		}
		for _, k := range keys.Data {
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Label, scopeList(k.Scopes), orAll(k.Lines), orDash(k.Owner),
				time.UnixMilli(k.CreatedAt).UTC().Format(time.RFC3339))
		}
	case "revoke":
		id, err := adminPostID(ctx, fs, cfgPath, args[1:], "/keys/revoke")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", id)
	default:
		return fmt.Errorf("%w: unknown keys command %q", errUsage, args[0])
	}
	return nil
}

// adminGet decodes the answer to an admin GET into out.
func adminGet(ctx context.Context, cfgPath, path string, out any) error {
	c, err := adminClient(cfgPath)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodGet, path, nil, out)
}

// adminPostID posts {"id": ID} to an admin path, ID being the command's one
// positional argument.
func adminPostID(ctx context.Context, fs *flag.FlagSet, cfgPath *string, args []string, path string) (string, error) {
	rest, err := parseFlags(fs, args)
	if err != nil {
		return "", err
	}
	if len(rest) != 1 {
		return "", fmt.Errorf("%w: %s takes one ID", errUsage, fs.Name())
	}
	c, err := adminClient(*cfgPath)
	if err != nil {
		return "", err
	}
	return rest[0], c.Do(ctx, http.MethodPost, path, map[string]string{"id": rest[0]}, nil)
}

func scopeList(scopes []string) string {
	if len(scopes) == len(server.Scopes) {
		return "all"
	}
	return strings.Join(scopes, ",")
}

func orAll(lines []string) string {
	if len(lines) == 0 {
		return "all"
	}
	return strings.Join(lines, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// simCommands lists the sim subcommands, for the usage errors.
const simCommands = "inbound, reaction, typing, edit, unsend, read or group"

func cmdSim(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: sim needs a subcommand: %s", errUsage, simCommands)
	}
	fs := flag.NewFlagSet("sim "+args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	var path string
	var in any
	switch args[0] {
	case "inbound":
		var req server.SimInbound
		fs.StringVar(&req.Line, "line", "", "the line that receives the message")
		fs.StringVar(&req.From, "from", "", "the simulated contact's handle")
		fs.StringVar(&req.Text, "text", "", "the message text")
		fs.StringVar(&req.Chat, "chat", "", "an existing chat (cht_…) to send into")
		fs.StringVar(&req.Group, "group", "", "name of a new group chat")
		participants := fs.String("participants", "", "members of the new group chat, comma-separated")
		fs.StringVar(&req.Attach, "attach", "", "a file to attach: a picture, a .vcf contact card…")
		fs.StringVar(&req.Audio, "audio", "", "an audio file sent as a voice memo")
		fs.Func("transcription", "the voice memo's transcription (omit it: not transcribed yet)", func(v string) error {
			req.Transcription = &v
			return nil
		})
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Text == "" && req.Attach == "" && req.Audio == "" {
			return fmt.Errorf("%w: sim inbound needs --line, --from and --text (or --attach or --audio)", errUsage)
		}
		if (req.Group == "") != (*participants == "") {
			return fmt.Errorf("%w: --group and --participants go together", errUsage)
		}
		if req.Transcription != nil && req.Audio == "" {
			return fmt.Errorf("%w: --transcription goes with --audio", errUsage)
		}
		// The daemon reads the file: give it a path that does not depend
		// on this command's working directory.
		for _, p := range []*string{&req.Attach, &req.Audio} {
			if *p != "" {
				abs, err := filepath.Abs(*p)
				if err != nil {
					return err
				}
				*p = abs
			}
		}
		req.Participants = splitList(*participants)
		path, in = "/sim/inbound", req
	case "reaction":
		var req server.SimReaction
		fs.StringVar(&req.Line, "line", "", "the line whose message is reacted to")
		fs.StringVar(&req.From, "from", "", "the simulated contact's handle")
		fs.StringVar(&req.Message, "message", "", "the message (msg_… or GUID)")
		fs.StringVar(&req.Type, "type", "", "love, like, dislike, laugh, emphasize, question, emoji (with --emoji) or sticker")
		fs.StringVar(&req.Emoji, "emoji", "", "the emoji of a --type emoji tapback")
		fs.BoolVar(&req.Remove, "remove", false, "remove the reaction instead of adding it")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Message == "" || req.Type == "" {
			return fmt.Errorf("%w: sim reaction needs --line, --from, --message and --type", errUsage)
		}
		switch {
		case req.Type == bridge.ReactionEmoji && req.Emoji == "":
			return fmt.Errorf("%w: --type emoji needs --emoji", errUsage)
		case req.Type != bridge.ReactionEmoji && req.Emoji != "":
			return fmt.Errorf("%w: --emoji goes with --type emoji", errUsage)
		}
		path, in = "/sim/reaction", req
	case "typing":
		var req server.SimTyping
		fs.StringVar(&req.Line, "line", "", "the line the contact is typing to")
		fs.StringVar(&req.From, "from", "", "the simulated contact's handle")
		fs.StringVar(&req.Chat, "chat", "", "a group chat (cht_…); default the one-to-one chat")
		fs.StringVar(&req.State, "state", "on", "on or off")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" {
			return fmt.Errorf("%w: sim typing needs --line and --from", errUsage)
		}
		if req.State != "on" && req.State != "off" {
			return fmt.Errorf("%w: --state is on or off", errUsage)
		}
		path, in = "/sim/typing", req
	case "edit":
		var req server.SimEdit
		fs.StringVar(&req.Line, "line", "", "the line the message was sent to")
		fs.StringVar(&req.From, "from", "", "the simulated contact who sent it")
		fs.StringVar(&req.Message, "message", "", "the message (msg_… or GUID)")
		fs.StringVar(&req.Text, "text", "", "the message's new text")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Message == "" || req.Text == "" {
			return fmt.Errorf("%w: sim edit needs --line, --from, --message and --text", errUsage)
		}
		path, in = "/sim/edit", req
	case "unsend":
		var req server.SimUnsend
		fs.StringVar(&req.Line, "line", "", "the line the message was sent to")
		fs.StringVar(&req.From, "from", "", "the simulated contact who sent it")
		fs.StringVar(&req.Message, "message", "", "the message (msg_… or GUID)")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Message == "" {
			return fmt.Errorf("%w: sim unsend needs --line, --from and --message", errUsage)
		}
		path, in = "/sim/unsend", req
	case "read":
		var req server.SimRead
		fs.StringVar(&req.Line, "line", "", "the line whose message is read")
		fs.StringVar(&req.From, "from", "", "the simulated contact who reads it")
		fs.StringVar(&req.Message, "message", "", "the line's message (msg_… or GUID); default its latest to --from")
		fs.BoolVar(&req.DeliveredOnly, "delivered-only", false, "only deliver the message to the contact's device, unread")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" {
			return fmt.Errorf("%w: sim read needs --line and --from", errUsage)
		}
		path, in = "/sim/read", req
	case "group":
		req, err := parseSimGroup(fs, args[1:])
		if err != nil {
			return err
		}
		path, in = "/sim/group", req
	default:
		return fmt.Errorf("%w: unknown sim command %q (%s)", errUsage, args[0], simCommands)
	}
	return adminPrint(ctx, *cfgPath, http.MethodPost, path, in, stdout)
}

// parseSimGroup reads `sim group`, whose flags name one change each.
func parseSimGroup(fs *flag.FlagSet, args []string) (server.SimGroup, error) {
	var req server.SimGroup
	fs.StringVar(&req.Line, "line", "", "the line in the group")
	fs.StringVar(&req.Chat, "chat", "", "the group chat (cht_…)")
	fs.StringVar(&req.By, "by", "", "the member who makes the change, or the line's own handle")
	var given []string // the change flags, in order
	change := func(name, action string) { given, req.Action = append(given, "--"+name), action }
	member := func(name, action, help string) {
		fs.Func(name, help, func(v string) error {
			if v == "" {
				return errors.New("needs a handle")
			}
			change(name, action)
			req.Participant = v
			return nil
		})
	}
	member("add", bridge.ChatParticipantAdded, "a handle --by adds to the group")
	member("remove", bridge.ChatParticipantRemoved, "a member --by removes from the group")
	// Func, not String: --rename "" is a change too (the name cleared).
	fs.Func("rename", `the group's new name ("" clears it)`, func(v string) error {
		change("rename", bridge.ChatRenamed)
		req.Name = v
		return nil
	})
	for _, f := range []struct{ name, action, help string }{
		{"leave", bridge.ChatParticipantLeft, "--by leaves the group"},
		{"photo", bridge.ChatPhotoChanged, "--by changes the group's photo"},
		{"remove-photo", bridge.ChatPhotoRemoved, "--by removes the group's photo"},
	} {
		fs.BoolFunc(f.name, f.help, func(v string) error {
			on, err := strconv.ParseBool(v)
			if on {
				change(f.name, f.action)
			}
			return err
		})
	}
	if err := parseNoArgs(fs, args); err != nil {
		return req, err
	}
	switch {
	case req.Line == "" || req.Chat == "" || req.By == "":
		return req, fmt.Errorf("%w: sim group needs --line, --chat and --by", errUsage)
	case len(given) == 0:
		return req, fmt.Errorf("%w: sim group needs a change: --add, --remove, --leave, --rename, --photo or --remove-photo", errUsage)
	case len(given) > 1:
		return req, fmt.Errorf("%w: sim group makes one change at a time, not %s", errUsage, strings.Join(given, " and "))
	}
	return req, nil
}

func cmdWebhooks(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: webhooks needs list, deliveries or redeliver", errUsage)
	}
	fs := flag.NewFlagSet("webhooks "+args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	switch args[0] {
	case "list":
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		var hooks struct{ Data []server.WebhookInfo }
		if err := adminGet(ctx, *cfgPath, "/webhooks", &hooks); err != nil {
			return err
		}
		for _, h := range hooks.Data {
			state := "active"
			if !h.IsActive {
				state = "inactive"
			} else if h.FailingSince > 0 {
				state = "failing since " + time.UnixMilli(h.FailingSince).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\n", h.ID, h.Line, state, strings.Join(h.Events, ","), h.URL)
		}
	case "deliveries":
		webhookID := fs.String("webhook", "", "only this webhook's attempts")
		deliveryID := fs.String("delivery", "", "only this delivery's attempts")
		limit := fs.Int("limit", 50, "how many attempts, newest first")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		q := url.Values{"limit": {fmt.Sprint(*limit)}}
		for name, v := range map[string]string{"webhook": *webhookID, "delivery": *deliveryID} {
			if v != "" {
				q.Set(name, v)
			}
		}
		var attempts struct{ Data []storage.Attempt }
		if err := adminGet(ctx, *cfgPath, "/webhooks/attempts?"+q.Encode(), &attempts); err != nil {
			return err
		}
		for _, a := range attempts.Data {
			status, outcome := "-", "ok"
			if a.StatusCode != 0 {
				status = fmt.Sprint(a.StatusCode)
			}
			if a.Error != "" {
				outcome = a.Error
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t#%d\t%s\t%dms\t%s\n", time.UnixMilli(a.At).UTC().Format("2006-01-02T15:04:05.000Z"),
				a.DeliveryID, a.WebhookID, a.Event, a.N, status, a.LatencyMs, outcome)
		}
	case "redeliver":
		id, err := adminPostID(ctx, fs, cfgPath, args[1:], "/webhooks/redeliver")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "queued %s again\n", id)
	default:
		return fmt.Errorf("%w: unknown webhooks command %q", errUsage, args[0])
	}
	return nil
}

func cmdSandbox(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	owner := fs.String("owner", "", "start (or show) this owner's activation")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *owner != "" {
		return adminPrint(ctx, *cfgPath, http.MethodPost, "/sandbox", map[string]string{"owner": *owner}, stdout)
	}
	return adminPrint(ctx, *cfgPath, http.MethodGet, "/sandbox", nil, stdout)
}

// adminPrint makes an admin request and prints the answer as indented JSON.
func adminPrint(ctx context.Context, cfgPath, method, path string, in any, w io.Writer) error {
	c, err := adminClient(cfgPath)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, method, path, in, &raw); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}
