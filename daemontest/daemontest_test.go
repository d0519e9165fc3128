package daemontest_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

func TestWriteConfig(t *testing.T) {
	cfgPath, dataDir := daemontest.WriteConfig(t, "[limits]\nrequests_per_hour = 7\n")
	if filepath.Base(cfgPath) != "blueline.toml" || filepath.Dir(dataDir) != filepath.Dir(cfgPath) || filepath.Base(dataDir) != "data" {
		t.Errorf("config %s, data %s: want blueline.toml and data side by side", cfgPath, dataDir)
	}
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(text) != daemontest.Config(dataDir, "[limits]\nrequests_per_hour = 7\n") {
		t.Errorf("the file is not Config's text:\n%s", text)
	}
	cfg := daemontest.LoadConfig(t, cfgPath)
	var handles []string
	for _, l := range cfg.Lines {
		handles = append(handles, l.Handle)
	}
	for _, want := range []string{daemontest.MainLine, daemontest.SMSLine, daemontest.PlainLine} {
		if !strings.Contains(strings.Join(handles, " "), want) {
			t.Errorf("lines %v lack %s", handles, want)
		}
	}
	if cfg.Limits.RequestsPerHour != 7 {
		t.Errorf("the extra section was not read: requests_per_hour %d", cfg.Limits.RequestsPerHour)
	}
	if cfg.Delivery.MaxAttempts != 3 {
		t.Errorf("delivery max_attempts %d, want 3", cfg.Delivery.MaxAttempts)
	}
	if daemontest.Log() == nil {
		t.Error("no logger")
	}

	// A configuration that does not load fails the test.
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("[server\n"), 0o600)
	rec := &testkit.Recorder{TB: t}
	if testkit.Run(func() { daemontest.LoadConfig(rec, bad) }) || rec.Fatals() != 1 {
		t.Errorf("LoadConfig of a broken file: failures %q", rec.Failures())
	}
}

