package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/webhook/signature"
	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/fleet/relay"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
	"github.com/blueline-app/blueline/webhook"
)

var ctx = context.Background()

// fleetOfOne is a node alone in its fleet, on loopback.
func fleetOfOne(t *testing.T) *fleet.Node {
	t.Helper()
	n, err := fleet.Start(ctx, fleet.Options{Node: "mac-a", Secret: "the-relay-test-fleet-secret-0123", Listen: "127.0.0.1:0",
		StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// openDB is storage with one line, in fleet mode.
func openDB(t *testing.T) (*storage.DB, storage.Line) {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetFleetDeliveries(true)
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550001001", Service: "iMessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	return db, lines[0]
}

func inbound(t *testing.T, db *storage.DB, line storage.Line, text string) {
	t.Helper()
	from := "+15551110001"
	_, err := db.RecordInbound(ctx, storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + from, Identifier: from, Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: from, Text: &text, SentAt: time.Now().UnixMilli()},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs job until the test ends or stop is called.
func run(t *testing.T, job func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := job(ctx); err != nil {
			t.Error(err)
		}
	})
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

func published(t *testing.T, n *fleet.Node) []fleet.StreamEvent {
	t.Helper()
	evs, err := n.ReadEvents(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Each event of the log is published once, in order, with the ID
// "<node>:<seq>", the cursor moving with the acknowledgements; a cursor
// lost (an acknowledgement that never reached the log) is found again on
// the stream, and nothing is published twice.
func TestPublishOnce(t *testing.T) {
	n := fleetOfOne(t)
	db, line := openDB(t)
	for i := range 3 {
		inbound(t, db, line, fmt.Sprint("message ", i))
	}
	pub := relay.NewPublisher(n, db, slog.New(slog.DiscardHandler))
	stop := run(t, pub.Run)
	cursor := func() storage.PublishCursor {
		c, err := db.PublishCursor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	last, _ := db.LastEventSeq(ctx)
	testkit.Eventually(t, 5*time.Second, func() bool { return cursor().Seq == last })
	// A new event wakes the publisher.
	inbound(t, db, line, "message 3")
	last, _ = db.LastEventSeq(ctx)
	testkit.Eventually(t, 5*time.Second, func() bool { return cursor().Seq == last })
	stop()

	// The cursor is lost; one more event is recorded meanwhile.
	if err := db.SetPublishCursor(ctx, storage.PublishCursor{}); err != nil {
		t.Fatal(err)
	}
	inbound(t, db, line, "message 4")
	last, _ = db.LastEventSeq(ctx)
	run(t, relay.NewPublisher(n, db, slog.New(slog.DiscardHandler)).Run)
	testkit.Eventually(t, 5*time.Second, func() bool { return cursor().Seq == last })

	evs := published(t, n)
	local, _ := db.Events(ctx, 0, 1000)
	if len(evs) != len(local) {
		t.Fatalf("%d events on the stream, %d in the log", len(evs), len(local))
	}
	for i, ev := range evs {
		if want := fmt.Sprintf("mac-a:%d", local[i].Seq); ev.ID != want || ev.Node != "mac-a" || ev.Topic != relay.Topic(line.ID, local[i].Name) {
			t.Errorf("stream event %d: %s %s %s, want %s", i, ev.ID, ev.Node, ev.Topic, want)
		}
	}
	if c := cursor(); c.StreamSeq != evs[len(evs)-1].Seq {
		t.Errorf("cursor %+v, last stream seq %d", c, evs[len(evs)-1].Seq)
	}

	// The stream read as an event log: positions are stream sequences.
	s := relay.NewStream(n, slog.New(slog.DiscardHandler))
	got, err := s.Events(ctx, evs[0].Seq, 100)
	if err != nil || len(got) != len(local)-1 || got[0].ID != local[1].ID || got[0].Seq != evs[1].Seq || got[0].LineHandle != line.Handle {
		t.Errorf("Stream.Events after %d: %+v, %v", evs[0].Seq, got, err)
	}
	if before, err := s.EventsBefore(ctx, time.Now().Add(time.Hour).UnixMilli()); err != nil || before != evs[len(evs)-1].Seq {
		t.Errorf("EventsBefore(later) = %d, %v", before, err)
	}
	if before, err := s.EventsBefore(ctx, time.Now().Add(-time.Hour).UnixMilli()); err != nil || before != 0 {
		t.Errorf("EventsBefore(earlier) = %d, %v", before, err)
	}
}

// render is a Renderer that gives a message's text.
type render struct{}

func (render) EventData(d storage.Delivery, lineHandle string) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"text": *d.Message.Text, "line_handle": lineHandle})
}

// deliver publishes db's events to n's stream and delivers them to db's
// webhooks until the test ends, each event tried 1+retries times 50 ms
// apart, on lanes lanes, to receivers on loopback over plain HTTP.
func deliver(t *testing.T, n *fleet.Node, db *storage.DB, lanes, retries int) {
	t.Helper()
	opts := webhook.Options{Schedule: slices.Repeat([]time.Duration{50 * time.Millisecond}, retries), Timeout: 2 * time.Second, Lanes: lanes,
		Policy: webhook.Policy{AllowHTTP: true, AllowPrivateNetworks: true}}
	lg := slog.New(slog.DiscardHandler)
	sender := webhook.NewSender(opts)
	t.Cleanup(sender.Close)
	run(t, relay.NewPublisher(n, db, lg).Run)
	run(t, relay.NewWebhooks(n, db, render{}, sender, opts, lg).Run)
}

// A webhook's consumer delivers each event of its line and kind, signed,
// with the delivery ID derived from the webhook and the event, the same on
// the retry after a failure; the attempts are recorded.
func TestWebhookConsumer(t *testing.T) {
	n := fleetOfOne(t)
	db, line := openDB(t)
	const secret = "whsec_relay-test"
	var mu sync.Mutex
	type got struct{ id, text string }
	var gots []got
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := signature.Verify(secret, body, r.Header.Get(signature.HeaderSignature), r.Header.Get(signature.HeaderTimestamp), time.Now()); err != nil {
			t.Errorf("signature: %v", err)
		}
		var ev struct {
			DeliveryID string `json:"delivery_id"`
			Data       struct{ Text string }
		}
		json.Unmarshal(body, &ev)
		if ev.DeliveryID != r.Header.Get(signature.HeaderDeliveryID) {
			t.Errorf("delivery ID %q in the body, %q in the header", ev.DeliveryID, r.Header.Get(signature.HeaderDeliveryID))
		}
		mu.Lock()
		gots = append(gots, got{ev.DeliveryID, ev.Data.Text})
		first := len(gots) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer rc.Close()
	hook := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: rc.URL, Events: []string{"message.received"},
		Secret: secret, IsActive: true, CreatedAt: time.Now().Add(-time.Second).UnixMilli()}
	if err := db.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	deliver(t, n, db, 2, 2)
	inbound(t, db, line, "one")
	inbound(t, db, line, "two")
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(gots) == 3
	})
	local, _ := db.Events(ctx, 0, 100)
	ids := map[string]string{}
	for _, e := range local {
		if e.Name == "message.received" {
			ids[relay.DeliveryID(hook.ID, e.ID)] = *e.Message.Text
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gots) != 3 {
		t.Errorf("%d requests", len(gots))
	}
	for _, g := range gots {
		if ids[g.id] != g.text {
			t.Errorf("delivery %s of %q; the events give %v", g.id, g.text, ids)
		}
	}
	var attempts []storage.Attempt
	testkit.Eventually(t, 5*time.Second, func() bool {
		var err error
		attempts, err = db.Attempts(ctx, storage.AttemptFilter{WebhookID: hook.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(attempts) == 3
	})
	// The failed first attempt, whenever it was recorded (two deliveries
	// run at once: the order of their records is not the requests').
	var retried storage.Attempt
	failed := 0
	for _, a := range attempts {
		if a.Error != "" {
			retried = a
			failed++
		}
	}
	if failed != 1 || retried.StatusCode != http.StatusBadGateway || retried.N != 1 {
		t.Errorf("%d failed attempts, the first %+v", failed, retried)
	}
	for _, a := range attempts {
		if a.Error == "" && a.DeliveryID == retried.DeliveryID && a.N != 2 {
			t.Errorf("attempt %+v", a)
		}
	}
	if gots[0].id != retried.DeliveryID {
		t.Errorf("the failed request was %s, its attempt %s", gots[0].id, retried.DeliveryID)
	}
}

// A webhook of several lines gets, from the events stream, the events of
// each of its lines and none of another's.
func TestWebhookConsumerOfSeveralLines(t *testing.T) {
	n := fleetOfOne(t)
	db, first := openDB(t)
	lines, err := db.SyncLines(ctx, []storage.Line{first, {Handle: "+15550001002", Service: "iMessage", Bridge: "sim"},
		{Handle: "+15550001003", Service: "iMessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var texts []string
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Data struct{ Text string } }
		json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		texts = append(texts, ev.Data.Text)
		mu.Unlock()
	}))
	defer rc.Close()
	hook := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{lines[0].ID, lines[1].ID}, URL: rc.URL, Events: []string{"message.received"},
		Secret: "whsec_relay-test", IsActive: true, CreatedAt: time.Now().Add(-time.Second).UnixMilli()}
	if err := db.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	// One lane: the events come in the stream's order, so the third
	// line's, first in it, would come first.
	deliver(t, n, db, 1, 1)
	inbound(t, db, lines[2], "third line")
	inbound(t, db, lines[0], "first line")
	inbound(t, db, lines[1], "second line")
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(texts) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"first line", "second line"}; !slices.Equal(texts[:2], want) {
		t.Errorf("delivered %q, want %q", texts, want)
	}
}
