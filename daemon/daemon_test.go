package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// The lines of the default configuration.
const (
	sandboxLine = "+15550000000"
	mainLine    = "+15550000001"
	alice       = "+15551110001"
)

// newConfig is the default configuration over a new temporary data
// folder, the API on a loopback port picked at start.
func newConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Storage.Dir = t.TempDir()
	cfg.Server.Listen = "127.0.0.1:0"
	return cfg
}

func newLog() (*slog.Logger, *testkit.LogBuffer) {
	logs := &testkit.LogBuffer{}
	return slog.New(slog.NewTextHandler(logs, nil)), logs
}

// stopped are the daemons a test shut down itself.
var stopped sync.Map

// start starts a daemon on cfg, shut down when the test ends unless the
// test shut it down itself (with shutdown).
func start(t *testing.T, cfg *config.Config, opts ...daemon.Option) *daemon.Daemon {
	t.Helper()
	log, _ := newLog()
	d, err := daemon.Start(context.Background(), cfg, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, done := stopped.Load(d); done {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return d
}

func shutdown(t *testing.T, d *daemon.Daemon) {
	t.Helper()
	stopped.Store(d, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", a.status, a.body, err)
	}
	return m
}

// errorCode is the code of an answer in the API's error shape.
func (a answer) errorCode(t *testing.T) string {
	t.Helper()
	e, _ := a.json(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func get(t *testing.T, d *daemon.Daemon, path, key string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+d.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// createKey makes an API key through the daemon's admin socket.
func createKey(t *testing.T, cfg *config.Config) api.KeyInfo {
	t.Helper()
	var info api.KeyInfo
	if err := adminsock.NewClient(cfg.DataDir()).Do(context.Background(), http.MethodPost, "/keys", api.KeyRequest{Label: "test", Scopes: "all"}, &info); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Secret, "sk_") {
		t.Fatalf("created key %+v", info)
	}
	return info
}

func TestHealth(t *testing.T) {
	cfg := newConfig(t)
	d := start(t, cfg)
	if a := get(t, d, "/healthz", ""); a.status != http.StatusOK || a.json(t)["status"] != "ok" {
		t.Errorf("GET /healthz: %d %s", a.status, a.body)
	}
	// Every job starts at once: the daemon is ready.
	var body struct {
		Status string `json:"status"`
		Checks map[string]struct {
			OK     bool   `json:"ok"`
			Reason string `json:"reason"`
		} `json:"checks"`
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		a := get(t, d, "/readyz", "")
		if err := json.Unmarshal(a.body, &body); err != nil {
			t.Fatalf("GET /readyz: %d %q", a.status, a.body)
		}
		return a.status == http.StatusOK
	})
	if body.Status != "ready" {
		t.Errorf("status = %q", body.Status)
	}
	want := []string{"storage", "delivery", "webhooks", "line " + sandboxLine, "line " + mainLine}
	if len(body.Checks) != len(want) {
		t.Errorf("checks = %+v, want %v", body.Checks, want)
	}
	for _, name := range want {
		if c, ok := body.Checks[name]; !ok || !c.OK || c.Reason != "" {
			t.Errorf("check %q = %+v (present %v)", name, c, ok)
		}
	}
}

func TestRouting(t *testing.T) {
	cfg := newConfig(t)
	d := start(t, cfg, daemon.WithVersion("v0.0.0-routing"))

	// The console, under /dashboard: its sign-in page for a stranger.
	a := get(t, d, "/dashboard", "")
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || !strings.Contains(strings.ToLower(string(a.body)), "<html") {
		t.Errorf("GET /dashboard: %d %s %.200s", a.status, a.header.Get("Content-Type"), a.body)
	}
	// Anything else is the API's, which answers unknown paths in its
	// error shape.
	a = get(t, d, "/nope", "")
	if a.status != http.StatusNotFound || a.errorCode(t) != "route_not_found" || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Errorf("GET /nope: %d %s", a.status, a.body)
	}
	if a.header.Get("X-Request-Id") == "" {
		t.Errorf("no request ID on %s", a.body)
	}
	// MCP needs a key.
	a = get(t, d, "/mcp", "")
	if a.status != http.StatusUnauthorized || a.errorCode(t) == "" || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("GET /mcp without a key: %d %s %v", a.status, a.body, a.header)
	}
	a = get(t, d, "/mcp", "sk_live_notakey")
	if a.status != http.StatusUnauthorized || !strings.Contains(a.header.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("GET /mcp with a wrong key: %d %s", a.status, a.body)
	}
	// The API, with a key made on the admin socket.
	a = get(t, d, "/v1/lines", "")
	if a.status != http.StatusUnauthorized {
		t.Errorf("GET /v1/lines without a key: %d %s", a.status, a.body)
	}
	key := createKey(t, cfg)
	a = get(t, d, "/v1/lines", key.Secret)
	if a.status != http.StatusOK {
		t.Fatalf("GET /v1/lines: %d %s", a.status, a.body)
	}
	var lines api.List[api.Line]
	if err := json.Unmarshal(a.body, &lines); err != nil {
		t.Fatal(err)
	}
	handles := map[string]bool{}
	for _, l := range lines.Data {
		handles[l.Handle] = true
	}
	if len(lines.Data) != 2 || !handles[sandboxLine] || !handles[mainLine] {
		t.Errorf("lines = %+v", lines.Data)
	}
	// The key works for MCP too: what answers is MCP, not the key check.
	a = get(t, d, "/mcp", key.Secret)
	if a.status == http.StatusUnauthorized || a.status == http.StatusNotFound {
		t.Errorf("GET /mcp with a key: %d %s", a.status, a.body)
	}
}

func TestDashboardOff(t *testing.T) {
	cfg := newConfig(t)
	off := false
	cfg.Dashboard.Enabled = &off
	d := start(t, cfg)
	for _, path := range []string{"/dashboard", "/dashboard/login"} {
		if a := get(t, d, path, ""); a.status != http.StatusNotFound || a.errorCode(t) != "route_not_found" {
			t.Errorf("GET %s with the console off: %d %s", path, a.status, a.body)
		}
	}
	// The admin socket has no dashboard commands then.
	err := adminsock.NewClient(cfg.DataDir()).Do(context.Background(), http.MethodPost, "/dashboard/link", map[string]string{}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "dashboard_disabled" {
		t.Errorf("dashboard link with the console off: %v", err)
	}
}

func TestAdminSocket(t *testing.T) {
	cfg := newConfig(t)
	d := start(t, cfg)
	admin := adminsock.NewClient(cfg.DataDir())
	ctx := context.Background()
	var keys api.List[api.KeyInfo]
	if err := admin.Do(ctx, http.MethodGet, "/keys", nil, &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys.Data) != 0 {
		t.Errorf("keys of a new daemon: %+v", keys.Data)
	}
	if has, err := d.HasKeys(ctx); err != nil || has {
		t.Errorf("HasKeys = %v, %v", has, err)
	}
	key := createKey(t, cfg)
	if err := admin.Do(ctx, http.MethodGet, "/keys", nil, &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys.Data) != 1 || keys.Data[0].ID != key.ID || keys.Data[0].Secret != "" {
		t.Errorf("keys = %+v", keys.Data)
	}
	if has, err := d.HasKeys(ctx); err != nil || !has {
		t.Errorf("HasKeys after creating one = %v, %v", has, err)
	}
	// The simulated network's contacts write through the socket.
	var m api.Message
	if err := admin.Do(ctx, http.MethodPost, "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "hi"}, &m); err != nil {
		t.Fatal(err)
	}
	if m.Sender != alice || m.Text == nil || *m.Text != "hi" {
		t.Errorf("inbound message %+v", m)
	}
	// Unknown commands are refused in the API's error shape.
	err := admin.Do(ctx, http.MethodGet, "/nope", nil, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Code != "route_not_found" {
		t.Errorf("unknown admin route: %v", err)
	}
}

// What the daemon offers the end-to-end tests besides HTTP.
func TestAccessors(t *testing.T) {
	cfg := newConfig(t)
	d := start(t, cfg)
	ctx := context.Background()
	if lines := d.Lines(); len(lines) != 2 || lines[0].Handle != sandboxLine || !lines[0].IsSandbox || lines[1].Handle != mainLine || lines[1].ID == "" {
		t.Errorf("Lines() = %+v", d.Lines())
	}
	if d.Sim() == nil {
		t.Fatal("Sim() = nil")
	}
	text := "recorded"
	res, err := d.Record(ctx, bridge.Inbound{Line: mainLine, Service: "imessage", Chat: sim.OneToOne("imessage", alice), GUID: sim.NewGUID(),
		Sender: alice, Text: &text, SentAt: time.Now()})
	if err != nil || res.Message.ID == "" || res.Message.Sender != alice {
		t.Fatalf("Record: %+v, %v", res, err)
	}
	// The message is the API's.
	key := createKey(t, cfg)
	a := get(t, d, "/v1/messages?from="+mainLine+"&to="+alice, key.Secret)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), res.Message.ID) {
		t.Errorf("GET /v1/messages: %d %s", a.status, a.body)
	}
	// A contact typing shows until it stops.
	if err := adminsock.NewClient(cfg.DataDir()).Do(ctx, http.MethodPost, "/sim/typing", api.SimTyping{Line: mainLine, From: alice, State: "on"}, nil); err != nil {
		t.Fatal(err)
	}
	if ind := d.TypingIndicators(res.Message.ChatID, time.Now()); len(ind) != 1 || ind[0].Handle != alice {
		t.Errorf("TypingIndicators = %+v", ind)
	}
	// Signed file URLs point at the API.
	if u := d.FileURL("file_x", time.Now()); !strings.HasPrefix(u, "http://"+d.Addr().String()+"/") || !strings.Contains(u, "file_x") {
		t.Errorf("FileURL = %q", u)
	}
	// A sim line keeps no chat.db cursor; an unknown line has none.
	if pos, saved, err := d.BridgeCursor(ctx, mainLine); err != nil || saved || pos != 0 {
		t.Errorf("BridgeCursor(main) = %d, %v, %v", pos, saved, err)
	}
	if _, _, err := d.BridgeCursor(ctx, "+15559999999"); err == nil || !strings.Contains(err.Error(), "no line") {
		t.Errorf("BridgeCursor(unknown) error = %v", err)
	}
}

// Shutdown stops the listeners and closes the database: another daemon
// starts on the same folder, with what the first stored.
func TestShutdownAndRestart(t *testing.T) {
	cfg := newConfig(t)
	d := start(t, cfg)
	addr := d.Addr().String()
	key := createKey(t, cfg)
	shutdown(t, d)

	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the API still accepts connections on %s", addr)
	}
	ctx := context.Background()
	if err := adminsock.NewClient(cfg.DataDir()).Do(ctx, http.MethodGet, "/keys", nil, nil); err == nil {
		t.Errorf("the admin socket still answers")
	}

	again := start(t, cfg)
	if has, err := again.HasKeys(ctx); err != nil || !has {
		t.Errorf("HasKeys after a restart = %v, %v", has, err)
	}
	if a := get(t, again, "/v1/lines", key.Secret); a.status != http.StatusOK {
		t.Errorf("the first daemon's key after a restart: %d %s", a.status, a.body)
	}
	shutdown(t, again)
	// The database is closed: it opens right away.
	db, err := storage.Open(cfg.DataDir())
	if err != nil {
		t.Fatalf("the database after shutdown: %v", err)
	}
	db.Close()
}

