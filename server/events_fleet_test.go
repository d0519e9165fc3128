package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// eventLog is an event log of other nodes' events (a fleet's stream, as
// the daemon hands it over): positions 1, 2, …
type eventLog []storage.Event

func (l eventLog) EventsChanged() <-chan struct{} { return make(chan struct{}) }

func (l eventLog) Events(ctx context.Context, after uint64, max int) ([]storage.Event, error) {
	var out []storage.Event
	for _, e := range l {
		if e.Seq > after && len(out) < max {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l eventLog) EventsBefore(ctx context.Context, at int64) (uint64, error) { return 0, nil }

// In a fleet the stream reads the fleet's event log: a key that may use
// every line sees the events of lines of other nodes, named by the events'
// line handles, under the sandbox's owner rule as the event states it; a
// key restricted to lines sees none of them; positions are the log's.
func TestEventStreamOtherNodes(t *testing.T) {
	text := func(s string) *string { return &s }
	owner := func(s string) *string { return &s }
	now := time.Now().UnixMilli()
	msg := func(seq uint64, line, handle string, sandbox *string, body string) storage.Event {
		id := storage.NewID("evt_")
		return storage.Event{Seq: seq, ID: id, Name: api.EventMessageReceived, LineID: line, ChatID: "cht_x", At: now,
			LineHandle: handle, SandboxOwner: sandbox, EventSubject: storage.EventSubject{Message: &storage.Message{
				ID: storage.NewID("msg_"), ChatID: "cht_x", LineID: line, Sender: alice, Text: text(body), SentAt: now}}}
	}
	opts := defaultOptions()
	opts.Events = eventLog{
		msg(7, "ln_other", "+15550009001", nil, "on another node's line"),
		msg(8, "ln_othersandbox", "+15550009000", owner("bea"), "in bea's sandbox elsewhere"),
		msg(9, "ln_othersandbox", "+15550009000", owner("ann"), "in ann's sandbox elsewhere"),
	}
	e := newAPI(t, opts)

	ann := e.key(keyOpts{Owner: "ann"})
	got := e.streamed(ann, client.EventStreamParams{After: 1}, 2)
	if len(got) != 2 {
		t.Fatalf("got %d events", len(got))
	}
	for i, want := range []struct {
		seq          uint64
		text, handle string
	}{{7, "on another node's line", "+15550009001"}, {9, "in ann's sandbox elsewhere", "+15550009000"}} {
		m, err := got[i].Message()
		if err != nil || got[i].Seq != want.seq || *m.Text != want.text || m.LineHandle != want.handle {
			t.Errorf("event %d: seq %d, %+v, %v; want %+v", i, got[i].Seq, m, err, want)
		}
	}

	// A key of one line of this node: none of them.
	restricted := e.key(keyOpts{Lines: []string{mainLine}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	for ev, err := range client.New(e.base, client.WithAPIKey(restricted)).Events.Stream(ctx, client.EventStreamParams{After: 1}) {
		if err == nil {
			t.Errorf("a key of %s got %s", mainLine, ev.Raw)
		}
	}
}
