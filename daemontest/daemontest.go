// Package daemontest starts real daemons for tests: daemon.Start on the
// simulated network, over a configuration file written to t.TempDir(),
// listening on a loopback port of its own, stopped when the test ends.
//
// It exists because the tests of several packages (client, mcpserver,
// apidoc, console and the end-to-end suite) each need a whole daemon, and
// each used to carry its own copy of the same harness. Only tests import
// it; package daemon's own dependencies (bridge/messages among them) must
// not, or the import would go round in a circle.
package daemontest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
)

// Handles of the test configuration: its lines, and contacts on the
// simulated network.
const (
	SandboxLine = "+15550000000" // the sandbox, 5 sends a day
	MainLine    = "+15550000001" // "Main line", advanced features
	SMSLine     = "+15550000002" // "SMS line", service sms
	PlainLine   = "+15550000003" // no label, no advanced features
	Alice       = "+15551110001"
	Bob         = "+15551110002"
	Carol       = "+15551110003"
)

// Config is the text of a test configuration file over dataDir: a loopback
// port picked at start, the sandbox and the lines above on the simulated
// network, and delivery retries in milliseconds. extra TOML is appended,
// so tests can add sections (not repeat these).
func Config(dataDir, extra string) string {
	return fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"

[storage]
dir = %q

[sandbox]
handle = %q
daily_quota = 5

[[lines]]
handle = %q
label = "Main line"
advanced_features = true

[[lines]]
handle = %q
label = "SMS line"
service = "sms"

[[lines]]
handle = %q

[delivery]
max_attempts = 3
retry_base = "5ms"
retry_max = "20ms"
%s`, dataDir, SandboxLine, MainLine, SMSLine, PlainLine, extra)
}

// WriteConfig writes Config, extra appended, as blueline.toml in a new
// temporary folder, with the data folder "data" beside it.
func WriteConfig(t testing.TB, extra string) (cfgPath, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath, dataDir = filepath.Join(dir, "blueline.toml"), filepath.Join(dir, "data")
	if err := os.WriteFile(cfgPath, []byte(Config(dataDir, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, dataDir
}

// LoadConfig loads the configuration file at path.
func LoadConfig(t testing.TB, path string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Log is the logger of test daemons: silent, or to standard error at debug
// level with -v.
func Log() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Run starts a daemon on the configuration file at cfgPath; the caller
// stops it (see Shutdown).
func Run(t testing.TB, cfgPath string) *daemon.Daemon {
	t.Helper()
	d, err := daemon.Start(context.Background(), LoadConfig(t, cfgPath), Log())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Shutdown stops d, failing the test when something (a request that never
// ends) keeps it from finishing within ten seconds.
func Shutdown(t testing.TB, d *daemon.Daemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// URL is the base URL of d's API.
func URL(d *daemon.Daemon) string { return "http://" + d.Addr().String() }

// Daemon is a test daemon: its configuration file, its data folder, and
// the daemon while it runs.
type Daemon struct {
	t       testing.TB
	cfgPath string
	dataDir string
	d       *daemon.Daemon
	url     string
	admin   *adminsock.Client
}

// New writes the test configuration, extra appended, in a temporary
// folder; the daemon is not started (see Start). It is stopped when the
// test ends.
func New(t testing.TB, extra string) *Daemon {
	t.Helper()
	td := &Daemon{t: t}
	td.cfgPath, td.dataDir = WriteConfig(t, extra)
	td.admin = adminsock.NewClient(td.dataDir)
	t.Cleanup(td.Stop)
	return td
}

// Start writes the test configuration, extra appended, and starts the
// daemon until the test ends.
func Start(t testing.TB, extra string) *Daemon {
	t.Helper()
	td := New(t, extra)
	td.Start()
	return td
}

// Start starts the daemon (again, after Stop: on the same data folder, on
// another port).
func (td *Daemon) Start() {
	td.t.Helper()
	if td.d != nil {
		td.t.Fatal("daemontest: the daemon is already running")
	}
	td.d = Run(td.t, td.cfgPath)
	td.url = URL(td.d)
}

// Stop shuts the daemon down, if it runs (see Shutdown).
func (td *Daemon) Stop() {
	if td.d == nil {
		return
	}
	Shutdown(td.t, td.d)
	td.d = nil
}

// T is the test the daemon belongs to.
func (td *Daemon) T() testing.TB { return td.t }

// Daemon is the running daemon; nil when stopped.
func (td *Daemon) Daemon() *daemon.Daemon { return td.d }

// URL is the base URL of the daemon's API, as it last started.
func (td *Daemon) URL() string { return td.url }

// ConfigPath is the path of the configuration file.
func (td *Daemon) ConfigPath() string { return td.cfgPath }

// DataDir is the daemon's data folder.
func (td *Daemon) DataDir() string { return td.dataDir }

// Admin is a client of the daemon's admin socket, as the host's operator.
func (td *Daemon) Admin() *adminsock.Client { return td.admin }

// Key creates an API key through the admin socket and returns its secret:
// scopes "" is all, label "" is "test", lines none is every line.
func (td *Daemon) Key(req api.KeyRequest) string {
	td.t.Helper()
	if req.Scopes == "" {
		req.Scopes = "all"
	}
	if req.Label == "" {
		req.Label = "test"
	}
	var info api.KeyInfo
	if err := td.admin.Do(context.Background(), http.MethodPost, "/keys", req, &info); err != nil {
		td.t.Fatal(err)
	}
	return info.Secret
}

// Inbound has a simulated contact text a line, through the admin socket,
// and returns the stored message.
func (td *Daemon) Inbound(line, from, text string) api.Message {
	td.t.Helper()
	var m api.Message
	if err := td.admin.Do(context.Background(), http.MethodPost, "/sim/inbound", api.SimInbound{Line: line, From: from, Text: text}, &m); err != nil {
		td.t.Fatal(err)
	}
	return m
}
