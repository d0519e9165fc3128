package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/cli"
)

func decodeJSON(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// Walk thousands of messages page by page while new ones keep arriving: each
// original message is seen exactly once, newest first.
func TestPaginationWalk(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	const n = 2500
	first := td.inbound(mainLine, alice, "m0")
	chatID := first["chat_id"].(string)
	ids := []string{first["id"].(string)}
	for i := 1; i < n; i++ {
		ids = append(ids, td.record(mainLine, alice, fmt.Sprintf("m%d", i)))
	}
	slices.Reverse(ids) // newest first

	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/messages?from=" + mainLine + "&to=" + chatID + "&limit=97"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := td.call("GET", path, key, nil)
		if r.Status != 200 {
			t.Fatalf("page %d: %d %s", page, r.Status, r.Raw)
		}
		for _, m := range r.Data() {
			seen = append(seen, m["id"].(string))
		}
		// New messages arrive mid-walk; they sort before the cursor.
		td.record(mainLine, alice, fmt.Sprintf("late %d", page))
		if r.Body["has_more"] != true {
			if r.Body["next_cursor"] != nil {
				t.Fatalf("last page has a cursor: %s", r.Raw)
			}
			break
		}
		cursor = r.Body["next_cursor"].(string)
	}
	if !slices.Equal(seen, ids) {
		t.Fatalf("walk saw %d messages, want the %d originals in order", len(seen), len(ids))
	}
	// Default page size is 50.
	if got := len(td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data()); got != 50 {
		t.Fatalf("default page has %d messages", got)
	}
}

// Chats are listed most recent first, and walk without repeats.
func TestChatOrderAndWalk(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	const n = 120
	for i := range n {
		td.record(mainLine, fmt.Sprintf("+1555200%04d", i), "hi")
	}
	// The oldest chat gets a new message: it moves to the front.
	td.record(mainLine, "+15552000000", "back again")
	var seen []string
	cursor := ""
	for {
		path := "/v1/chats?from=" + mainLine + "&limit=50"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := td.call("GET", path, key, nil)
		for _, c := range r.Data() {
			seen = append(seen, c["identifier"].(string))
		}
		if r.Body["has_more"] != true {
			break
		}
		cursor = r.Body["next_cursor"].(string)
	}
	if len(seen) != n || seen[0] != "+15552000000" || seen[1] != fmt.Sprintf("+1555200%04d", n-1) || seen[n-1] != "+15552000001" {
		t.Fatalf("chat order: %d chats, first %v, last %v", len(seen), seen[:2], seen[len(seen)-1])
	}
	slices.Sort(seen)
	if len(slices.Compact(seen)) != n {
		t.Fatal("a chat was listed twice")
	}
}

// record stores an inbound message through the daemon's receiver (the path
// the bridges use), faster than a CLI round trip; it returns the message ID.
func (td *testDaemon) record(line, from, text string) string {
	td.t.Helper()
	res, err := td.d.Record(context.Background(), bridge.Inbound{
		Line: line, Chat: sim.OneToOne("imessage", from), GUID: sim.NewGUID(), Sender: from, Text: &text,
	})
	if err != nil {
		td.t.Fatal(err)
	}
	return res.Message.ID
}

func TestRestartKeepsEverything(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	in := td.inbound(mainLine, alice, "before restart")
	obx := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "reply"})
	td.waitOutbox(key, obx["id"].(string))
	lines := td.call("GET", "/v1/lines", key, nil).Raw

	td.stop()
	td.start()

	if r := td.call("GET", "/v1/lines", key, nil); r.Status != 200 || !sameLines(t, lines, r.Raw) {
		t.Fatalf("lines after restart: %d %s (before: %s)", r.Status, r.Raw, lines)
	}
	msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data()
	if len(msgs) != 2 || msgs[1]["id"] != in["id"] || msgs[0]["outbox_id"] != obx["id"] {
		t.Fatalf("history after restart: %v", msgs)
	}
	if item := td.call("GET", "/v1/outbox?id="+obx["id"].(string), key, nil).Body; item["status"] != "sent" {
		t.Fatalf("outbox after restart: %v", item)
	}
	// The conversation goes on.
	obx = td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "after restart"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("send after restart: %v", item)
	}
}

func sameLines(t *testing.T, a, b []byte) bool {
	var x, y struct{ Data []map[string]any }
	decodeJSON(t, string(a), &x)
	decodeJSON(t, string(b), &y)
	if len(x.Data) != len(y.Data) {
		return false
	}
	for i := range x.Data {
		if x.Data[i]["id"] != y.Data[i]["id"] || x.Data[i]["handle"] != y.Data[i]["handle"] {
			return false
		}
	}
	return true
}

func TestAdminCommandsWithoutDaemon(t *testing.T) {
	td := startTestDaemon(t, "")
	td.stop()
	for _, args := range [][]string{
		{"keys", "create", "--label", "x"},
		{"keys", "list"},
		{"keys", "revoke", "key_x"},
		{"sim", "inbound", "--line", mainLine, "--from", alice, "--text", "x"},
		{"sandbox"},
	} {
		out, errOut, code := td.cli(args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "daemon is not running") {
			t.Errorf("%v with no daemon: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// A data folder whose path is too long for a Unix socket (104 bytes on
// macOS) still gets a working admin socket.
func TestLongDataFolder(t *testing.T) {
	td := startTestDaemon(t, "")
	td.stop()
	long := filepath.Join(t.TempDir(), strings.Repeat("deep-folder-", 10))
	writeFile(t, td.cfgPath, testConfig(long, ""))
	td.dataDir = long
	td.start()
	if sock := adminsock.Path(long); len(sock) > 100 || strings.HasPrefix(sock, long) {
		t.Fatalf("socket path %q (%d bytes)", sock, len(sock))
	}
	if key := td.key(); !strings.HasPrefix(key, "sk_live_") {
		t.Fatalf("keys create through the moved socket printed %q", key)
	}
	fi, err := os.Stat(adminsock.Path(long))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	short := adminsock.Path(td.dataDir[:10])
	if !strings.HasSuffix(short, "admin.sock") {
		t.Fatalf("short path: %q", short)
	}
}

func TestBadConfigRefused(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/bad.toml"
	writeFile(t, path, "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\ndir = \""+dir+"\"\n[[lines]]\nhandle = \"+15550000001\"\nservice = \"mms\"\n")
	_, errOut, code := runCLI("serve", "--config", path)
	if code != 1 || !strings.Contains(errOut, path) || !strings.Contains(errOut, "lines[0].service") {
		t.Fatalf("bad config: exit %d %q", code, errOut)
	}
	// A Messages line on a machine without Messages says which file is missing.
	missing := filepath.Join(dir, "no-messages", "chat.db")
	writeFile(t, path, "[server]\nlisten = \"127.0.0.1:0\"\n[storage]\ndir = \""+dir+"\"\n[[lines]]\nhandle = \"+15550000001\"\nbridge = \"messages\"\nchat_db = \""+missing+"\"\n")
	_, errOut, code = runCLI("serve", "--config", path)
	if code != 1 || !strings.Contains(errOut, "+15550000001") || !strings.Contains(errOut, missing+" does not exist") {
		t.Fatalf("messages bridge without chat.db: exit %d %q", code, errOut)
	}
	if _, errOut, code := runCLI("frobnicate"); code != 2 || !strings.Contains(errOut, "Run 'blueline --help' for usage.") {
		t.Fatalf("unknown command: exit %d %q", code, errOut)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = cli.Run(context.Background(), cli.Build{}, args, nil, &out, &errOut)
	return out.String(), errOut.String(), code
}
