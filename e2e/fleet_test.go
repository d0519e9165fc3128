package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// fleetProc is a node of a fleet of blueline processes, each serving its
// own line on the simulated network on an API port of its own that stays
// the same across restarts, so that it can be killed (SIGKILL) and started
// again as a host would be.
type fleetProc struct {
	*testDaemon
	bin    string
	node   string
	line   string
	cmd    *exec.Cmd
	ended  chan struct{} // closed once the process has ended
	stderr *testkit.LogBuffer
}

// startFleetProcs builds the binary and starts n nodes (daemontest's fleet
// configuration, extra appended) together, as each waits for the others
// to elect JetStream's leader; it returns once every node answers on its
// admin socket.
func startFleetProcs(t testing.TB, n int, extra string) []*fleetProc {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	// A port freePort found may be taken before the node listens on it
	// (by any process on the machine, an outgoing connection's too): a
	// fleet whose node could not listen is started again on new ports.
	for attempt := 1; ; attempt++ {
		procs, taken := tryFleetProcs(t, bin, n, extra)
		if !taken {
			return procs
		}
		for _, p := range procs {
			p.kill()
		}
		if attempt == 3 {
			t.Fatalf("three fleets in a row could not listen on the ports found free")
		}
		t.Logf("a node could not listen on its port; starting the fleet again on new ports")
	}
}

// tryFleetProcs starts n nodes and waits until they all answer; taken is
// true when one of them ended because a port was in use.
func tryFleetProcs(t testing.TB, bin string, n int, extra string) (procs []*fleetProc, taken bool) {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = freePort(t)
	}
	procs = make([]*fleetProc, n)
	for i := range procs {
		dir := t.TempDir()
		addr := freePort(t)
		td := &testDaemon{t: t, cfgPath: filepath.Join(dir, "blueline.toml"), dataDir: filepath.Join(dir, "data"), base: "http://" + addr}
		cfg := strings.Replace(daemontest.FleetConfig(td.dataDir, i, routes, extra), `listen = "127.0.0.1:0"`, fmt.Sprintf("listen = %q", addr), 1)
		writeFile(t, td.cfgPath, cfg)
		procs[i] = &fleetProc{testDaemon: td, bin: bin, node: daemontest.FleetNode(i), line: daemontest.FleetLine(i)}
	}
	for _, p := range procs {
		p.launch()
	}
	var wg sync.WaitGroup
	var inUse atomic.Bool
	for _, p := range procs {
		wg.Go(func() {
			if !p.up() && strings.Contains(p.stderr.String(), "address already in use") {
				inUse.Store(true)
			}
		})
	}
	wg.Wait()
	if inUse.Load() {
		return procs, true
	}
	for _, p := range procs {
		p.waitUp()
	}
	return procs, false
}

