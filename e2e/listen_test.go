package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// bgCLI is a command running in the background (listen): its output can be
// read while it runs; stop ends it as Ctrl-C does.
type bgCLI struct {
	t              *testing.T
	stdout, stderr testkit.LogBuffer
	cancel         context.CancelFunc
	done           chan int
	once           sync.Once
	code           int
}

// startCLI runs a blueline command against this daemon's configuration in
// the background, until stop (or the end of the test).
func (td *testDaemon) startCLI(t *testing.T, args ...string) *bgCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgCLI{t: t, cancel: cancel, done: make(chan int, 1)}
	args = append(args, "--config", td.cfgPath)
	go func() { b.done <- cli.Run(ctx, cli.Build{}, args, nil, &b.stdout, &b.stderr) }()
	t.Cleanup(func() { b.stop() })
	return b
}

// stop ends the command and returns its exit status.
func (b *bgCLI) stop() int {
	b.once.Do(func() {
		b.cancel()
		select {
		case b.code = <-b.done:
		case <-time.After(10 * time.Second):
			b.t.Errorf("the command did not end on cancel; stderr: %s", b.stderr.String())
		}
	})
	return b.code
}

// lines is what the command printed so far, one line each.
func (b *bgCLI) lines() []string {
	return strings.FieldsFunc(b.stdout.String(), func(r rune) bool { return r == '\n' })
}

// waitLines waits for n lines on stdout and returns them.
func (b *bgCLI) waitLines(n int) []string {
	b.t.Helper()
	testkit.Eventually(b.t, 10*time.Second, func() bool { return len(b.lines()) >= n })
	return b.lines()
}

var generatedSecret = regexp.MustCompile(`generated secret: (\S+)`)

// secret is the secret listen said it generated.
func (b *bgCLI) secret() string {
	b.t.Helper()
	var m []string
	testkit.Eventually(b.t, 10*time.Second, func() bool {
		m = generatedSecret.FindStringSubmatch(b.stderr.String())
		return m != nil
	})
	return m[1]
}

// localReceiver is a plain-HTTP loopback server for listen to forward to,
// answering 204 (or as answer says).
func localReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request) int) *apitest.Receiver {
	return apitest.NewReceiver(t, false, answer)
}

// react makes alice tap back on a message.
func (td *testDaemon) react(line, from, msgID, typ string) {
	td.t.Helper()
	td.mustCLI("sim", "reaction", "--line", line, "--from", from, "--message", msgID, "--type", typ)
}

// listen forwards each event as the daemon's webhook delivers it: the same
// data and headers, signed with the secret it printed, the timestamp being
// the time of signing, and says so on one line per event.
func TestListenForwardsAsWebhooks(t *testing.T) {
	real := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, real, ""))
	key := td.key()
	td.register(key, mainLine, real, "message.received", "reaction.added")
	local := localReceiver(t, nil)

	l := td.startCLI(t, "listen", "--forward-to", local.Server.URL+"/hook", "--event", "message.received", "--event", "reaction.added")
	secret := l.secret()
	local.SetSecret(secret)
	msg := td.inbound(mainLine, alice, "hello <you> & co")
	td.react(mainLine, alice, msg["id"].(string), "love")

	fwd := waitHooks(t, local, 2)
	delivered := real.waitRequests(2)
	for i, want := range []string{"message.received", "reaction.added"} {
		f := fwd[i]
		if f.Err != nil {
			t.Fatalf("forward %d: %v", i, f.Err)
		}
		ev, err := client.VerifyWebhook(secret, f.Header, f.Raw, 0, time.Now())
		if err != nil {
			t.Fatalf("forward %d does not verify: %v", i, err)
		}
		if ev.Type != want || !strings.HasPrefix(ev.DeliveryID, "evt_") || f.Header.Get(client.HeaderDeliveryID) != ev.DeliveryID {
			t.Errorf("forward %d: event %q, delivery %q (header %q); want %s with an evt_ ID", i, ev.Type, ev.DeliveryID, f.Header.Get(client.HeaderDeliveryID), want)
		}
		// The same body as the daemon's delivery of the event, but for the
		// delivery ID and the timestamp.
		j := slices.IndexFunc(delivered, func(h received) bool { return h.Event() == want })
		if j < 0 {
			t.Fatalf("no %s delivered by the daemon", want)
		}
		d := delivered[j]
		if !reflect.DeepEqual(f.Data(), d.Data()) {
			t.Errorf("%s: forwarded data %v\ndelivered data %v", want, f.Data(), d.Data())
		}
		if keys(f.Body) != keys(d.Body) {
			t.Errorf("%s: forwarded fields %s, delivered %s", want, keys(f.Body), keys(d.Body))
		}
		if names(f.Header) != names(d.Header) {
			t.Errorf("%s: forwarded headers %s, delivered %s", want, names(f.Header), names(d.Header))
		}
		for _, h := range []string{"Content-Type", "User-Agent"} {
			if f.Header.Get(h) != d.Header.Get(h) {
				t.Errorf("%s: %s %q, delivered %q", want, h, f.Header.Get(h), d.Header.Get(h))
			}
		}
	}
	lines := l.waitLines(2)
	for i, want := range []string{"message.received", "reaction.added"} {
		if !strings.Contains(lines[i], "  "+want+"  "+fwd[i].DeliveryID()+"  204  ") {
			t.Errorf("line %d: %q; want %s, its delivery ID and 204", i, lines[i], want)
		}
	}
	if code := l.stop(); code != 0 {
		t.Errorf("listen ended with %d on cancel; stderr %s", code, l.stderr.String())
	}
}

