package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/doctor"
	"github.com/blueline-app/blueline/testkit"
)

// doctorLine is the Messages line of the doctor's tests, on a fixture
// chat.db.
const doctorLine = "+15550000009"

// Stand-ins for osascript, the edge we cannot run here: one that plays a
// Messages signed in to an iMessage and an SMS account, and one for a Mac
// that refuses this program Apple events to Messages.
const (
	answeringMessages = `#!/bin/sh
script=$(cat)
case "$script" in
*"every account"*) printf 'A1\tiMessage\tE:owner@example.com\ttrue\tconnected\nA2\tSMS\t+15550000009\ttrue\tconnected\n' ;;
esac
exit 0
`
	automationDenied = `#!/bin/sh
cat > /dev/null
echo '0:110: execution error: Not authorized to send Apple events to Messages. (-1743)' >&2
exit 1
`
)

// doctorMac is a Mac's Messages for doctor: a fixture chat.db holding a
// message, and, unless osa is "", a stand-in osascript with that script.
type doctorMac struct {
	db  *chatdbtest.Fixture
	osa string // "" for the default, /usr/bin/osascript
}

func newDoctorMac(t *testing.T, osa string) *doctorMac {
	t.Helper()
	m := &doctorMac{db: chatdbtest.New(t, t.TempDir())}
	chat := m.db.DirectChat("iMessage", "+15551110001")
	m.db.Insert(chatdbtest.Msg{Chat: chat, From: "+15551110001", Text: "hello"})
	if osa != "" {
		m.osa = filepath.Join(t.TempDir(), "osascript")
		if err := os.WriteFile(m.osa, []byte(osa), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// lines is the [[lines]] table of the Mac's line, with a helper port of
// its own (the default is the same for every test of this user).
func (m *doctorMac) lines(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := fmt.Sprintf("\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nhelper_port = %d\n", doctorLine, m.db.Path(), port)
	if m.osa != "" {
		s += fmt.Sprintf("osascript = %q\n", m.osa)
	}
	return s
}

// doctorJSON runs doctor --json on the configuration at cfgPath.
func doctorJSON(t *testing.T, cfgPath string) (doctorReport, string, int) {
	t.Helper()
	out, errOut, code := runCLI(t, "", "doctor", "--config", cfgPath, "--json")
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json printed %q (stderr %q): %v", out, errOut, err)
	}
	return r, errOut, code
}

// statuses maps each check of the line (or the host, "") to its status.
func statuses(r doctorReport, line string) map[string]string {
	out := map[string]string{}
	for _, c := range r.Checks {
		if c.Line == line {
			out[c.Name] = c.Status
		}
	}
	return out
}

func check(t *testing.T, r doctorReport, line, name string) doctor.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Line == line && c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s of %q in %+v", name, line, r)
	return doctor.Check{}
}

// On Linux, with the daemon running a Messages line on a fixture chat.db:
// chat.db is readable, the Mac-only checks say "not on macOS" without
// failing, and doctor exits 0.
func TestDoctorOnLinux(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("the Mac-only checks run on a Mac")
	}
	mac := newDoctorMac(t, "")
	d := daemontest.Start(t, mac.lines(t))

	r, errOut, code := doctorJSON(t, d.ConfigPath())
	if code != 0 || !r.OK || errOut != "" {
		t.Fatalf("exit %d, ok %v, stderr %q: %+v", code, r.OK, errOut, r)
	}
	want := map[string]string{
		doctor.FullDiskAccess: doctor.OK, doctor.ChatDB: doctor.OK,
		doctor.Automation: doctor.Skip, doctor.MessagesPing: doctor.Skip, doctor.Account: doctor.Skip,
		doctor.Helper: doctor.Warn, doctor.Daemon: doctor.OK,
	}
	if got := statuses(r, doctorLine); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("checks %v, want %v", got, want)
	}
	if got := statuses(r, ""); fmt.Sprint(got) != fmt.Sprint(map[string]string{doctor.MacOSVersion: doctor.Skip}) {
		t.Errorf("host checks %v", got)
	}
	for _, name := range []string{doctor.MacOSVersion, doctor.Automation} {
		line := doctorLine
		if name == doctor.MacOSVersion {
			line = ""
		}
		if c := check(t, r, line, name); c.Detail != notOnMac {
			t.Errorf("%s: %q, want %q", name, c.Detail, notOnMac)
		}
	}
	db := check(t, r, doctorLine, doctor.ChatDB)
	if db.Info["path"] != mac.db.Path() || db.Info["last_rowid"] != float64(1) || db.Info["newest_date"] == nil || db.Info["inode"] == nil {
		t.Errorf("chat_db: %+v", db)
	}
	if c := check(t, r, doctorLine, doctor.Daemon); !strings.Contains(c.Detail, "running: chat.db readable") {
		t.Errorf("daemon: %+v", c)
	}
	if c := check(t, r, doctorLine, doctor.Helper); c.Info["connected"] != false || !strings.Contains(c.Fix, "helper bundle") {
		t.Errorf("helper: %+v", c)
	}

	// The same for people: one line per check, under its line.
	out, _, code := runCLI(t, "", "doctor", "--config", d.ConfigPath())
	for _, want := range []string{
		"host\n  skip  macos_version     not on macOS\n",
		"line " + doctorLine + "\n  ok    full_disk_access  " + mac.db.Path() + " can be read\n",
		"  skip  automation        not on macOS\n",
		"  warn  helper            not connected (optional)",
		"every check holds\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

// With a stand-in osascript, the Mac-only checks run through it: Messages
// answers the Automation check, the bridge's ping and the accounts script.
// No daemon runs: that check fails, with its fix, and doctor exits 1.
func TestDoctorWithStandInOsascript(t *testing.T) {
	mac := newDoctorMac(t, answeringMessages)
	cfgPath, _ := daemontest.WriteConfig(t, mac.lines(t))

	r, errOut, code := doctorJSON(t, cfgPath)
	if code != 1 || r.OK || !strings.Contains(errOut, "doctor: 1 of 8 checks failed") {
		t.Fatalf("exit %d, ok %v, stderr %q", code, r.OK, errOut)
	}
	want := map[string]string{
		doctor.FullDiskAccess: doctor.OK, doctor.ChatDB: doctor.OK,
		doctor.Automation: doctor.OK, doctor.MessagesPing: doctor.OK, doctor.Account: doctor.OK,
		doctor.Helper: doctor.Skip, doctor.Daemon: doctor.Fail,
	}
	if got := statuses(r, doctorLine); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("checks %v, want %v", got, want)
	}
	acct := check(t, r, doctorLine, doctor.Account)
	if !strings.Contains(acct.Detail, "iMessage E:owner@example.com (enabled, connected); SMS +15550000009 (enabled, connected)") {
		t.Errorf("account: %+v", acct)
	}
	if c := check(t, r, doctorLine, doctor.Daemon); !strings.Contains(c.Detail, "the daemon is not running (no answer on ") || !strings.Contains(c.Fix, "blueline start") {
		t.Errorf("daemon: %+v", c)
	}
}

