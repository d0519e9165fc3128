package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Storage.Dir = t.TempDir()
	cfg.Server.Listen = "127.0.0.1:0"
	return cfg
}

func testLog() (*slog.Logger, *testkit.LogBuffer) {
	logs := &testkit.LogBuffer{}
	return slog.New(slog.NewTextHandler(logs, nil)), logs
}

// allUp reports whether every job of js runs.
func allUp(js *jobs) bool {
	for _, j := range js.all {
		if !j.up.Load() {
			return false
		}
	}
	return true
}

// The daemon's table of jobs, and its readiness while they run and once
// they stopped.
func TestJobsTable(t *testing.T) {
	log, _ := testLog()
	d, err := Start(context.Background(), testConfig(t), log)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range d.jobs.all {
		names = append(names, j.name)
	}
	want := []string{"delivery worker", "search index", "webhook dispatcher", "bridge", "purge events", "purge webhook deliveries",
		"purge idempotency keys", "purge expired dashboard sign-ins", "purge ended takeovers and chat leases", "purge expired drafts"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("jobs = %q, want %q (the sim network is one bridge for both lines)", names, want)
	}
	for _, j := range d.jobs.all {
		switch j.name {
		case "delivery worker":
			if j.ready != "delivery" || j.reason == "" || j.bridge != nil {
				t.Errorf("%s: ready %q reason %q", j.name, j.ready, j.reason)
			}
		case "webhook dispatcher":
			if j.ready != "webhooks" || j.reason == "" {
				t.Errorf("%s: ready %q reason %q", j.name, j.ready, j.reason)
			}
		case "bridge":
			if j.bridge != d.sim || j.ready != "" {
				t.Errorf("the bridge job reads %v, ready %q", j.bridge, j.ready)
			}
		default:
			if j.ready != "" || j.bridge != nil {
				t.Errorf("%s is a readiness check", j.name)
			}
		}
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return allUp(d.jobs) })
	checks := d.checks(context.Background())
	wantChecks := []string{"delivery", "webhooks", "line +15550000000", "line +15550000001"}
	if len(checks) != len(wantChecks) {
		t.Fatalf("checks = %+v", checks)
	}
	for i, c := range checks {
		if c.Name != wantChecks[i] || !c.OK {
			t.Errorf("check %d = %+v, want %s ok", i, c, wantChecks[i])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Stopped: every check fails, with its reason.
	for _, c := range d.checks(context.Background()) {
		if c.OK || c.Reason == "" {
			t.Errorf("check after shutdown: %+v", c)
		}
		if strings.HasPrefix(c.Name, "line ") && !strings.Contains(c.Reason, "sim bridge stopped") {
			t.Errorf("line check reason %q", c.Reason)
		}
	}
}

// A job that stops on its own is logged, and its check (or its line's)
// fails while the others still pass.
func TestJobStops(t *testing.T) {
	log, logs := testLog()
	network := sim.New(0)
	fail, bridgeFail := make(chan struct{}), make(chan struct{})
	js := &jobs{all: []*job{
		{name: "worker", ready: "work", reason: "the worker stopped", run: func(ctx context.Context) error {
			select {
			case <-fail:
				return errors.New("disk on fire")
			case <-ctx.Done():
				return nil
			}
		}},
		{name: "steady", ready: "steady", reason: "the steady job stopped", run: func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}},
		{name: "bridge", bridge: network, run: func(ctx context.Context) error {
			select {
			case <-bridgeFail:
				return errors.New("network gone")
			case <-ctx.Done():
				return nil
			}
		}},
	}}
	d := &Daemon{log: log, jobs: js, bridges: map[string]bridge.Bridge{"ln_1": network},
		lines: []storage.Line{{ID: "ln_1", Handle: "+15550000001", Bridge: "sim"}}}
	byName := func() map[string]api.Check {
		out := map[string]api.Check{}
		for _, c := range d.checks(context.Background()) {
			out[c.Name] = c
		}
		return out
	}
	js.start(context.Background(), log)
	testkit.Eventually(t, 5*time.Second, func() bool { return allUp(js) })
	if c := byName(); !c["work"].OK || !c["steady"].OK || !c["line +15550000001"].OK || len(c) != 3 {
		t.Fatalf("checks while running: %+v", c)
	}

	close(fail)
	testkit.Eventually(t, 5*time.Second, func() bool { return !js.all[0].up.Load() })
	c := byName()
	if c["work"].OK || c["work"].Reason != "the worker stopped" || !c["steady"].OK || !c["line +15550000001"].OK {
		t.Errorf("checks after the worker stopped: %+v", c)
	}
	if !strings.Contains(logs.String(), "worker stopped") || !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("the worker's end is not logged: %s", logs.String())
	}

	close(bridgeFail)
	testkit.Eventually(t, 5*time.Second, func() bool { return !js.all[2].up.Load() })
	if c := byName()["line +15550000001"]; c.OK || !strings.Contains(c.Reason, "sim bridge stopped") {
		t.Errorf("line check after its bridge stopped: %+v", c)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js.stop(ctx, log)
	if js.all[1].up.Load() {
		t.Errorf("the steady job still runs after stop")
	}
	select {
	case <-js.finished:
	default:
		t.Errorf("stop returned before the jobs finished")
	}
	if strings.Contains(logs.String(), "did not stop in time") {
		t.Errorf("jobs that stopped are reported late")
	}
}

