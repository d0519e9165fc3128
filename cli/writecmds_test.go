package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/daemontest"
)

// send --attach uploads a file (saying so on stderr) or takes a file_ ID
// as is; react, typing and read print what they queued, headed by what
// they did; an advanced feature on a line without it fails.
func TestSendAttachReactTypingRead(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	line, contact := daemontest.MainLine, daemontest.Alice
	msg := d.Inbound(line, contact, "hi")
	d.Inbound(daemontest.PlainLine, contact, "hi")

	path := filepath.Join(t.TempDir(), "cat.png")
	if err := os.WriteFile(path, []byte("\x89PNG\r\n\x1a\nnot really"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cliOn(d, "send", contact, "look", "--from", line, "--attach", path)
	if code != 0 || !strings.HasPrefix(out, "Queued to "+contact+" via "+line+"\n") ||
		!strings.HasPrefix(errOut, "uploaded cat.png as file_") || !strings.Contains(errOut, "image/png") {
		t.Fatalf("send --attach PATH: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	id := strings.Fields(strings.TrimPrefix(errOut, "uploaded cat.png as "))[0]
	out, errOut, code = cliOn(d, "send", contact, "again", "--from", line, "--attach", id)
	if code != 0 || errOut != "" || !strings.Contains(out, "Queued to ") {
		t.Errorf("send --attach %s: exit %d, stdout %q, stderr %q; want no upload", id, code, out, errOut)
	}

	if out := mustCLI(t, d, "react", msg.ID, "love", "--to", contact, "--from", line); !strings.HasPrefix(out, "Reacted love on "+msg.ID+"\n    id ") {
		t.Errorf("react: %q", out)
	}
	if out := mustCLI(t, d, "react", msg.ID, "love", "--to", contact, "--from", line, "--remove"); !strings.HasPrefix(out, "Removed love on "+msg.ID+"\n") {
		t.Errorf("react --remove: %q", out)
	}
	if out := mustCLI(t, d, "typing", contact, "--from", line); !strings.HasPrefix(out, "Typing to "+contact+" via "+line+"\n") {
		t.Errorf("typing: %q", out)
	}
	if out := mustCLI(t, d, "typing", contact, "--from", line, "--off"); !strings.HasPrefix(out, "Stopped typing to "+contact+" via "+line+"\n") {
		t.Errorf("typing --off: %q", out)
	}
	var typing struct{ Data []any }
	decodeJSON(t, "typing list --json", mustCLI(t, d, "typing", "list", "--line", line, "--chat", contact, "--json"), &typing)
	if typing.Data == nil {
		t.Errorf("typing list --json: data is null, want a list")
	}
	if out := mustCLI(t, d, "read", contact, "--from", line); !strings.HasPrefix(out, "Sent a read receipt to "+contact+" via "+line+"\n") {
		t.Errorf("read: %q", out)
	}
	if out, errOut, code := cliOn(d, "typing", contact, "--from", daemontest.PlainLine); code != 1 || out != "" || !strings.Contains(errOut, "advanced_features_required") {
		t.Errorf("typing from a line without advanced features: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
}

// lines guard shows one row per line: handle, on or off, pace, today's
// counts; --json lists the lines each with its guard.
func TestLinesGuard(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	d.Inbound(daemontest.MainLine, daemontest.Alice, "hi")

	out := mustCLI(t, d, "lines", "guard")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 4 {
		t.Fatalf("lines guard: want 4 rows:\n%s", out)
	}
	found := false
	for _, r := range rows {
		f := strings.Split(r, "\t")
		if len(f) != 7 || (f[1] != "on" && f[1] != "off") {
			t.Errorf("lines guard row %q: want handle, on|off, pace, sent, received, cold, unanswered", r)
			continue
		}
		if f[0] == daemontest.MainLine {
			found = true
			if f[4] != "1" {
				t.Errorf("lines guard, main line: received %q, want 1", f[4])
			}
		}
	}
	if !found {
		t.Errorf("lines guard has no row for %s:\n%s", daemontest.MainLine, out)
	}
	var page struct {
		Data []struct {
			Handle string
			Guard  *struct{ Enabled bool }
		}
	}
	decodeJSON(t, "lines guard --json", mustCLI(t, d, "lines", "guard", "--json"), &page)
	if len(page.Data) != 4 || page.Data[0].Guard == nil {
		t.Errorf("lines guard --json: %+v; want 4 lines with a guard", page.Data)
	}
}