// waitHooks waits for n requests on a receiver.
func waitHooks(t *testing.T, rc *apitest.Receiver, n int) []received {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool { return len(rc.Requests()) >= n })
	return rc.Requests()
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func names(h http.Header) string {
	var ks []string
	for k := range h {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// --event and --line keep only those events: the stream is in order, so
// once the one kept has come, those before it were left out.
func TestListenFilters(t *testing.T) {
	td := startTestDaemon(t, "")
	local := localReceiver(t, nil)
	l := td.startCLI(t, "listen", "-f", local.Server.URL, "--secret", "whsec_mine", "--event", "reaction.added", "--line", mainLine, "--json")
	local.SetSecret("whsec_mine")
	m := td.inbound(mainLine, alice, "not a reaction")
	s := td.inbound(smsLine, bob, "another line")
	td.react(smsLine, bob, s["id"].(string), "like")
	td.react(mainLine, alice, m["id"].(string), "love")
	got := waitHooks(t, local, 1)
	if len(got) != 1 || got[0].Err != nil || got[0].Event() != "reaction.added" || got[0].Data()["line_handle"] != mainLine {
		t.Fatalf("forwarded %d: %+v", len(got), got)
	}
	// --json: one object per event.
	var out struct {
		Event  string `json:"event"`
		Status int    `json:"status"`
		OK     bool   `json:"ok"`
	}
	lines := l.waitLines(1)
	if err := json.Unmarshal([]byte(lines[0]), &out); err != nil || out.Status != 204 || !out.OK || out.Event != "reaction.added" {
		t.Errorf("--json line %q: %+v, %v", lines[0], out, err)
	}
	if strings.Contains(l.stderr.String(), "generated secret") {
		t.Errorf("a secret was generated despite --secret: %s", l.stderr.String())
	}

	// Without --forward-to, --json prints each event's body.
	p := td.startCLI(t, "listen", "--line", smsLine, "--json")
	lines = p.waitLines(2)
	var evs []api.Event
	for _, line := range lines {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	if evs[0].Type != "message.received" || evs[1].Type != "reaction.added" || !strings.Contains(string(evs[0].Data), "another line") {
		t.Errorf("printed %v", lines)
	}
}

// --since starts the stream at a time: events before it are not replayed,
// those after are; without it, the stream starts a minute ago.
func TestListenSince(t *testing.T) {
	td := startTestDaemon(t, "")
	td.inbound(mainLine, alice, "first")
	// The first event is stored before sim inbound answers, so it is older
	// than a millisecond after the answer: the clock, not a sleep, decides.
	answered := time.Now().UnixMilli()
	var since int64
	testkit.Eventually(t, time.Second, func() bool {
		since = time.Now().UnixMilli()
		return since > answered
	})
	td.inbound(mainLine, alice, "second")

	all := td.startCLI(t, "listen", "--json")
	later := td.startCLI(t, "listen", "--json", "--since", strconv.FormatInt(since, 10))
	td.inbound(mainLine, alice, "third") // the last: once it is in, so is the rest
	texts := func(b *bgCLI, n int) []string {
		var out []string
		for _, line := range b.waitLines(n) {
			var ev api.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatal(err)
			}
			m, err := ev.Message()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *m.Text)
		}
		return out
	}
	if got := texts(all, 3); !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Errorf("without --since: %v", got)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(later.stdout.String(), "third") })
	if got := texts(later, 2); !slices.Equal(got, []string{"second", "third"}) {
		t.Errorf("--since %d: %v", since, got)
	}
}

