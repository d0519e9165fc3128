package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// What a contact or a webhook's receiver can put in front of the operator:
// ESC[2J clears the screen, U+009B is a one-character CSI, a bare CR
// lets the rest of a line overwrite its start, U+202E reverses what
// follows ("gpj.exe" reads as "exe.jpg"), BEL rings.
const (
	hostileText   = "hi \x1b[2J\u009b31m\rgotcha \u202egpj.exe"
	hostileShown  = `hi \x1b[2J\u009b31m\rgotcha \u202egpj.exe`
	hostileAnswer = "nope \x1b]0;pwned\x07 \u009b2J\rok \u202eevil"
	answerShown   = `nope \x1b]0;pwned\x07 \u009b2J\rok \u202eevil`
)

// noControls fails the test when out holds a character printable escapes.
func noControls(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range []string{"\x1b", "\x07", "\r", "\u009b", "\u202e"} {
		if strings.Contains(out, c) {
			t.Errorf("%s prints %q raw:\n%q", what, c, out)
		}
	}
}

// hostileDaemon is a daemon whose webhooks may reach a local receiver that
// answers every delivery 500 with hostileAnswer; it returns the daemon and
// the receiver's URL.
func hostileDaemon(t *testing.T) (*daemontest.Daemon, string) {
	t.Helper()
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, hostileAnswer)
	}))
	t.Cleanup(rc.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return daemontest.Start(t, fmt.Sprintf("[webhooks]\nallow_private_networks = true\nca_file = %q\n", ca)), rc.URL + "/hook"
}

// cliOn runs a command against d's configuration, through Run.
func cliOn(d *daemontest.Daemon, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), Build{}, append(args, "--config", d.ConfigPath()), nil, &out, &errOut)
	return out.String(), errOut.String(), code
}

