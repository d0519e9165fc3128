package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

func TestHealthAndReadiness(t *testing.T) {
	td := startTestDaemon(t, "")
	// No API key, and a refused one changes nothing: no auth on these.
	for _, key := range []string{"", "sk_live_wrong"} {
		r := td.call("GET", "/healthz", key, nil)
		if r.Status != 200 || string(r.Raw) != "{\"status\":\"ok\"}\n" {
			t.Fatalf("healthz (key %q): %d %s", key, r.Status, r.Raw)
		}
	}
	if r := td.call("HEAD", "/healthz", "", nil); r.Status != 200 || len(r.Raw) != 0 {
		t.Fatalf("HEAD healthz: %d %q", r.Status, r.Raw)
	}
	if r := td.call("HEAD", "/readyz", "", nil); r.Status != 200 || len(r.Raw) != 0 {
		t.Fatalf("HEAD readyz: %d %q", r.Status, r.Raw)
	}
	r := td.call("GET", "/readyz", "", nil)
	var body struct {
		Status string
		Checks map[string]map[string]any
	}
	if err := json.Unmarshal(r.Raw, &body); err != nil || r.Status != 200 || body.Status != "ready" {
		t.Fatalf("readyz: %d %s", r.Status, r.Raw)
	}
	want := []string{"storage", "delivery", "webhooks", "line " + sandboxLine, "line " + mainLine, "line " + smsLine, "line " + plainLine}
	for _, name := range want {
		if c := body.Checks[name]; c["ok"] != true || len(c) != 1 {
			t.Errorf("check %q: %v", name, c)
		}
	}
	if len(body.Checks) != len(want) {
		t.Errorf("checks: %s", r.Raw)
	}
	if r := td.call("POST", "/readyz", "", nil); r.Status != 405 {
		t.Errorf("POST /readyz: %d", r.Status)
	}
}

// scrape reads the daemon's metrics over its admin socket, as
// `curl --unix-socket …/admin.sock http://blueline/metrics` does, into
// series → value.
func (td *testDaemon) scrape() map[string]float64 {
	td.t.Helper()
	socket := adminsock.Path(td.dataDir)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://blueline/metrics")
	if err != nil {
		td.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		td.t.Fatalf("GET /metrics: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	series := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			td.t.Fatalf("metrics line %q", line)
		}
		series[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		td.t.Fatal(err)
	}
	return series
}

func TestMetrics(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	td.register(key, mainLine, rc, "message.received")
	td.inbound(mainLine, alice, "hi")
	sent := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "hello"})
	td.waitOutbox(key, sent["id"].(string))
	td.call("GET", "/files/file_doesnotexist?expires=1&signature=x", "", nil)
	td.call("GET", "/no/such/route", "", nil)
	rc.waitRequests(1)

	var m map[string]float64
	testkit.Eventually(t, 10*time.Second, func() bool {
		m = td.scrape()
		return m[`blueline_webhook_attempts_total{outcome="success"}`] >= 1 && m[`blueline_webhook_deliveries_pending`] == 0
	})
	for series, atLeast := range map[string]float64{
		`blueline_http_requests_total{code="201",route="POST /v1/messages"}`:      1,
		`blueline_http_requests_total{code="201",route="POST /v1/webhooks"}`:      1,
		`blueline_http_requests_total{code="200",route="GET /v1/outbox"}`:         1,
		`blueline_http_requests_total{code="404",route="unmatched"}`:              1,
		`blueline_http_request_duration_seconds_count{route="POST /v1/messages"}`: 1,
		`blueline_outbox_sends_total{outcome="sent"}`:                             1,
		`blueline_outbox_sends_total{outcome="retried"}`:                          0,
		`blueline_outbox_sends_total{outcome="failed"}`:                           0,
		`blueline_bridge_send_seconds_count{bridge="sim"}`:                        1,
		`blueline_webhook_attempts_total{outcome="success"}`:                      1,
		`blueline_webhook_attempts_total{outcome="failure"}`:                      0,
		`blueline_outbox_items{state="pending"}`:                                  0,
		`blueline_outbox_items{state="claimed"}`:                                  0,
		`blueline_outbox_oldest_seconds{state="pending"}`:                         0,
		`blueline_outbox_oldest_seconds{state="claimed"}`:                         0,
		`blueline_webhook_deliveries_pending`:                                     0,
		`blueline_bolt_file_bytes`:                                                4096,
		`blueline_bolt_read_tx_total`:                                             1,
		`blueline_bolt_page_writes_total`:                                         1,
	} {
		if v, ok := m[series]; !ok || v < atLeast {
			t.Errorf("%s = %v (present %v), want at least %v", series, v, ok, atLeast)
		}
	}
	// Routes, never raw paths: a file ID makes no series of its own.
	for series := range m {
		if strings.Contains(series, "file_doesnotexist") {
			t.Errorf("raw path in %s", series)
		}
	}
	if m[`blueline_http_requests_total{code="403",route="GET /files/:id"}`] != 1 {
		t.Errorf("the download is not counted under its route")
	}
	if m[`blueline_outbox_items{state="pending"}`] != 0 || m[`blueline_outbox_items{state="claimed"}`] != 0 {
		t.Errorf("outbox not empty after the send: %v", m)
	}
	// Not on the API's listener.
	if r := td.call("GET", "/metrics", "", nil); r.Status != 404 {
		t.Errorf("GET /metrics on the API: %d", r.Status)
	}
}

