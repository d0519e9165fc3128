// Package e2e is the end-to-end suite: real daemons (package daemon) on
// loopback port 0 over temporary data folders, driven through the HTTP API
// and the command line (package cli, in process), and benchmarks of the
// whole daemon. It has only test files.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
)

// Handles of the test configuration.
const (
	sandboxLine = "+15550000000"
	mainLine    = "+15550000001"
	smsLine     = "+15550000002"
	plainLine   = "+15550000003" // no advanced features
	alice       = "+15551110001"
	bob         = "+15551110002"
	carol       = "+15551110003"
)

// testDaemon is a real daemon on a temporary data folder, listening on a
// loopback port of its own.
type testDaemon struct {
	t       testing.TB
	cfgPath string
	dataDir string
	d       *daemon.Daemon
	base    string
}

// testConfig is the configuration file of a test daemon; extra TOML is
// appended (so tests can add sections).
func testConfig(dataDir, extra string) string {
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
%s`, dataDir, sandboxLine, mainLine, smsLine, plainLine, extra)
}

func startTestDaemon(t testing.TB, extra string) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	td := &testDaemon{t: t, cfgPath: filepath.Join(dir, "blueline.toml"), dataDir: filepath.Join(dir, "data")}
	if err := os.WriteFile(td.cfgPath, []byte(testConfig(td.dataDir, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	td.start()
	t.Cleanup(td.stop)
	return td
}

func (td *testDaemon) start() {
	td.t.Helper()
	cfg, err := config.Load(td.cfgPath)
	if err != nil {
		td.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	td.d, err = daemon.Start(context.Background(), cfg, log)
	if err != nil {
		td.t.Fatal(err)
	}
	td.base = "http://" + td.d.Addr().String()
}

func (td *testDaemon) stop() {
	if td.d == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := td.d.Shutdown(ctx); err != nil {
		td.t.Errorf("shutdown: %v", err)
	}
	td.d = nil
}

// cli runs a blueline command against this daemon's configuration.
func (td *testDaemon) cli(args ...string) (stdout, stderr string, code int) {
	td.t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Run(context.Background(), cli.Build{}, append(args, "--config", td.cfgPath), &out, &errOut)
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

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// errCode is the error code of an error response, "" for any other.
func (r response) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (r response) errParam() string {
	e, _ := r.body["error"].(map[string]any)
	p, _ := e["param"].(string)
	return p
}

func (r response) data() []map[string]any {
	items, _ := r.body["data"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// call makes an API request. body may be nil, a string (sent raw) or a value
// sent as JSON.
func (td *testDaemon) call(method, path, key string, body any, headers ...string) response {
	td.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			td.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	// Encode "+" in the query as a careful client does.
	if p, q, ok := strings.Cut(path, "?"); ok {
		path = p + "?" + strings.ReplaceAll(q, "+", "%2B")
	}
	req, err := http.NewRequest(method, td.base+path, rd)
	if err != nil {
		td.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		td.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		td.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			td.t.Fatalf("%s %s: body is not a JSON object: %q", method, path, raw)
		}
	}
	return r
}

// send posts a message and returns the response, which must be 201.
func (td *testDaemon) send(key string, body map[string]any, headers ...string) map[string]any {
	td.t.Helper()
	r := td.call("POST", "/v1/messages", key, body, headers...)
	if r.status != 201 {
		td.t.Fatalf("POST /v1/messages %v: %d %s", body, r.status, r.raw)
	}
	return r.body
}

// waitOutbox polls an outbox item until it reaches a final state.
func (td *testDaemon) waitOutbox(key, id string) map[string]any {
	td.t.Helper()
	var item map[string]any
	eventually(td.t, 10*time.Second, func() bool {
		r := td.call("GET", "/v1/outbox?id="+id, key, nil)
		item = r.body
		return item["status"] == "sent" || item["status"] == "failed"
	})
	return item
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