func mustCLI(t *testing.T, d *daemontest.Daemon, args ...string) string {
	t.Helper()
	out, errOut, code := cliOn(d, args...)
	if code != 0 {
		t.Fatalf("blueline %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func decodeJSON(t *testing.T, what, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
	}
}

// A contact's text and a webhook receiver's answer reach the
// screen with their controls shown as escapes, by messages list and get,
// listen, webhooks test and webhooks deliveries, piped as on a terminal;
// --json gives them exactly.
func TestHostileTextPrintedEscaped(t *testing.T) {
	d, hookURL := hostileDaemon(t)
	line, contact := daemontest.MainLine, daemontest.Alice

	var hook struct{ ID string }
	decodeJSON(t, "webhooks create", mustCLI(t, d, "webhooks", "create", "--url", hookURL, "--event", "message.received", "--line", line, "--json"), &hook)
	var msg struct{ ID string }
	decodeJSON(t, "sim inbound", mustCLI(t, d, "sim", "inbound", "--line", line, "--from", contact, "--text", hostileText), &msg)

	t.Run("messages list", func(t *testing.T) {
		out := mustCLI(t, d, "messages", "list", "--line", line, "--chat", contact)
		noControls(t, "messages list", out)
		if !strings.Contains(out, msg.ID+"\t") || !strings.Contains(out, "\t"+hostileShown+"\n") {
			t.Errorf("messages list does not show the text escaped, %q:\n%s", hostileShown, out)
		}
		var page struct{ Data []struct{ ID, Text string } }
		decodeJSON(t, "messages list --json", mustCLI(t, d, "messages", "list", "--line", line, "--chat", contact, "--json"), &page)
		if len(page.Data) != 1 || page.Data[0].Text != hostileText {
			t.Errorf("messages list --json: %+v; want the text exactly", page.Data)
		}
	})

	t.Run("messages get", func(t *testing.T) {
		out := mustCLI(t, d, "messages", "get", msg.ID, "--line", line, "--chat", contact)
		noControls(t, "messages get", out)
		if !strings.Contains(out, "  "+hostileShown+"\n") {
			t.Errorf("messages get does not show the text escaped:\n%s", out)
		}
	})

	t.Run("listen", func(t *testing.T) {
		out := listenUntil(t, d, 1, "listen", "--event", "message.received")
		noControls(t, "listen", out)
		if !strings.HasSuffix(out, "  message.received  "+contact+"  "+hostileShown+"\n") {
			t.Errorf("listen does not show the text escaped:\n%s", out)
		}
		var ev struct{ Data struct{ Text string } }
		decodeJSON(t, "listen --json", strings.SplitN(listenUntil(t, d, 1, "listen", "--event", "message.received", "--json"), "\n", 2)[0], &ev)
		if ev.Data.Text != hostileText {
			t.Errorf("listen --json: text %q, want %q", ev.Data.Text, hostileText)
		}
	})

	t.Run("webhooks test", func(t *testing.T) {
		out, errOut, code := cliOn(d, "webhooks", "test", hook.ID)
		noControls(t, "webhooks test", out+errOut)
		if code != 1 || !strings.Contains(out, "\t500\t") || !strings.Contains(out, answerShown) || !strings.Contains(errOut, answerShown) {
			t.Errorf("webhooks test: exit %d, stdout %q, stderr %q; want 1 and the answer escaped", code, out, errOut)
		}
		out, _, _ = cliOn(d, "webhooks", "test", hook.ID, "--json")
		var res struct{ Body string }
		decodeJSON(t, "webhooks test --json", out, &res)
		if res.Body != hostileAnswer {
			t.Errorf("webhooks test --json: body %q, want %q", res.Body, hostileAnswer)
		}
	})

	t.Run("webhooks deliveries", func(t *testing.T) {
		var attempts []struct{ Error string }
		testkit.Eventually(t, 10*time.Second, func() bool {
			decodeJSON(t, "webhooks deliveries --json", mustCLI(t, d, "webhooks", "deliveries", "--webhook", hook.ID, "--json"), &attempts)
			return len(attempts) > 0
		})
		if want := "HTTP 500: " + hostileAnswer; attempts[0].Error != want {
			t.Errorf("webhooks deliveries --json: error %q, want %q", attempts[0].Error, want)
		}
		out := mustCLI(t, d, "webhooks", "deliveries", "--webhook", hook.ID)
		noControls(t, "webhooks deliveries", out)
		if !strings.Contains(out, "\tHTTP 500: "+answerShown+"\n") {
			t.Errorf("webhooks deliveries does not show the answer escaped:\n%s", out)
		}
	})
}

// listenUntil runs listen (args) until it has printed n lines, and
// returns them.
func listenUntil(t *testing.T, d *daemontest.Daemon, n int, args ...string) string {
	t.Helper()
	var out, errOut testkit.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Run(ctx, Build{}, append(args, "--config", d.ConfigPath()), nil, &out, &errOut) }()
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Count(out.String(), "\n") >= n })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("listen did not end on cancel; stderr: %s", errOut.String())
	}
	return out.String()
}

// The simulator refuses a contact whose handle hides characters, holds
// controls or mixes scripts, as the API does, naming the forms a handle
// takes; the error reaches the terminal escaped.
func TestSimRefusesHostileHandles(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	for _, c := range []struct{ from, why string }{
		{"ja\u200bne@example.com", `"ja\u200bne@example.com" is not a handle: it contains U+200B, an invisible character`},
		{"\u202emoc.elpmaxe@enaj", `U+202E, a bidirectional control`},
		{"jane\u009b@example.com", `U+009B, a control character`},
		{"+1555\x1b0102000", `U+001B, a control character`},
		{"jane@pаypal.com", `mixes scripts`},
	} {
		out, errOut, code := cliOn(d, "sim", "inbound", "--line", daemontest.MainLine, "--from", c.from, "--text", "hi")
		noControls(t, "sim inbound", errOut)
		if code != 1 || out != "" || !strings.Contains(errOut, c.why) || !strings.Contains(errOut, "E.164") || !strings.Contains(errOut, "invalid_parameter_value") {
			t.Errorf("sim inbound --from %q: exit %d, stdout %q, stderr %q; want 1 and %q", c.from, code, out, errOut, c.why)
		}
	}
}
