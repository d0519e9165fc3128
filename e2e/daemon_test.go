// Package e2e is the end-to-end suite: real daemons (package daemon) on
// loopback port 0 over temporary data folders, driven through the HTTP API
// and the command line (package cli, in process), and benchmarks of the
// whole daemon. It has only test files.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// Handles of the test configuration (see daemontest.Config).
const (
	sandboxLine = daemontest.SandboxLine
	mainLine    = daemontest.MainLine
	smsLine     = daemontest.SMSLine
	plainLine   = daemontest.PlainLine // no advanced features
	alice       = daemontest.Alice
	bob         = daemontest.Bob
	carol       = daemontest.Carol
)

// testDaemon is a real daemon on a temporary data folder, listening on a
// loopback port of its own. Its fields stay open to the suite (a test may
// rewrite the configuration or move the data folder between stop and
// start); starting and stopping are daemontest's.
type testDaemon struct {
	t       testing.TB
	cfgPath string
	dataDir string
	d       *daemon.Daemon
	base    string
}

// testConfig is the configuration file of a test daemon; extra TOML is
// appended (so tests can add sections).
func testConfig(dataDir, extra string) string { return daemontest.Config(dataDir, extra) }

func startTestDaemon(t testing.TB, extra string) *testDaemon {
	t.Helper()
	td := newTestDaemon(t, extra)
	td.start()
	t.Cleanup(td.stop)
	return td
}

// newTestDaemon writes the test configuration, extra appended, in a
// temporary folder; the daemon is not started.
func newTestDaemon(t testing.TB, extra string) *testDaemon {
	t.Helper()
	td := &testDaemon{t: t}
	td.cfgPath, td.dataDir = daemontest.WriteConfig(t, extra)
	return td
}

// config loads the daemon's configuration file.
func (td *testDaemon) config() *config.Config {
	td.t.Helper()
	return daemontest.LoadConfig(td.t, td.cfgPath)
}

// keptLog is a debug-level logger whose output the test can read (and
// -v shows).
func keptLog() (*slog.Logger, *testkit.LogBuffer) {
	logs := &testkit.LogBuffer{}
	var out io.Writer = logs
	if testing.Verbose() {
		out = io.MultiWriter(logs, os.Stderr)
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
}

func (td *testDaemon) start() {
	td.t.Helper()
	td.d = daemontest.Run(td.t, td.cfgPath)
	td.base = daemontest.URL(td.d)
}

func (td *testDaemon) stop() {
	if td.d == nil {
		return
	}
	daemontest.Shutdown(td.t, td.d)
	td.d = nil
}

// cli runs a blueline command against this daemon's configuration.
func (td *testDaemon) cli(args ...string) (stdout, stderr string, code int) {
	td.t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Run(context.Background(), cli.Build{}, append(args, "--config", td.cfgPath), nil, &out, &errOut)
	return out.String(), errOut.String(), code
}

func (td *testDaemon) mustCLI(args ...string) string {
	td.t.Helper()
	out, errOut, code := td.cli(args...)
	if code != 0 {
		td.t.Fatalf("blueline %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// key creates an API key with the CLI; args are extra flags.
func (td *testDaemon) key(args ...string) string {
	td.t.Helper()
	out := td.mustCLI(append([]string{"keys", "create", "--label", "test"}, args...)...)
	return strings.TrimSpace(out)
}

// inbound makes a simulated contact text a line and returns the stored message.
func (td *testDaemon) inbound(line, from, text string, extra ...string) map[string]any {
	td.t.Helper()
	out := td.mustCLI(append([]string{"sim", "inbound", "--line", line, "--from", from, "--text", text}, extra...)...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		td.t.Fatalf("sim inbound printed %q: %v", out, err)
	}
	return m
}

// response is an API answer, as apitest gets it.
type response = apitest.Response

// api is the client of this daemon's API, through which every request goes.
func (td *testDaemon) api() apitest.Client { return apitest.Client{TB: td.t, Base: td.base} }

// call makes an API request: see apitest.Client.Call.
func (td *testDaemon) call(method, path, key string, body any, headers ...string) response {
	td.t.Helper()
	return td.api().Call(method, path, key, body, headers...)
}

// send posts a message, which must be created, and returns it.
func (td *testDaemon) send(key string, body map[string]any, headers ...string) map[string]any {
	td.t.Helper()
	return td.api().Send(key, body, headers...)
}

// waitOutbox polls an outbox item until it reaches a final state.
func (td *testDaemon) waitOutbox(key, id string) map[string]any {
	td.t.Helper()
	var item map[string]any
	testkit.Eventually(td.t, 10*time.Second, func() bool {
		r := td.call("GET", "/v1/outbox?id="+id, key, nil)
		item = r.Body
		return item["status"] == "sent" || item["status"] == "failed"
	})
	return item
}
