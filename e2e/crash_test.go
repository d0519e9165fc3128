package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// buildBinary builds the daemon the way the README says, into a temp folder.
func buildBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "blueline")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = ".." // the repository's root, where main.go is
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveBinary runs `bin serve` on td's configuration until the test ends,
// and waits until its admin socket answers.
func serveBinary(td *testDaemon, bin string) *exec.Cmd {
	td.t.Helper()
	cmd := exec.Command(bin, "serve", "--config", td.cfgPath)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		td.t.Fatal(err)
	}
	td.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testkit.Eventually(td.t, 20*time.Second, func() bool {
		_, _, code := td.cli("keys", "list")
		return code == 0
	})
	return cmd
}

// processTestDaemon is a test daemon for the blueline binary to serve, on
// a port of its own that stays the same across restarts; writeConfig writes
// its configuration, extra appended.
func processTestDaemon(t testing.TB) (td *testDaemon, writeConfig func(extra string)) {
	dir := t.TempDir()
	addr := freePort(t)
	td = &testDaemon{t: t, cfgPath: filepath.Join(dir, "blueline.toml"), dataDir: filepath.Join(dir, "data"), base: "http://" + addr}
	return td, func(extra string) {
		cfg := strings.Replace(testConfig(td.dataDir, extra), `listen = "127.0.0.1:0"`, fmt.Sprintf("listen = %q", addr), 1)
		writeFile(t, td.cfgPath, cfg)
	}
}

// A real process is killed (SIGKILL) with one send claimed mid-flight and
// one waiting; after a restart both are delivered, each exactly once.
func TestCrashLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	td, write := processTestDaemon(t)
	writeConfig := func(latency string) { write(fmt.Sprintf("workers = 1\n[sim]\nlatency = %q\n", latency)) }
	start := func() *exec.Cmd { return serveBinary(td, bin) }

	writeConfig("1h") // every send hangs: the first is claimed, the second waits
	proc := start()
	key := td.key()
	td.inbound(mainLine, alice, "hi")
	first := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "first"})["id"].(string)
	second := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "second"})["id"].(string)
	testkit.Eventually(t, 10*time.Second, func() bool {
		return td.call("GET", "/v1/outbox?id="+first, key, nil).Body["status"] == "claimed"
	})
	// The second waits: pending, or already claimed into its chat's queue
	// behind the first (the dispatcher claims ahead); never sent.
	if st := td.call("GET", "/v1/outbox?id="+second, key, nil).Body["status"]; st != "pending" && st != "claimed" {
		t.Fatalf("second item is %v, want pending or claimed", st)
	}
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	proc.Wait()

	writeConfig("0s")
	start()
	for _, id := range []string{first, second} {
		item := td.waitOutbox(key, id)
		if item["status"] != "sent" {
			t.Fatalf("after the crash: %v", item)
		}
	}
	if item := td.call("GET", "/v1/outbox?id="+first, key, nil).Body; item["attempts"] != 2.0 {
		t.Errorf("the interrupted item made %v attempts, want 2", item["attempts"])
	}
	count := map[string]int{}
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data() {
		count[m["text"].(string)]++
	}
	if count["first"] != 1 || count["second"] != 1 || count["hi"] != 1 {
		t.Fatalf("history after the crash: %v", count)
	}
}

// A delivery queued with its message survives SIGKILL: the event was
// committed in the message's own transaction.
func TestCrashKeepsWebhookDeliveries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rc, up := downReceiver(t)
	bin := buildBinary(t)
	td, writeConfig := processTestDaemon(t)
	writeConfig(webhookConfig(t, rc, "retry_schedule = [\"200ms\", \"200ms\", \"200ms\"]\n"))

	proc := serveBinary(td, bin)
	key := td.key()
	td.register(key, mainLine, rc, "message.received")
	in := td.inbound(mainLine, alice, "survive this")
	first := rc.waitRequests(1)[0]
	proc.Process.Kill()
	proc.Wait()
	before := len(rc.Requests())

	up()
	serveBinary(td, bin)
	got := rc.waitRequests(before + 1)
	if last := got[before]; last.Err != nil || last.DeliveryID() != first.DeliveryID() || last.Data()["id"] != in["id"] {
		t.Fatalf("after the crash: %v %s", last.Err, last.Raw)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		out := td.mustCLI("webhooks", "deliveries", "--delivery", first.DeliveryID(), "--limit", "1")
		return strings.HasSuffix(strings.TrimSpace(out), "\tok")
	})
}