// Run serves until its context ends, then shuts down.
func TestRun(t *testing.T) {
	cfg := newConfig(t)
	log, logs := newLog()
	d, err := daemon.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	if a := get(t, d, "/healthz", ""); a.status != http.StatusOK {
		t.Errorf("GET /healthz while running: %d", a.status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(daemon.ShutdownTimeout + 5*time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("shutdown not logged: %s", logs.String())
	}
	db, err := storage.Open(cfg.DataDir())
	if err != nil {
		t.Fatalf("the database after Run: %v", err)
	}
	db.Close()
}

// freePort is a loopback address nothing listens on, just now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// reopens checks that a failed start left the database closed.
func reopens(t *testing.T, cfg *config.Config) {
	t.Helper()
	start := time.Now()
	db, err := storage.Open(cfg.DataDir())
	if err != nil {
		t.Fatalf("the database after a failed start: %v", err)
	}
	db.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("opening the database took %s: it waited for a lock", took)
	}
}

// A start that fails at the API's port releases what it opened.
func TestStartPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := newConfig(t)
	cfg.Server.Listen = taken.Addr().String()
	log, _ := newLog()
	d, err := daemon.Start(context.Background(), cfg, log)
	if err == nil {
		d.Shutdown(context.Background())
		t.Fatal("Start on a port taken succeeded")
	}
	if !strings.Contains(err.Error(), "[server] listen") || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("error %q does not name the setting and address", err)
	}
	reopens(t, cfg)
	// The folder serves a daemon at once.
	cfg.Server.Listen = "127.0.0.1:0"
	start(t, cfg)
}

