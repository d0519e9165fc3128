package goclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// The event stream: events as they happen, filtered by kind and line, with
// the body a webhook gets; resumed after the last event seen; refused with
// the API's error for a bad parameter; over the admin socket as the host.
func TestEventStream(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("webhooks:read,messages:read", ""))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	events := make(chan client.StreamedEvent, 10)
	streamCtx, stop := context.WithCancel(ctx)
	go func() {
		for ev, err := range c.Events.Stream(streamCtx, client.EventStreamParams{Lines: []string{mainLine}, Since: time.Now()}) {
			if err != nil {
				t.Errorf("stream: %v", err)
				continue
			}
			events <- ev
		}
		close(events)
	}()
	next := func() client.StreamedEvent {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no event in time")
		}
		return client.StreamedEvent{}
	}
	// Polled until the stream is up: a message on another line, then one
	// on the main line; only main-line messages come.
	td.Inbound(plainLine, alice, "not this line")
	first := td.Inbound(mainLine, alice, "one")
	ev := next()
	m, err := ev.Message()
	if err != nil || ev.Type != api.EventMessageReceived || m.ID != first.ID || m.LineHandle != mainLine || ev.Seq == 0 {
		t.Fatalf("first event: %+v %+v %v", ev, m, err)
	}
	if ev.DeliveryID == "" || ev.Timestamp == 0 {
		t.Errorf("the event's envelope lacks its ID or time: %+v", ev.Event)
	}
	stop()
	for range events {
	}

	// Two more while nobody listens; resumed after the first, both come,
	// and nothing twice.
	second, third := td.Inbound(mainLine, alice, "two"), td.Inbound(mainLine, bob, "three")
	var got []string
	for ev, err := range c.Events.Stream(ctx, client.EventStreamParams{Lines: []string{mainLine}, After: ev.Seq}) {
		if err != nil {
			t.Fatal(err)
		}
		m, _ := ev.Message()
		got = append(got, m.ID)
		if len(got) == 2 {
			break
		}
	}
	if len(got) != 2 || got[0] != second.ID || got[1] != third.ID {
		t.Fatalf("resumed: %v, want %s then %s", got, second.ID, third.ID)
	}

	// A bad parameter is the API's error, and ends the stream.
	for _, err := range c.Events.Stream(ctx, client.EventStreamParams{Events: []string{"message.nope"}}) {
		if !errors.Is(err, client.ErrInvalidRequest) {
			t.Fatalf("an unknown event: %v, want an invalid request", err)
		}
		break
	}
	// A key without webhooks:read may not follow it.
	for _, err := range td.client(td.key("messages:read", "")).Events.Stream(ctx, client.EventStreamParams{}) {
		if !errors.Is(err, client.ErrPermission) {
			t.Fatalf("without webhooks:read: %v, want a permission error", err)
		}
		break
	}
	// On the host, through the admin socket, with no key.
	host := client.New(adminsock.BaseURL, client.WithHTTPClient(td.Admin().HTTPClient()))
	for ev, err := range host.Events.Stream(ctx, client.EventStreamParams{Since: time.UnixMilli(0)}) {
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := ev.Message(); m.ID != first.ID && ev.Seq != 1 {
			t.Errorf("the host's stream from the start begins with %d (%s)", ev.Seq, m.ID)
		}
		break
	}
}
