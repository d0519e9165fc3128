package mcpserver_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/doctor"
	"github.com/blueline-app/blueline/mcpserver"
	"github.com/blueline-app/blueline/testkit"
)

// macLine is a Messages line on a fixture chat.db, with a stand-in
// osascript that macOS refuses Apple events to Messages.
const macLine = "+15550000009"

const automationDenied = `#!/bin/sh
cat > /dev/null
echo '0:110: execution error: Not authorized to send Apple events to Messages. (-1743)' >&2
exit 1
`

// TestDiagnose: the doctor's checks of what the daemon answers, per line:
// a Messages line whose Automation macOS refuses fails the daemon check,
// with the fix; a simulated line has nothing to check; the Mac's own
// checks are named as not run.
func TestDiagnose(t *testing.T) {
	db := chatdbtest.New(t, t.TempDir())
	db.Insert(chatdbtest.Msg{Chat: db.DirectChat("iMessage", alice), From: alice, Text: "hello"})
	osa := filepath.Join(t.TempDir(), "osascript")
	if err := os.WriteFile(osa, []byte(automationDenied), 0o700); err != nil {
		t.Fatal(err)
	}
	// A helper port of its own: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	td := &testDaemon{t: t, Daemon: daemontest.Start(t, fmt.Sprintf(
		"\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nosascript = %q\nhelper_port = %d\n", macLine, db.Path(), osa, port))}
	cs := td.httpAgent(td.key(""), nil)

	var out mcpserver.DiagnoseOutput
	byName := func(line, name string) doctor.Check {
		for _, c := range out.Checks {
			if c.Line == line && c.Name == name {
				return c
			}
		}
		return doctor.Check{}
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		out = call[mcpserver.DiagnoseOutput](t, cs, "diagnose", map[string]any{"line": macLine})
		return byName(macLine, doctor.Daemon).Status == doctor.Fail
	})
	if c := byName(macLine, doctor.Daemon); out.OK || !strings.Contains(c.Detail, "Automation denied") || !strings.Contains(c.Fix, "tccutil reset AppleEvents") {
		t.Errorf("daemon check %+v (ok %v)", c, out.OK)
	}
	if c := byName(macLine, doctor.Helper); c.Status != doctor.Warn || !strings.Contains(c.Detail, "not connected") {
		t.Errorf("helper check %+v", c)
	}
	if len(out.Checks) != 2 || !slices.Contains(out.NotChecked, doctor.FullDiskAccess) || !slices.Contains(out.NotChecked, doctor.Automation) {
		t.Errorf("diagnose of one line: %+v", out)
	}

	all := call[mcpserver.DiagnoseOutput](t, cs, "diagnose", map[string]any{})
	out = all
	if c := byName(mainLine, doctor.Daemon); c.Status != doctor.Skip || all.OK {
		t.Errorf("a simulated line: %+v (ok %v)", c, all.OK)
	}
	if msg := toolError(t, td.httpAgent(td.key("", plainLine), nil), "diagnose", map[string]any{"line": macLine}); !strings.Contains(msg, "not one this key may use") {
		t.Errorf("another key's line: %s", msg)
	}
}
