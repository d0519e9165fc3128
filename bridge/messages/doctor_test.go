package messages

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// doctor's scripts through a stand-in osascript: each gets its timeout as
// its only argument, the accounts come back one a line, and macOS refusing
// Apple events is ErrAutomationDenied.
func TestDoctorScripts(t *testing.T) {
	program, dir := standIn(t, `cat > "$DIR/stdin"
printf '%s\0' "$@" > "$DIR/args"
case "$(cat "$DIR/stdin")" in
*"every account"*) printf 'A1\tiMessage\tE:owner@example.com\ttrue\tconnected\nA2\tSMS\t+15550000009\tfalse\t\n\n' ;;
esac`)
	r := Osascript{Path: program}
	if err := CheckAutomation(t.Context(), r, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	script, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if !strings.Contains(string(script), `tell application "Messages"`) || string(args) != "-\x003\x00" {
		t.Errorf("automation script %q with argv %q", script, args)
	}
	accts, err := Accounts(t.Context(), r, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []Account{
		{ID: "A1", Service: "iMessage", Description: "E:owner@example.com", Enabled: true, Connection: "connected"},
		{ID: "A2", Service: "SMS", Description: "+15550000009"},
	}
	if !reflect.DeepEqual(accts, want) {
		t.Errorf("accounts %+v, want %+v", accts, want)
	}

	denied, _ := standIn(t, `cat > /dev/null
echo '0:110: execution error: Not authorized to send Apple events to Messages. (-1743)' >&2
exit 1`)
	for name, err := range map[string]error{
		"automation": CheckAutomation(t.Context(), Osascript{Path: denied}, 5*time.Second),
		"accounts":   func() error { _, err := Accounts(t.Context(), Osascript{Path: denied}, 5*time.Second); return err }(),
	} {
		if !errors.Is(err, ErrAutomationDenied) {
			t.Errorf("%s: %v, want ErrAutomationDenied", name, err)
		}
	}
}

// HealthProblems picks out of Health's summary what stops a line.
func TestHealthProblems(t *testing.T) {
	for _, c := range []struct {
		h    Health
		want []string
	}{
		{Health{ChatDB: "readable", Automation: "granted", Messages: "running", Helper: "connected"}, nil},
		{Health{ChatDB: "readable", Automation: "not used yet", Messages: "not running", Helper: "not connected", HistoryRows: 3}, nil},
		{Health{ChatDB: "not readable (see the log)", Automation: "denied", Messages: "not answering", Helper: "not connected"},
			[]string{"chat.db not readable (see the log)", "Automation denied", "Messages not answering"}},
		{Health{ChatDB: "readable", Automation: "permission pending", Messages: "not seen yet", Helper: "not connected"},
			[]string{"Automation permission pending"}},
	} {
		if got := HealthProblems(c.h.String()); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q, want %q", c.h.String(), got, c.want)
		}
	}
}