// A stream that breaks, the daemon restarting, is followed again after
// the last event forwarded: nothing lost, nothing repeated, and listen
// says so.
func TestListenResumesAfterRestart(t *testing.T) {
	td := startTestDaemon(t, "")
	local := localReceiver(t, nil)
	l := td.startCLI(t, "listen", "-f", local.Server.URL)
	td.inbound(mainLine, alice, "before")
	waitHooks(t, local, 1)

	td.stop()
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(l.stderr.String(), "the event stream broke") })
	td.start()
	td.inbound(mainLine, alice, "during") // likely before listen is back: it must not be lost
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(l.stderr.String(), "the event stream is back") })
	td.inbound(mainLine, alice, "after")
	got := waitHooks(t, local, 3)
	var texts, ids []string
	for _, h := range got {
		texts = append(texts, h.Data()["text"].(string))
		ids = append(ids, h.DeliveryID())
	}
	if !slices.Equal(texts, []string{"before", "during", "after"}) {
		t.Errorf("forwarded %v", texts)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Errorf("delivery IDs repeat: %v", ids)
	}
	if n := strings.Count(l.stderr.String(), "the event stream broke"); n != 1 {
		t.Errorf("said it broke %d times: %s", n, l.stderr.String())
	}
}

// Over the network, listen uses --base-url and $BLUELINE_API_KEY; a key
// the API refuses ends it with the API's message.
func TestListenRemote(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key("--lines", mainLine)
	local := localReceiver(t, nil)

	t.Setenv("BLUELINE_API_KEY", key)
	l := td.startCLI(t, "listen", "-f", local.Server.URL, "--base-url", td.base)
	secret := l.secret()
	local.SetSecret(secret)
	td.inbound(smsLine, bob, "not this key's line")
	td.inbound(mainLine, alice, "over the network")
	got := waitHooks(t, local, 1)
	if got[0].Err != nil || got[0].Data()["text"] != "over the network" {
		t.Errorf("forwarded %s (%v)", got[0].Raw, got[0].Err)
	}
	if _, err := client.VerifyWebhook(secret, got[0].Header, got[0].Raw, 0, time.Now()); err != nil {
		t.Error(err)
	}

	t.Setenv("BLUELINE_API_KEY", "sk_live_"+strings.Repeat("x", 40))
	out, errOut, code := td.cli("listen", "-f", local.Server.URL, "--base-url", td.base)
	if code != 1 || !strings.Contains(errOut, "(invalid_api_key)") {
		t.Errorf("a bad key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A local server that answers other than 2xx is reported on the event's
// line, and listen goes on.
func TestListenReportsReceiverErrors(t *testing.T) {
	td := startTestDaemon(t, "")
	local := localReceiver(t, apitest.Answers(t, 500))
	l := td.startCLI(t, "listen", "-f", local.Server.URL)
	td.inbound(mainLine, alice, "one")
	td.inbound(mainLine, alice, "two")
	lines := l.waitLines(2)
	if !strings.Contains(lines[0], "  500  ") || !strings.Contains(lines[0], "HTTP 500") || !strings.Contains(lines[1], "  204  ") {
		t.Errorf("lines %q", lines)
	}
}

// On the host, the operator's listen does not follow the sandbox (the
// API keeps each sandbox chat's events to its owner): it says so at the
// start, and not when an owner's listen, or one of other lines only, does.
func TestListenSaysTheSandboxIsLeftOut(t *testing.T) {
	td := startTestDaemon(t, "")
	leftOut := "listen: the sandbox line " + daemontest.SandboxLine + " is left out: its events are its owners'; --owner NAME follows one owner's sandbox\n"
	for _, c := range []struct {
		args []string
		says bool
	}{
		{nil, true},
		{[]string{"--line", daemontest.SandboxLine}, true},
		{[]string{"--owner", "ann"}, false},
		{[]string{"--line", mainLine}, false},
	} {
		l := td.startCLI(t, append([]string{"listen"}, c.args...)...)
		testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(l.stderr.String(), "listen: following the events") })
		if got := strings.Contains(l.stderr.String(), leftOut); got != c.says {
			t.Errorf("listen %v says the sandbox is left out: %v, want %v\n%s", c.args, got, c.says, l.stderr.String())
		}
		l.stop()
	}
}