// launch starts the node's process; it is killed when the test ends.
func (p *fleetProc) launch() {
	p.t.Helper()
	cmd := exec.Command(p.bin, "serve", "--config", p.cfgPath)
	p.stderr = &testkit.LogBuffer{}
	cmd.Stderr = p.stderr
	if testing.Verbose() {
		cmd.Stderr = io.MultiWriter(os.Stderr, p.stderr)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { cmd.Wait(); close(ended) }()
	p.cmd, p.ended = cmd, ended
	p.t.Cleanup(func() { cmd.Process.Kill(); <-ended })
}

// up waits until the node answers on its admin socket, or its process
// ends (false).
func (p *fleetProc) up() bool {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, code := p.cli("keys", "list"); code == 0 {
			return true
		}
		select {
		case <-p.ended:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// waitUp waits until the node answers on its admin socket, and fails the
// test with the node's own words when it does not.
func (p *fleetProc) waitUp() {
	p.t.Helper()
	if !p.up() {
		p.t.Fatalf("node %s did not come up; it wrote:\n%s", p.node, p.stderr.String())
	}
}

// kill ends the node's process with SIGKILL: nothing of it is shut down.
func (p *fleetProc) kill() {
	p.cmd.Process.Kill()
	<-p.ended
}

// restart starts the node again on its data, and waits until it answers.
func (p *fleetProc) restart() {
	p.launch()
	p.waitUp()
}

// fleetHooks is a test fleet's [webhooks]: receivers on loopback over
// plain HTTP, retries every 200 ms, answers awaited 2 s.
const fleetHooks = "[webhooks]\nallow_http = true\nallow_private_networks = true\ntimeout = \"2s\"\nretry_schedule = [" +
	`"200ms", "200ms", "200ms", "200ms", "200ms", "200ms", "200ms", "200ms", "200ms", "200ms", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s"` + "]\n"

// waitKey waits until every node in procs knows key (the control plane
// shares it through KV).
func waitKey(t testing.TB, key string, procs ...*fleetProc) {
	t.Helper()
	for _, p := range procs {
		testkit.Eventually(t, 5*time.Second, func() bool {
			return p.call("GET", "/v1/webhooks?"+url.Values{"from": {p.line}}.Encode(), key, nil).Status != 401
		})
	}
}

// SIGKILL of C: its line answers 503 line_unavailable, with Retry-After,
// on A and B within seconds; A's line is unaffected and A's events still
// reach a webhook registered through B. C started again serves its line,
// and a send accepted before the kill is sent.
func TestFleetNodeKilled(t *testing.T) {
	procs := startFleetProcs(t, 3, fleetHooks+"[sim]\nlatency = \"1s\"\n")
	a, b, c := procs[0], procs[1], procs[2]
	key := a.key()
	waitKey(t, key, b, c)
	rc := &receiver{Receiver: localReceiver(t, nil), t: t}
	if r := b.call("POST", "/v1/webhooks", key, map[string]any{"from": a.line, "url": rc.Server.URL, "events": []string{"message.received"}}); r.Status != 201 {
		t.Fatalf("webhook through B: %d %s", r.Status, r.Raw)
	} else {
		rc.SetSecret(r.Body["secret"].(string))
	}
	c.inbound(c.line, alice, "hi C")
	a.inbound(a.line, alice, "hi A")
	rc.waitRequests(1)
	// Claimed by C (the simulated network takes a second), then C dies.
	pending := b.send(key, map[string]any{"from": c.line, "to": alice, "text": "in flight"})["id"].(string)

	c.kill()
	for _, p := range []*fleetProc{a, b} {
		var r response
		testkit.Eventually(t, 15*time.Second, func() bool {
			r = p.call("POST", "/v1/messages", key, map[string]any{"from": c.line, "to": alice, "text": "to a dead node"})
			return r.Status == 503
		})
		if r.ErrCode() != "line_unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: C's line answered %d %s (Retry-After %q)", p.node, r.Status, r.Raw, r.Header.Get("Retry-After"))
		}
	}
	sent := a.send(key, map[string]any{"from": a.line, "to": alice, "text": "A goes on"})["id"].(string)
	if item := b.waitOutbox(key, sent); item["status"] != "sent" {
		t.Errorf("A's send with C down: %v", item)
	}
	a.inbound(a.line, alice, "A still heard")
	got := rc.waitRequests(2)
	if text := got[len(got)-1].Data()["text"]; text != "A still heard" {
		t.Errorf("the webhook got %v after C died", text)
	}

	c.restart()
	testkit.Eventually(t, 20*time.Second, func() bool {
		return b.call("GET", "/v1/outbox?id="+pending, key, nil).Body["status"] == "sent"
	})
	again := b.send(key, map[string]any{"from": c.line, "to": alice, "text": "C is back"})["id"].(string)
	if item := b.waitOutbox(key, again); item["status"] != "sent" {
		t.Errorf("C's line after its restart: %v", item)
	}
}

// webhookAttempts are the attempts node p made for webhook id, as its
// admin socket lists them.
func (p *fleetProc) webhookAttempts(id string) []map[string]any {
	p.t.Helper()
	var page struct{ Data []map[string]any }
	if err := adminsock.NewClient(p.dataDir).Do(context.Background(), http.MethodGet, "/webhooks/attempts?limit=1000&webhook="+id, nil, &page); err != nil {
		p.t.Fatal(err)
	}
	return page.Data
}

// SIGKILL of the node that was delivering a webhook's event while its
// receiver failed: another node goes on with the same delivery ID, and
// once the receiver recovers the event is delivered once.
func TestFleetDeliveringNodeKilled(t *testing.T) {
	procs := startFleetProcs(t, 3, fleetHooks)
	var failing atomic.Bool
	failing.Store(true)
	rc := &receiver{Receiver: localReceiver(t, func(int, http.ResponseWriter, *http.Request) int {
		if failing.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	}), t: t}
	key := procs[0].key()
	waitKey(t, key, procs[1:]...)
	r := procs[1].call("POST", "/v1/webhooks", key, map[string]any{"from": procs[0].line, "url": rc.Server.URL, "events": []string{"message.received"}})
	if r.Status != 201 {
		t.Fatalf("webhook: %d %s", r.Status, r.Raw)
	}
	rc.SetSecret(r.Body["secret"].(string))
	hook := r.Body["id"].(string)
	procs[0].inbound(procs[0].line, alice, "deliver me once")
	first := rc.waitRequests(1)[0].DeliveryID()

	// The node that made the latest attempt is killed mid-retries.
	var delivering *fleetProc
	testkit.Eventually(t, 10*time.Second, func() bool {
		latest := 0.0
		for _, p := range procs {
			for _, a := range p.webhookAttempts(hook) {
				if at, _ := a["at"].(float64); at > latest {
					latest, delivering = at, p
				}
			}
		}
		return delivering != nil
	})
	delivering.kill()
	before := len(rc.Requests())
	failing.Store(false)

	testkit.Eventually(t, 60*time.Second, func() bool {
		for _, h := range rc.Requests()[before:] {
			if h.DeliveryID() == first && h.Err == nil {
				return true
			}
		}
		return false
	})
	// Delivered once: no 2xx after the first success, nothing else sent.
	for i, h := range rc.Requests() {
		if h.Err != nil || h.DeliveryID() != first || h.Data()["text"] != "deliver me once" {
			t.Errorf("request %d: %v %s", i+1, h.Err, h.Raw)
		}
	}
	// The success is recorded by the node that made it, just after the
	// receiver answered.
	successes := 0
	testkit.Eventually(t, 10*time.Second, func() bool {
		successes = 0
		for _, p := range procs {
			if p == delivering {
				continue
			}
			for _, a := range p.webhookAttempts(hook) {
				if a["status_code"] == 204.0 {
					successes++
				}
			}
		}
		return successes > 0
	})
	if successes != 1 {
		t.Errorf("%d successful attempts recorded by the live nodes, want 1 (killed %s)", successes, delivering.node)
	}
}