// macOS refusing Apple events (-1743) fails the Automation check with its
// fix, and the checks that need it are skipped.
func TestDoctorAutomationDenied(t *testing.T) {
	mac := newDoctorMac(t, automationDenied)
	d := daemontest.Start(t, mac.lines(t))

	out, errOut, code := runCLI(t, "", "doctor", "--config", d.ConfigPath())
	if code != 1 || !strings.Contains(errOut, "checks failed") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"  FAIL  automation        macOS does not let this program control Messages (-1743)",
		"        fix: System Settings → Privacy & Security → Automation",
		"run `tccutil reset AppleEvents`",
		"  skip  messages_ping     needs Automation (above)\n",
		"  skip  account           needs Automation (above)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	r, _, _ := doctorJSON(t, d.ConfigPath())
	if c := check(t, r, doctorLine, doctor.Automation); c.Status != doctor.Fail || !strings.Contains(c.Fix, "tccutil reset AppleEvents") {
		t.Errorf("automation: %+v", c)
	}
}

func TestDoctorUsage(t *testing.T) {
	mac := newDoctorMac(t, answeringMessages)
	cfgPath, _ := daemontest.WriteConfig(t, mac.lines(t))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"doctor", "--minutes", "5"}, 2, "--minutes goes with --trace FILE"},
		{[]string{"doctor", "--trace", "x.jsonl", "--minutes", "0"}, 2, "--minutes must be more than 0"},
		{[]string{"doctor", "--line", "+15550000001"}, 2, `no line +15550000001 with bridge = "messages"`},
		{[]string{"doctor", "extra"}, 2, `doctor takes no argument "extra"`},
	} {
		_, errOut, code := runCLI(t, "", append(c.args, "--config", cfgPath)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("blueline %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
	// The simulated lines alone: nothing for doctor to check.
	sim, _ := daemontest.WriteConfig(t, "")
	if _, errOut, code := runCLI(t, "", "doctor", "--config", sim); code != 1 || !strings.Contains(errOut, `no line has bridge = "messages"`) {
		t.Errorf("no Messages line: exit %d, stderr %q", code, errOut)
	}
}

// doctor --trace records what Messages writes while it runs, in a file
// that replays into a fixture of the same shape; Ctrl-C (ctx) or --minutes
// ends it.
func TestDoctorTraceRoundTrip(t *testing.T) {
	mac := newDoctorMac(t, answeringMessages)
	cfgPath, _ := daemontest.WriteConfig(t, mac.lines(t))
	file := filepath.Join(t.TempDir(), "trace.jsonl")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out, errOut testkit.LogBuffer
	done := make(chan int, 1)
	go func() {
		e := env{getenv: os.Getenv, installedConfig: func() string { return "" }}
		done <- run(ctx, Build{}, []string{"doctor", "--config", cfgPath, "--trace", file}, nil, &out, &errOut, e)
	}()
	lines := func() []chatdb.TraceRecord {
		b, _ := os.ReadFile(file)
		var recs []chatdb.TraceRecord
		for l := range strings.Lines(string(b)) {
			var r chatdb.TraceRecord
			if json.Unmarshal([]byte(l), &r) == nil {
				recs = append(recs, r)
			}
		}
		return recs
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(lines()) > 0 })

	group := mac.db.GroupChat("iMessage", "Plans", "+15551110001", "+15551110002")
	_, asked := mac.db.Insert(chatdbtest.Msg{Chat: group, From: "+15551110002", Text: "dinner at 8?"})
	replyID, reply := mac.db.Insert(chatdbtest.Msg{Chat: group, Text: "yes!", IsSent: true})
	mac.db.MarkRead(asked, time.Now())
	mac.db.MarkDelivered(reply, time.Now())
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, r := range lines() {
			if r.Type == chatdb.TraceRow && r.Message.RowID == replyID && r.Message.Columns["is_delivered"].Int != nil &&
				*r.Message.Columns["is_delivered"].Int == 1 {
				return true
			}
		}
		return false
	})
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if !strings.Contains(out.String(), "wrote "+file+": 2 new rows") || !strings.Contains(out.String(), "nothing leaves this Mac unless you send it") {
		t.Errorf("stdout %q", out.String())
	}
	if !strings.Contains(errOut.String(), "doctor: recording the shape of what Messages writes to "+mac.db.Path()) {
		t.Errorf("stderr %q", errOut.String())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"dinner", "yes!", "Plans", "+15551110002", asked, reply} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the trace holds %q", secret)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trace file mode: %v %v", fi.Mode(), err)
	}

	replayed := chatdbtest.New(t, t.TempDir())
	res := replayed.Replay(bytes.NewReader(raw))
	if res.Inserts != 2 || len(res.Skipped) != 0 {
		t.Errorf("replayed %+v", res)
	}
	var n, fromMe, delivered, read, chats int
	if err := replayed.QueryRow(`SELECT count(*), sum(is_from_me), sum(is_delivered AND is_from_me), sum(is_read),
		(SELECT count(DISTINCT chat_id) FROM chat_message_join) FROM message`).Scan(&n, &fromMe, &delivered, &read, &chats); err != nil {
		t.Fatal(err)
	}
	if n != 2 || fromMe != 1 || delivered != 1 || read != 1 || chats != 1 {
		t.Errorf("replayed %d rows, %d of ours, %d delivered, %d read, in %d chats; want 2, 1, 1, 1, 1", n, fromMe, delivered, read, chats)
	}

	// --minutes ends a trace by itself.
	short := filepath.Join(t.TempDir(), "short.jsonl")
	if _, errOut, code := runCLI(t, "", "doctor", "--config", cfgPath, "--trace", short, "--minutes", "0.002"); code != 0 {
		t.Fatalf("--minutes 0.002: exit %d, stderr %q", code, errOut)
	}
	b, _ := os.ReadFile(short)
	if !strings.Contains(string(b), `"type":"end"`) {
		t.Errorf("short trace %q has no end record", b)
	}
}
