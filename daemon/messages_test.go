package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/testkit"
)

const macLine = "+15550000009"

// messagesConfig is a configuration with a sim line and a line on the
// Messages bridge over chatDB, whose osascript is /bin/false: the bridge
// reads chat.db and never reaches a Messages app.
func messagesConfig(t *testing.T, chatDB string) *config.Config {
	t.Helper()
	t.Setenv("HOME", t.TempDir()) // the bridge's "~/…" paths expand here
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	helperPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	text := fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"

[storage]
dir = %q

[[lines]]
handle = %q
label = "Main line"

[[lines]]
handle = %q
bridge = "messages"
chat_db = %q
osascript = "/bin/false"
helper_port = %d
watchdog = false
`, t.TempDir(), mainLine, macLine, chatDB, helperPort)
	cfg, err := config.Parse("test.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A Messages line: its bridge reads chat.db, and the daemon reports what it
// has seen in readiness and on GET /v1/lines.
func TestMessagesLine(t *testing.T) {
	dir := t.TempDir()
	fx := chatdbtest.New(t, dir)
	cfg := messagesConfig(t, fx.Path())
	d := start(t, cfg)

	var ready struct {
		Status string `json:"status"`
		Checks map[string]struct {
			OK   bool   `json:"ok"`
			Info string `json:"info"`
		} `json:"checks"`
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		a := get(t, d, "/readyz", "")
		if err := json.Unmarshal(a.body, &ready); err != nil {
			t.Fatalf("GET /readyz: %d %q", a.status, a.body)
		}
		return a.status == http.StatusOK
	})
	mac, ok := ready.Checks["line "+macLine]
	if !ok || !mac.OK || !strings.Contains(mac.Info, "chat.db") {
		t.Errorf("the Messages line's check: %+v (of %+v)", mac, ready.Checks)
	}
	if sim := ready.Checks["line "+mainLine]; !sim.OK || sim.Info != "" {
		t.Errorf("the sim line's check: %+v", sim)
	}

	key := createKey(t, cfg)
	a := get(t, d, "/v1/lines", key.Secret)
	var lines api.List[api.Line]
	if err := json.Unmarshal(a.body, &lines); err != nil || a.status != http.StatusOK {
		t.Fatalf("GET /v1/lines: %d %s", a.status, a.body)
	}
	for _, l := range lines.Data {
		switch l.Handle {
		case macLine:
			if l.Health == nil || l.Health.Summary == "" {
				t.Errorf("the Messages line shows no health: %s", a.body)
			}
		case mainLine:
			if l.Health != nil {
				t.Errorf("the sim line shows health %+v", l.Health)
			}
		default:
			t.Errorf("unexpected line %s", l.Handle)
		}
	}
	if _, _, err := d.BridgeCursor(context.Background(), macLine); err != nil {
		t.Errorf("BridgeCursor of the Messages line: %v", err)
	}
	// The metrics, on the admin socket, count the Messages line's chat.db
	// rows, and only its.
	body, err := adminsock.NewClient(cfg.DataDir()).Stream(context.Background(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, l := range strings.Split(string(scrape), "\n") {
		if strings.HasPrefix(l, "blueline_messages_history_rows_total{") {
			counted = append(counted, l)
		}
	}
	if len(counted) != 1 || !strings.Contains(counted[0], macLine) {
		t.Errorf("history rows counted: %q", counted)
	}
	shutdown(t, d)
}

// A Messages line whose chat.db does not exist fails the start, which
// releases what it opened.
func TestMessagesLineWithoutChatDB(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-messages", "chat.db")
	cfg := messagesConfig(t, missing)
	log, _ := newLog()
	d, err := daemon.Start(context.Background(), cfg, log)
	if err == nil {
		d.Shutdown(context.Background())
		t.Fatal("Start without chat.db succeeded")
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q does not name the missing file", err)
	}
	if _, statErr := os.Stat(missing); statErr == nil {
		t.Errorf("the start created %s", missing)
	}
	reopens(t, cfg)
}