// stop waits no longer than its context for a job that does not stop.
func TestJobsStopTimeout(t *testing.T) {
	log, logs := testLog()
	release := make(chan struct{})
	var ended atomic.Bool
	js := &jobs{all: []*job{{name: "stubborn", run: func(context.Context) error {
		<-release
		ended.Store(true)
		return nil
	}}}}
	js.start(context.Background(), log)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	js.stop(ctx, log)
	if ended.Load() {
		t.Fatal("the stubborn job ended before it was released")
	}
	if !strings.Contains(logs.String(), "did not stop in time") {
		t.Errorf("the late stop is not logged: %s", logs.String())
	}
	close(release)
	select {
	case <-js.finished:
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not finish once released")
	}
	if js.all[0].up.Load() {
		t.Errorf("a finished job is up")
	}
}

// The start's context bounds the start only: the jobs outlive it.
func TestJobsOutliveStartContext(t *testing.T) {
	log, _ := testLog()
	started := make(chan context.Context, 1)
	js := &jobs{all: []*job{{name: "long", ready: "long", run: func(ctx context.Context) error {
		started <- ctx
		<-ctx.Done()
		return nil
	}}}}
	ctx, cancel := context.WithCancel(context.Background())
	js.start(ctx, log)
	var jobCtx context.Context
	select {
	case jobCtx = <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not start")
	}
	cancel()
	if err := jobCtx.Err(); err != nil {
		t.Fatalf("the job's context ended with the start's: %v", err)
	}
	if !js.all[0].up.Load() {
		t.Errorf("the job is down after the start's context ended")
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopCancel()
	js.stop(stopCtx, log)
	if jobCtx.Err() == nil {
		t.Errorf("the job's context did not end with stop")
	}
	if js.all[0].up.Load() {
		t.Errorf("the job is up after stop")
	}
}

func TestGuardPolicies(t *testing.T) {
	cfg := testConfig(t)
	on, off := true, false
	cfg.Lines = []config.Line{
		{Handle: "+15550000001", Bridge: "sim", Service: "imessage", Guard: &on},
		{Handle: "+15550000002", Bridge: "sim", Service: "imessage"},
		{Handle: "+15550000003", Bridge: "messages", Service: "imessage"},
		{Handle: "+15550000004", Bridge: "messages", Service: "imessage", Guard: &off},
	}
	cfg.Guard.Pace = config.Duration{Duration: 3 * time.Second}
	cfg.Guard.MaxUnanswered = 7
	lines := []storage.Line{
		{ID: "ln_sandbox", Handle: cfg.Sandbox.Handle, IsSandbox: true, Bridge: "sim"},
		{ID: "ln_1", Handle: "+15550000001", Bridge: "sim"},
		{ID: "ln_2", Handle: "+15550000002", Bridge: "sim"},
		{ID: "ln_3", Handle: "+15550000003", Bridge: "messages"},
		{ID: "ln_4", Handle: "+15550000004", Bridge: "messages"},
	}
	set := guardPolicies(cfg, lines)
	for id, want := range map[string]bool{"ln_sandbox": false, "ln_1": true, "ln_2": false, "ln_3": true, "ln_4": false} {
		p := set.policy(storage.Line{ID: id})
		if p.Enabled != want {
			t.Errorf("%s: guard enabled = %v, want %v", id, p.Enabled, want)
		}
		if p.Pace != 3*time.Second || p.MaxUnanswered != 7 {
			t.Errorf("%s: policy %+v does not carry [guard]", id, p)
		}
	}
	if p := set.policy(storage.Line{ID: "ln_other"}); p.Enabled || p.Pace != 0 {
		t.Errorf("a line the daemon does not serve has a guard: %+v", p)
	}
	pace := set.pace()
	if len(pace) != 2 || pace["ln_1"] != 3*time.Second || pace["ln_3"] != 3*time.Second {
		t.Errorf("pace = %v, want the two guarded lines", pace)
	}
	cfg.Guard.Pace = config.Duration{}
	if pace := guardPolicies(cfg, lines).pace(); len(pace) != 0 {
		t.Errorf("pace without pacing = %v", pace)
	}
}

func TestClientError(t *testing.T) {
	err := clientError(httpapi.TooManyRequests("rate_limit_exceeded", 42, "Slow down."))
	ce, ok := err.(*client.Error)
	if !ok {
		t.Fatalf("clientError = %T %v", err, err)
	}
	if ce.Status != 429 || ce.Type != "rate_limit_error" || ce.Code != "rate_limit_exceeded" || ce.Message != "Slow down." || ce.RetryAfter != 42*time.Second {
		t.Errorf("client error %+v", ce)
	}
	ce, _ = clientError(httpapi.Missing("to")).(*client.Error)
	if ce == nil || ce.Param != "to" || ce.RetryAfter != 0 {
		t.Errorf("client error of a 400: %+v", ce)
	}
	other := errors.New("plain")
	if got := clientError(other); got != other {
		t.Errorf("clientError(plain) = %v", got)
	}
	if clientError(nil) != nil {
		t.Errorf("clientError(nil) is not nil")
	}
}

func TestConfiguredLines(t *testing.T) {
	cfg := testConfig(t)
	lines := configuredLines(cfg)
	if len(lines) != 2 {
		t.Fatalf("lines = %+v", lines)
	}
	if l := lines[0]; l.Handle != cfg.Sandbox.Handle || !l.IsSandbox || l.Bridge != "sim" || l.Service != "imessage" {
		t.Errorf("sandbox line %+v", l)
	}
	if l := lines[1]; l.Handle != "+15550000001" || l.IsSandbox || l.Label != "Main line" || !l.AdvancedFeatures {
		t.Errorf("main line %+v", l)
	}
	cfg.Sandbox.Handle = ""
	if lines := configuredLines(cfg); len(lines) != 1 || lines[0].IsSandbox {
		t.Errorf("lines without a sandbox = %+v", lines)
	}
}

// The bridge helpers on the simulated network, which reports no health of
// its own.
func TestBridgeHelpers(t *testing.T) {
	network := sim.New(0)
	bridges := map[string]bridge.Bridge{"ln_1": network, "ln_2": network}
	if got := distinct(bridges); len(got) != 1 || got[0] != network {
		t.Errorf("distinct = %v", got)
	}
	plain, adv := storage.Line{ID: "ln_1", Handle: "+15550000001"}, storage.Line{ID: "ln_2", Handle: "+15550000002", AdvancedFeatures: true}
	if advanced(bridges)(plain) || !advanced(bridges)(adv) {
		t.Errorf("advanced does not follow the configuration on the sim network")
	}
	if c := capabilities(bridges)(plain); c != nil {
		t.Errorf("capabilities = %v", c)
	}
	if h := lineHealth(bridges)(plain); h != nil {
		t.Errorf("lineHealth = %+v", h)
	}
	ask := availability(bridges)
	ctx := context.Background()
	network.SetAvailability("+15551110001", false)
	if on, err := ask(ctx, plain, "+15551110001"); err != nil || on {
		t.Errorf("availability = %v, %v", on, err)
	}
	if on, err := ask(ctx, plain, "+15551110002"); err != nil || !on {
		t.Errorf("availability by default = %v, %v", on, err)
	}
	if _, err := ask(ctx, storage.Line{ID: "ln_9", Handle: "+15550000009"}, "+15551110001"); err == nil || !strings.Contains(err.Error(), "cannot check availability") {
		t.Errorf("availability on a line without a bridge: %v", err)
	}
	d := &Daemon{bridges: bridges, lines: []storage.Line{plain, adv}}
	if counts := d.lineCounts(); len(counts) != 0 {
		t.Errorf("lineCounts = %+v", counts)
	}
	closeBridges(bridges) // the sim network holds nothing open
	closeBridges(nil)

	yes, no := true, false
	lc := config.Line{Watchdog: &yes, PingEvery: config.Duration{Duration: time.Minute}}
	if got := pingEvery(lc); got != time.Minute {
		t.Errorf("pingEvery = %s", got)
	}
	lc.Watchdog = &no
	if got := pingEvery(lc); got >= 0 {
		t.Errorf("pingEvery with the watchdog off = %s", got)
	}
}

func TestLineCursor(t *testing.T) {
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000009", Service: "imessage", Bridge: "messages"}})
	if err != nil {
		t.Fatal(err)
	}
	c := lineCursor{db, lines[0].ID}
	if pos, ok, err := c.Load(ctx); err != nil || ok || pos != 0 {
		t.Errorf("Load before a save = %d, %v, %v", pos, ok, err)
	}
	if err := c.Save(ctx, 1234); err != nil {
		t.Fatal(err)
	}
	if pos, ok, err := c.Load(ctx); err != nil || !ok || pos != 1234 {
		t.Errorf("Load after a save = %d, %v, %v", pos, ok, err)
	}
	if pos, ok, err := db.BridgeCursor(ctx, lines[0].ID); err != nil || !ok || pos != 1234 {
		t.Errorf("stored cursor = %d, %v, %v", pos, ok, err)
	}
}

func TestWebhookOptions(t *testing.T) {
	cfg := testConfig(t)
	cfg.Webhooks.AllowHTTP = true
	cfg.Webhooks.Concurrency = 3
	opts, err := webhookOptions(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Policy.AllowHTTP || opts.Policy.AllowPrivateNetworks != cfg.Webhooks.AllowPrivateNetworks || opts.Lanes != 3 ||
		opts.Timeout != cfg.Webhooks.Timeout.Duration || len(opts.Schedule) == 0 || opts.RootCAs != nil {
		t.Errorf("webhook options %+v", opts)
	}
	cfg.Webhooks.CAFile = "/nonexistent/ca.pem"
	if _, err := webhookOptions(cfg, nil); err == nil {
		t.Errorf("a missing CA file is accepted")
	}
}

// The public base URL is built from the address bound, unless set.
func TestPublicBaseURL(t *testing.T) {
	cfg := testConfig(t)
	log, _ := testLog()
	l, err := listenAPI(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, want := l.publicBaseURL(cfg), "http://"+l.Addr().String(); got != want {
		t.Errorf("publicBaseURL = %q, want %q", got, want)
	}
	if cfg.Server.Listen != "127.0.0.1:0" {
		t.Errorf("publicBaseURL changed the configuration: %q", cfg.Server.Listen)
	}
	cfg.Server.PublicURL = "https://blueline.example"
	if got := l.publicBaseURL(cfg); got != "https://blueline.example" {
		t.Errorf("publicBaseURL with public_url = %q", got)
	}
}
