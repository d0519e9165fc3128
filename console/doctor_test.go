package console_test

import (
	"fmt"
	"html"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// freePort is a loopback port nobody listens on now: the line's helper
// port (the default is the same for every test daemon of this user).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// macLine is a Messages line on a fixture chat.db whose stand-in osascript
// runs script.
func macLine(t *testing.T, handle, script string) string {
	t.Helper()
	db := chatdbtest.New(t, t.TempDir())
	chat := db.DirectChat("iMessage", alice)
	db.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "hello", Date: time.Now().Add(-time.Hour)})
	osa := filepath.Join(t.TempDir(), "osascript")
	if err := os.WriteFile(osa, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nosascript = %q\nhelper_port = %d\n",
		handle, db.Path(), osa, freePort(t))
}

// The overview sends the operator of a Messages line that is not healthy
// to `blueline doctor`; a healthy one, or a simulated line, gets no hint.
func TestOverviewPointsAnUnhealthyLineToDoctor(t *testing.T) {
	const healthy, denied = "+15550000008", "+15550000009"
	e := start(t, macLine(t, healthy, "#!/bin/sh\ncat > /dev/null\n")+
		macLine(t, denied, "#!/bin/sh\ncat > /dev/null\necho 'execution error: Not authorized to send Apple events to Messages. (-1743)' >&2\nexit 1\n"))
	// A send runs a script, and macOS refuses it: the line's health says
	// Automation is denied.
	e.adminDo("POST", "/v1/messages", map[string]string{"from": denied, "to": alice, "text": "hi"}, nil)

	b := e.browser()
	b.signIn("")
	row := regexp.MustCompile(`(?s)<tr>\s*<td><strong><bdi>([^<]+)</bdi></strong>.*?</tr>`)
	hint := "run <code>blueline doctor</code> on the host"
	testkit.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(b.do("GET", "/dashboard/", nil).body, "Automation denied")
	})
	page := b.do("GET", "/dashboard/", nil).body
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(page, -1) {
		seen[html.UnescapeString(m[1])] = strings.Contains(m[0], hint)
	}
	if !seen[denied] || seen[healthy] || seen[mainLine] || len(seen) < 4 {
		t.Errorf("hint shown by line: %v, want on %s only\n%s", seen, denied, page)
	}
}