// poster posts messages from many goroutines until stopped, and remembers
// the outbox items accepted.
type poster struct {
	mu       sync.Mutex
	accepted []string
	errs     []error
}

func (p *poster) run(base, key string, stop <-chan struct{}) {
	client := &http.Client{Timeout: 30 * time.Second}
	body := fmt.Sprintf(`{"from": %q, "to": %q, "text": "under load"}`, mainLine, alice)
	for {
		select {
		case <-stop:
			return
		default:
		}
		req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			p.fail(err)
			return
		}
		var item struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&item)
		resp.Body.Close()
		if resp.StatusCode != 201 || err != nil {
			p.fail(fmt.Errorf("POST /v1/messages: %s %v", resp.Status, err))
			return
		}
		p.mu.Lock()
		p.accepted = append(p.accepted, item.ID)
		p.mu.Unlock()
	}
}

func (p *poster) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

func (p *poster) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.accepted...)
}

// A backup taken while clients write holds every write accepted before it
// began; restored on the stopped daemon, it is what the daemon serves.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	td := startTestDaemon(t, "[limits]\nrequests_per_hour = 0\n")
	key := td.key()
	td.inbound(mainLine, alice, "hi")
	dir := t.TempDir()
	backup := filepath.Join(dir, "blueline.backup")

	if _, _, code := td.cli("backup"); code != 2 {
		t.Fatalf("backup without FILE: exit %d", code)
	}

	p := &poster{}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for range 8 {
		writers.Go(func() { p.run(td.base, key, stop) })
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return len(p.snapshot()) >= 300 || len(p.errs) > 0 })
	before := p.snapshot()
	out := td.mustCLI("backup", backup)
	during := len(p.snapshot()) - len(before)
	close(stop)
	writers.Wait()
	if len(p.errs) > 0 {
		t.Fatal(p.errs)
	}
	t.Logf("%d messages accepted before the backup, %d while it ran", len(before), during)
	if !strings.Contains(out, "wrote "+backup) {
		t.Errorf("backup printed %q", out)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", fi, err)
	}
	if leftovers, _ := filepath.Glob(backup + ".*"); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// The backup opens as a database, with the key and every accepted
	// message.
	opened := t.TempDir()
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(opened, "db.bolt"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(opened)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := db.Keys(context.Background()); err != nil || len(keys) != 1 {
		t.Errorf("keys in the backup: %v %v", keys, err)
	}
	for _, id := range before {
		if _, err := db.OutboxItemByID(context.Background(), id); err != nil {
			t.Fatalf("outbox item %s accepted before the backup: %v", id, err)
		}
	}
	db.Close()

	// FILE is never overwritten without --force.
	if _, errOut, code := td.cli("backup", backup); code != 1 || !strings.Contains(errOut, "--force") {
		t.Errorf("backup over an existing file: exit %d: %s", code, errOut)
	}
	junk := filepath.Join(dir, "junk")
	writeFile(t, junk, "not a database")
	td.mustCLI("backup", "--force", junk)
	if err := storage.CheckBackup(junk); err != nil {
		t.Errorf("--force did not replace the file with a backup: %v", err)
	}
	writeFile(t, junk, "not a database")

	// Restore refuses while the daemon runs.
	if _, errOut, code := td.cli("restore", backup); code != 1 || !strings.Contains(errOut, "stop it first") {
		t.Fatalf("restore on a running daemon: exit %d: %s", code, errOut)
	}
	later := td.key() // not in the backup

	td.stop()
	if _, errOut, code := td.cli("backup", filepath.Join(dir, "other")); code != 1 || !strings.Contains(errOut, "not running") {
		t.Errorf("backup with no daemon: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); !os.IsNotExist(err) {
		t.Errorf("a failed backup left a file: %v", err)
	}
	if _, _, code := td.cli("restore"); code != 2 {
		t.Errorf("restore without FILE: exit %d", code)
	}
	for _, bad := range []string{junk, filepath.Join(dir, "missing")} {
		if _, errOut, code := td.cli("restore", bad); code != 1 {
			t.Errorf("restore %s: exit %d: %s", bad, code, errOut)
		}
	}
	if kept, _ := filepath.Glob(filepath.Join(td.dataDir, "db.bolt.*")); len(kept) > 0 {
		t.Fatalf("a refused restore touched the data folder: %v", kept)
	}
	current, err := os.ReadFile(filepath.Join(td.dataDir, "db.bolt"))
	if err != nil {
		t.Fatal(err)
	}

	out = td.mustCLI("restore", backup)
	kept, _ := filepath.Glob(filepath.Join(td.dataDir, "db.bolt.before-restore-*"))
	if len(kept) != 1 || !strings.Contains(out, "kept as "+kept[0]) {
		t.Fatalf("restore printed %q; kept %v", out, kept)
	}
	if keptData, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(keptData, current) {
		t.Fatalf("the replaced database was not kept as it was: %v", err)
	}

	td.start()
	if r := td.call("GET", "/v1/lines", key, nil); r.Status != 200 {
		t.Fatalf("the backed-up key after restore: %d %s", r.Status, r.Raw)
	}
	if r := td.call("GET", "/v1/lines", later, nil); r.Status != 401 {
		t.Fatalf("a key made after the backup still works: %d", r.Status)
	}
	for _, id := range before {
		if r := td.call("GET", "/v1/outbox?id="+id, key, nil); r.Status != 200 {
			t.Fatalf("outbox item %s after restore: %d %s", id, r.Status, r.Raw)
		}
	}
}