// A start that fails last, at the admin socket (another daemon serves
// it), releases the API's port and the database.
func TestStartAdminSocketTaken(t *testing.T) {
	cfg := newConfig(t)
	sock, err := net.Listen("unix", filepath.Join(cfg.DataDir(), "admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cfg.Server.Listen = addr
	log, _ := newLog()
	d, err := daemon.Start(context.Background(), cfg, log)
	if err == nil {
		d.Shutdown(context.Background())
		t.Fatal("Start with the admin socket taken succeeded")
	}
	if !strings.Contains(err.Error(), "already serving") {
		t.Errorf("error = %v", err)
	}
	reopens(t, cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("the API's port %s is still bound: %v", addr, err)
	} else {
		ln.Close()
	}
	sock.Close()
	os.Remove(filepath.Join(cfg.DataDir(), "admin.sock"))
	cfg.Server.Listen = "127.0.0.1:0"
	start(t, cfg)
}

// A start that fails on the configuration of a part (the webhooks' CA
// file, the messages bridge off a Mac) releases what it opened.
func TestStartBadParts(t *testing.T) {
	t.Run("webhook CA", func(t *testing.T) {
		cfg := newConfig(t)
		cfg.Webhooks.CAFile = filepath.Join(t.TempDir(), "missing.pem")
		log, _ := newLog()
		if d, err := daemon.Start(context.Background(), cfg, log); err == nil {
			d.Shutdown(context.Background())
			t.Fatal("Start with a missing CA file succeeded")
		} else if !strings.Contains(err.Error(), "ca_file") {
			t.Errorf("error = %v", err)
		}
		reopens(t, cfg)
	})
	t.Run("messages bridge", func(t *testing.T) {
		if runtime.GOOS == "darwin" {
			t.Skip("on a Mac the messages bridge may start")
		}
		cfg := newConfig(t)
		watch, watchdog := true, true
		cfg.Lines = append(cfg.Lines, config.Line{Handle: "+15550000009", Bridge: "messages", Service: "imessage",
			ChatDB: config.DefaultChatDB, Osascript: config.DefaultOsascript, Watch: &watch, Watchdog: &watchdog})
		log, _ := newLog()
		if d, err := daemon.Start(context.Background(), cfg, log); err == nil {
			d.Shutdown(context.Background())
			t.Fatal("Start with a messages line off a Mac succeeded")
		} else if !strings.Contains(err.Error(), "needs macOS") || !strings.Contains(err.Error(), "+15550000009") {
			t.Errorf("error = %v", err)
		}
		reopens(t, cfg)
	})
}
