package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// streamed collects what a key's stream yields until n events came or the
// time is up.
func (e *apiEnv) streamed(key string, p client.EventStreamParams, n int) []client.StreamedEvent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []client.StreamedEvent
	for ev, err := range client.New(e.base, client.WithAPIKey(key)).Events.Stream(ctx, p) {
		if err != nil {
			e.t.Fatalf("stream: %v", err)
		}
		got = append(got, ev)
		if len(got) == n {
			break
		}
	}
	return got
}

func names(evs []client.StreamedEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// A stream follows the key's lines, the events asked for (the reference's
// four by default) and the sandbox's owner rule.
func TestEventStreamFilters(t *testing.T) {
	e := newAPI(t, defaultOptions())
	since := time.Now()
	e.inbound(smsLine, alice, "on a line the key may not use")
	m := e.inbound(mainLine, alice, "hello")
	if _, _, err := e.recv.RecordUpdate(context.Background(), bridge.MessageUpdate{Line: mainLine, GUID: m.GUID, EditedAt: time.Now(), Text: ptr("hello, edited")}); err != nil {
		t.Fatal(err)
	}
	last := e.inbound(mainLine, bob, "last")

	key := e.key(keyOpts{Scopes: []string{"webhooks:read", "messages:read"}, Lines: []string{mainLine}})
	got := e.streamed(key, client.EventStreamParams{Since: since}, 2)
	if len(got) != 2 || got[0].Type != api.EventMessageReceived || got[1].Type != api.EventMessageReceived {
		t.Fatalf("default events: %v, want the two messages (no edit, nothing of the SMS line)", names(got))
	}
	if msg, _ := got[1].Message(); msg.ID != last.ID || msg.LineHandle != mainLine {
		t.Errorf("second event: %+v", msg)
	}
	edits := e.streamed(key, client.EventStreamParams{Since: since, Events: []string{api.EventMessageEdited}}, 1)
	if len(edits) != 1 || edits[0].Type != api.EventMessageEdited {
		t.Errorf("asked for edits: %v", names(edits))
	}

	// The sandbox: each owner sees the events of their own sandbox only.
	ann, bea := e.key(keyOpts{Owner: "ann"}), e.key(keyOpts{Owner: "bea"})
	e.activateSandbox(ann, alice)
	e.activateSandbox(bea, bob)
	// Events are stamped to the millisecond, and so is since: start on a
	// millisecond after the activations' own.
	activated := time.Now()
	testkit.Eventually(t, time.Second, func() bool { return time.Now().UnixMilli() > activated.UnixMilli() })
	start := time.Now()
	e.inbound(sandboxLine, alice, "to ann's sandbox")
	e.inbound(sandboxLine, bob, "to bea's sandbox")
	for owner, want := range map[string]string{ann: "to ann's sandbox", bea: "to bea's sandbox"} {
		evs := e.streamed(owner, client.EventStreamParams{Since: start, Lines: []string{sandboxLine}}, 1)
		msg, _ := evs[0].Message()
		if deref(msg.Text) != want {
			t.Errorf("an owner's sandbox stream begins with %q, want %q", deref(msg.Text), want)
		}
		// Nothing of the other owner's after it: the next event is
		// the owner's own next one.
		e.inbound(sandboxLine, map[string]string{ann: alice, bea: bob}[owner], "again")
		evs = e.streamed(owner, client.EventStreamParams{After: evs[0].Seq, Lines: []string{sandboxLine}}, 1)
		if msg, _ := evs[0].Message(); deref(msg.Text) != "again" {
			t.Errorf("after its first event, an owner's stream gives %q, want its own %q", deref(msg.Text), "again")
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Refusals answer in the API's shape before the stream starts; a stream
// resumes after Last-Event-ID.
func TestEventStreamParameters(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{Lines: []string{mainLine}})
	for _, c := range []struct {
		query, code, param string
		status             int
	}{
		{"event=message.nope", "invalid_parameter", "event", 400},
		{"line=%2B15559999999", "line_not_found", "line", 404},
		{"line=%2B15550000002", "line_not_accessible", "", 403},
		{"since=-1", "invalid_parameter", "since", 400},
		{"after=x", "invalid_parameter", "after", 400},
	} {
		r := e.call("GET", "/v1/events?"+c.query, key, nil)
		if r.Status != c.status || (c.code != "invalid_parameter" && r.ErrCode() != c.code) || r.ErrParam() != c.param {
			t.Errorf("%s: %d %s (param %q), want %d %s (param %q)", c.query, r.Status, r.ErrCode(), r.ErrParam(), c.status, c.code, c.param)
		}
	}
	if r := e.call("GET", "/v1/events", e.key(keyOpts{Scopes: []string{"messages:read"}}), nil); r.Status != 403 || r.ErrCode() != "insufficient_scope" {
		t.Errorf("without webhooks:read: %d %s", r.Status, r.ErrCode())
	}

	first := e.inbound(mainLine, alice, "one")
	second := e.inbound(mainLine, alice, "two")
	evs := e.streamed(key, client.EventStreamParams{Since: time.UnixMilli(0)}, 2)
	req, _ := http.NewRequest("GET", e.base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Last-Event-ID", itoa(evs[0].Seq))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %q", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var data string
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = d
			break
		}
	}
	if strings.Contains(data, first.ID) || !strings.Contains(data, second.ID) {
		t.Errorf("resumed after the first event, the stream's first event is %s", data)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
