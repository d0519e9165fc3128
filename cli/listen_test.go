package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// streamRaw is an event body as GET /v1/events sends it, with characters
// that JSON escapes.
const streamRaw = `{"event":"message.received","data":{"id":"msg_1","text":"a \u003cb\u003e \u0026 c ✓","attachments":[],"line_handle":"+15550000001"},"timestamp":1700000000000,"delivery_id":"evt_1"}`

// streamEvent is streamRaw as the client yields it.
func streamEvent(t *testing.T) client.StreamedEvent {
	t.Helper()
	ev := client.StreamedEvent{Raw: []byte(streamRaw), Seq: 7}
	if err := json.Unmarshal(ev.Raw, &ev.Event); err != nil {
		t.Fatal(err)
	}
	return ev
}

// A forward is the stream's body, byte for byte, with the signing time as
// its timestamp, signed and headed as the daemon's deliveries are.
func TestForwardSignsTheStreamsBody(t *testing.T) {
	type got struct {
		header http.Header
		body   []byte
	}
	reqs := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs <- got{r.Header.Clone(), b}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	var out bytes.Buffer
	l := &listener{a: &app{stdout: &out, stderr: io.Discard}, forwardTo: srv.URL + "/hook", secret: "whsec_test", http: srv.Client()}
	l.forward(context.Background(), streamEvent(t))
	r := <-reqs

	ts := r.header.Get(client.HeaderTimestamp)
	want := strings.Replace(streamRaw, `"timestamp":1700000000000`, `"timestamp":`+ts, 1)
	if string(r.body) != want {
		t.Errorf("forwarded body\n%s\nwant\n%s", r.body, want)
	}
	if _, err := client.VerifyWebhook("whsec_test", r.header, r.body, 0, time.Now()); err != nil {
		t.Errorf("signature: %v", err)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "Blueline-Webhooks/1", client.HeaderDeliveryID: "evt_1",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	line := out.String()
	for _, want := range []string{"message.received", "evt_1", "  202  "} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q has no %q", line, want)
		}
	}
}

// A local server that is down, or answers other than 2xx, is reported on
// the event's line; with --json, as one object.
func TestForwardReportsFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such route", http.StatusNotFound)
	}))
	defer srv.Close()

	for _, c := range []struct {
		url, want string
		status    int
	}{
		{down, "connection refused", 0},
		{srv.URL, "HTTP 404: no such route", 404},
	} {
		var out bytes.Buffer
		l := &listener{a: &app{stdout: &out, stderr: io.Discard}, json: true, forwardTo: c.url, secret: "s", http: &http.Client{Timeout: 5 * time.Second}}
		l.forward(context.Background(), streamEvent(t))
		var f forwarded
		if err := json.Unmarshal(out.Bytes(), &f); err != nil {
			t.Fatalf("%q: %v", out.String(), err)
		}
		if f.OK || f.Status != c.status || !strings.Contains(f.Error, c.want) || f.DeliveryID != "evt_1" || f.Seq != 7 || f.Event != "message.received" {
			t.Errorf("forward to %s: %+v; want status %d and %q", c.url, f, c.status, c.want)
		}
	}
}

func TestListenUsageErrors(t *testing.T) {
	t.Setenv("BLUELINE_CONFIG", "")
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"listen", "--since", "yesterday"}, `--since is a time in Unix milliseconds, not "yesterday"`},
		{[]string{"listen", "-f", "localhost:3000"}, "is not an http:// or https:// URL"},
		{[]string{"listen", "--base-url", "http://127.0.0.1:1"}, "--base-url needs an API key in $BLUELINE_API_KEY"},
		{[]string{"listen", "--base-url", "http://127.0.0.1:1", "--owner", "me"}, "--owner is for the host"},
		{[]string{"listen", "now"}, `listen takes no argument "now"`},
	} {
		out, errOut, code := runCLI(t, "", c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.HasSuffix(errOut, "\nRun 'blueline listen --help' for usage.\n") || strings.Contains(errOut, "Usage:") {
			t.Errorf("blueline %s: exit %d, stdout %q, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
}

// The human line of an event says who and what.
func TestEventSummary(t *testing.T) {
	ev := streamEvent(t).Event
	if got := eventSummary(ev); got != "  a <b> & c ✓" && !strings.Contains(got, "a <b> & c ✓") {
		t.Errorf("summary %q", got)
	}
	r := api.Event{Type: "reaction.added", Data: json.RawMessage(`{"id":"rxn_1","message_id":"msg_1","type":"love","sender":"+1555","added":true}`)}
	if got, want := eventSummary(r), "+1555  added love on msg_1"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got := strconv.Quote(eventSummary(api.Event{Type: "chat.updated", Data: json.RawMessage(`{"x":1}`)})); got != strconv.Quote(`{"x":1}`) {
		t.Errorf("summary %s", got)
	}
}