// A daemon started through the package serves its API on loopback, takes
// keys and simulated messages through its admin socket, delivers webhooks,
// and starts again on the same data after Stop.
func TestDaemonLifecycle(t *testing.T) {
	rc := apitest.NewReceiver(t, true, nil)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Server.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	td := daemontest.New(t, fmt.Sprintf("[webhooks]\nallow_private_networks = true\nca_file = %q\n", ca))
	if td.Daemon() != nil || td.URL() != "" {
		t.Fatal("New started the daemon")
	}
	if td.T() != testing.TB(t) || td.Admin() == nil {
		t.Error("T() or Admin() is not the daemon's")
	}
	if _, err := os.Stat(td.ConfigPath()); err != nil {
		t.Fatal(err)
	}
	td.Start()
	if td.Daemon() == nil || !strings.HasPrefix(td.URL(), "http://127.0.0.1:") || td.URL() != daemontest.URL(td.Daemon()) {
		t.Fatalf("running daemon %v at %q", td.Daemon(), td.URL())
	}
	if fi, err := os.Stat(td.DataDir()); err != nil || !fi.IsDir() {
		t.Fatalf("data folder: %v", err)
	}

	c := apitest.Client{TB: t, Base: td.URL()}
	if r := c.Call("GET", "/healthz", "", nil); r.Status != 200 || r.Body["status"] != "ok" {
		t.Fatalf("/healthz: %d %s", r.Status, r.Raw)
	}
	key := td.Key(api.KeyRequest{})
	if !strings.HasPrefix(key, "sk_") {
		t.Fatalf("Key returned %q", key)
	}
	lines := c.Call("GET", "/v1/lines", key, nil)
	if lines.Status != 200 || len(lines.Data()) < 4 {
		t.Fatalf("/v1/lines: %d %s", lines.Status, lines.Raw)
	}
	narrow := td.Key(api.KeyRequest{Scopes: "messages:read", Label: "reader"})
	if r := c.Call("GET", "/v1/lines", narrow, nil); r.Status != http.StatusForbidden || r.ErrCode() != "insufficient_scope" {
		t.Errorf("a messages:read key listed lines: %d %s", r.Status, r.Raw)
	}

	hook := c.Call("POST", "/v1/webhooks", key, map[string]any{"from": daemontest.MainLine, "url": rc.Server.URL + "/h", "events": []string{"message.received"}})
	if hook.Status != http.StatusCreated {
		t.Fatalf("POST /v1/webhooks: %d %s", hook.Status, hook.Raw)
	}
	secret, _ := hook.Body["secret"].(string)
	rc.SetSecret(secret)
	rc.CheckEvents()

	m := td.Inbound(daemontest.MainLine, daemontest.Alice, "hello from Alice")
	if m.ID == "" || m.Text == nil || *m.Text != "hello from Alice" || m.IsFromMe || m.Sender != daemontest.Alice {
		t.Fatalf("Inbound returned %+v", m)
	}
	list := c.Call("GET", "/v1/messages?from="+daemontest.MainLine+"&to="+daemontest.Alice, key, nil)
	if d := list.Data(); list.Status != 200 || len(d) != 1 || d[0]["id"] != m.ID {
		t.Fatalf("GET /v1/messages: %d %s", list.Status, list.Raw)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rc.Requests()) > 0 })
	h := rc.Requests()[0]
	if h.Err != nil || h.Event() != "message.received" || h.Data()["id"] != m.ID {
		t.Errorf("delivery: %v, event %v, data %v", h.Err, h.Body["event"], h.Data())
	}

	firstURL := td.URL()
	td.Stop()
	if td.Daemon() != nil {
		t.Fatal("Stop left the daemon")
	}
	td.Stop() // a second Stop does nothing
	if _, err := http.Get(firstURL + "/healthz"); err == nil {
		t.Error("the stopped daemon still answers")
	}

	td.Start()
	c.Base = td.URL()
	list = c.Call("GET", "/v1/messages?from="+daemontest.MainLine+"&to="+daemontest.Alice, key, nil)
	if d := list.Data(); list.Status != 200 || len(d) != 1 || d[0]["id"] != m.ID {
		t.Errorf("after a restart: %d %s", list.Status, list.Raw)
	}
}

// Start of a running daemon, and admin requests the daemon refuses, fail
// the test.
func TestDaemonMisuseFails(t *testing.T) {
	rec := &testkit.Recorder{TB: t}
	var td *daemontest.Daemon
	if !testkit.Run(func() { td = daemontest.Start(rec, "") }) {
		t.Fatalf("Start: %q", rec.Failures())
	}
	if testkit.Run(func() { td.Start() }) {
		t.Error("a second Start returned")
	}
	if f := rec.Failures(); len(f) != 1 || !strings.Contains(f[0], "already running") {
		t.Errorf("failures %q", f)
	}
	if testkit.Run(func() { td.Inbound("+19999999999", daemontest.Alice, "to no line") }) {
		t.Error("Inbound on a line that does not exist returned")
	}
	if testkit.Run(func() { td.Key(api.KeyRequest{Scopes: "no-such-scope"}) }) {
		t.Error("Key with an unknown scope returned")
	}
	if n := len(rec.Failures()); n != 3 {
		t.Errorf("failures %q, want 3", rec.Failures())
	}
	if td.Daemon() == nil {
		t.Error("the daemon stopped")
	}
}

// A daemon that cannot start fails the test.
func TestRunFailure(t *testing.T) {
	cfgPath, dataDir := daemontest.WriteConfig(t, "")
	// The data folder is a file: the database cannot be opened in it.
	if err := os.WriteFile(dataDir, []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &testkit.Recorder{TB: t}
	if testkit.Run(func() { daemontest.Run(rec, cfgPath) }) {
		t.Fatal("Run returned a daemon over a data folder that is a file")
	}
	if rec.Fatals() != 1 {
		t.Errorf("failures %q", rec.Failures())
	}
}
