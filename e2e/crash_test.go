package e2e

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
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

// longUsedChatDB writes a long-used Mac's chat.db of n rows in dir
// (chatdbtest.WriteLongUsed) and returns its path. A program built without
// the race detector writes it: under the detector the pure-Go SQLite takes
// minutes over what it writes in seconds.
func longUsedChatDB(t testing.TB, dir string, n int) string {
	t.Helper()
	gen := filepath.Join(t.TempDir(), "longused")
	build := exec.Command("go", "build", "-o", gen, "./e2e/testdata/longused")
	build.Dir = ".." // the repository's root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(gen, dir, strconv.Itoa(n)).Output()
	if err != nil {
		t.Fatalf("longused: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// A real process is killed (SIGKILL) at several points of its first
// start's history import; the start after that imports the rest. Every
// message is there once, and the IDs a client saw before a kill are the
// same after it and after a clean restart.
func TestCrashDuringHistoryImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := filepath.Join(home, "Library", "Messages")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Three of the import's transactions (storage.importTxSize, 40,000
	// messages), so that kills fall between two.
	chatDB := longUsedChatDB(t, dir, 90_000)
	want := historyMessages(t, chatDB)
	td, write := processTestDaemon(t)
	// The key is made first, by a daemon without the Mac line: making it
	// during the first start would take longer than the import.
	write("")
	first := serveBinary(td, bin)
	key := td.key()
	first.Process.Signal(syscall.SIGTERM)
	first.Wait()
	// No rate limit: the checks list every message, page after page.
	write(fmt.Sprintf("\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nosascript = \"/bin/false\"\nhelper_port = %d\n[limits]\nrequests_per_hour = 0\n",
		macLine, chatDB, freeTCPPort(t)))
	logs := filepath.Join(t.TempDir(), "log")
	start := func() (*exec.Cmd, *os.File) {
		t.Helper()
		f, err := os.OpenFile(logs, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", "--config", td.cfgPath)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); f.Close() })
		return cmd, f
	}
	logHas := func(msg string) bool {
		data, _ := os.ReadFile(logs)
		return strings.Contains(string(data), msg)
	}
	// pages walks a list to its end. Tens of thousands of messages: the
	// pages are not each held to the API document (the suite checks those
	// shapes elsewhere), which would take minutes under the race detector.
	bulk := apitest.Client{TB: t, Base: td.base, Part: true}
	pages := func(key, path string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for cursor := ""; ; {
			r := bulk.Call("GET", path+"&cursor="+url.QueryEscape(cursor), key, nil)
			if r.Status != 200 {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
			}
			out = append(out, r.Data()...)
			next, _ := r.Body["next_cursor"].(string)
			if next == "" {
				return out
			}
			cursor = next
		}
	}
	// messages lists every chat's messages: message ID → GUID.
	messages := func(key string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, c := range pages(key, "/v1/chats?from="+url.QueryEscape(macLine)+"&limit=100") {
			for _, m := range pages(key, "/v1/messages?from="+url.QueryEscape(macLine)+"&to="+c["id"].(string)+"&limit=100") {
				id, guid := m["id"].(string), m["guid"].(string)
				if _, twice := out[id]; twice {
					t.Fatalf("message %s listed twice", id)
				}
				out[id] = guid
			}
		}
		return out
	}

	seen := map[string]string{} // what clients saw before the kills
	cut := 0
	for try := 0; cut < 3 && try < 20; try++ {
		proc, _ := start()
		// Killed at some point of the import: soon after the API answers,
		// a little later each time.
		testkit.Eventually(t, 20*time.Second, func() bool {
			return logHas("importing the Messages history") || logHas("imported the Messages history")
		})
		// Some of the history is in.
		var chats []map[string]any
		testkit.Eventually(t, 20*time.Second, func() bool {
			r := td.call("GET", "/v1/chats?from="+url.QueryEscape(macLine)+"&limit=3", key, nil)
			chats = r.Data()
			return r.Status == 200 && len(chats) > 0
		})
		for _, c := range chats {
			page := td.call("GET", "/v1/messages?from="+url.QueryEscape(macLine)+"&to="+c["id"].(string)+"&limit=20", key, nil)
			for _, m := range page.Data() {
				seen[m["id"].(string)] = m["guid"].(string)
			}
		}
		time.Sleep(time.Duration(try*30) * time.Millisecond)
		if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proc.Wait()
		if logHas("imported the Messages history") {
			t.Fatalf("the import finished before the kill (try %d): make the fixture bigger", try)
		}
		cut++
	}
	if cut < 3 {
		t.Fatalf("only %d kills during the import", cut)
	}
	if len(seen) == 0 {
		t.Fatal("no message was listed before the kills")
	}

	proc, _ := start()
	testkit.Eventually(t, 2*time.Minute, func() bool { return logHas("imported the Messages history") })
	after := messages(key)
	if len(after) != want {
		t.Fatalf("%d messages after the kills, want %d", len(after), want)
	}
	guids := map[string]bool{}
	for _, g := range after {
		if guids[g] {
			t.Fatalf("GUID %s imported twice", g)
		}
		guids[g] = true
	}
	for id, g := range seen {
		if after[id] != g {
			t.Fatalf("message %s (%s) seen before a kill is %q after it", id, g, after[id])
		}
	}
	// A clean restart: the same messages, the same IDs.
	proc.Process.Signal(syscall.SIGTERM)
	proc.Wait()
	start()
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, _, code := td.cli("keys", "list")
		return code == 0
	})
	if again := messages(key); !maps.Equal(again, after) {
		t.Fatalf("a restart changed the messages: %d before, %d after", len(after), len(again))
	}
}
