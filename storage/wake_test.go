package storage_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// A webhook's Wake decides, in the transaction that records an event,
// whether the event is queued for it: arrivals and filtered chats of
// message events, and its key's sender gating.
func TestWebhookWake(t *testing.T) {
	db, line := openDB(t)
	create := func(w storage.Wake) storage.Webhook {
		h := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: "https://example.com/h",
			Events: []string{api.EventMessageReceived}, Secret: "s", IsActive: true, Wake: w}
		if err := db.CreateWebhook(ctx, h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	everything := create(storage.Wake{})
	agent := create(storage.Wake{Arrivals: []string{api.ArrivalLive}, SkipFiltered: true})
	gated := create(storage.Wake{Gate: storage.Gate{AllowFrom: []string{"+15551110001"}}})

	record := func(from, text, filter string, catchUp bool) {
		t.Helper()
		now := time.Now().UnixMilli()
		_, err := db.RecordInbound(ctx, storage.Inbound{CatchUp: catchUp,
			Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + from, Identifier: from, Service: "imessage", Filter: filter},
			Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: from, Text: &text, SentAt: now, SyncedAt: now}})
		if err != nil {
			t.Fatal(err)
		}
	}
	record("+15551110001", "live", "", false)
	record("+15551110002", "late", "", true)
	record("+15551110003", "stranger", "unknown_sender", false)

	queued := func(h storage.Webhook) []string {
		var out []string
		for _, d := range due(t, db, h) {
			out = append(out, *d.Message.Text+"/"+d.RecordedArrival()+"/"+d.ChatFilter)
		}
		return out
	}
	for _, c := range []struct {
		hook storage.Webhook
		want []string
	}{
		{everything, []string{"live/live/", "late/catch_up/", "stranger/live/unknown_sender"}},
		{agent, []string{"live/live/"}},
		{gated, []string{"live/live/"}},
	} {
		if got := queued(c.hook); !slices.Equal(got, c.want) {
			t.Errorf("webhook %+v: queued %q, want %q", c.hook.Wake, got, c.want)
		}
	}
	// The Wake is stored with the webhook.
	if h, err := db.WebhookByID(ctx, agent.ID); err != nil || !slices.Equal(h.Arrivals, []string{api.ArrivalLive}) || !h.SkipFiltered {
		t.Errorf("stored: %+v, %v", h.Wake, err)
	}
}

// An agent key's allow-list refuses, in the transaction that stores the
// write, a write to a contact it does not name and a new group with one.
func TestGateRefusesWrites(t *testing.T) {
	db, line := openDB(t)
	allowed := inbound(t, db, line, "+15551110001", 10)
	other := inbound(t, db, line, "+15551110002", 20)
	gate := storage.Gate{AllowFrom: []string{"+15551110001"}}
	enqueue := func(item storage.OutboxItem) error {
		item.ID, item.LineID = storage.NewID("obx_"), line.ID
		_, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: item,
			Agent: &storage.AgentCheck{KeyID: "key_x", ChatID: item.ChatID, Now: time.Now().UnixMilli(), Gate: gate}})
		return err
	}
	text := "hi"
	if err := enqueue(storage.OutboxItem{Kind: storage.KindMessage, ChatID: allowed.Chat.ID, Text: &text}); err != nil {
		t.Errorf("a write to an allowed contact: %v", err)
	}
	for name, item := range map[string]storage.OutboxItem{
		"a write to another contact": {Kind: storage.KindMessage, ChatID: other.Chat.ID, Text: &text},
		"a new group with them":      {Kind: storage.KindGroupCreate, Participants: []string{"+15551110001", "+15551110002"}, Text: &text},
	} {
		var ce *storage.ContactError
		if err := enqueue(item); !errors.As(err, &ce) || !errors.Is(err, storage.ErrContactNotAllowed) || ce.Handle != "+15551110002" {
			t.Errorf("%s: %v, want ErrContactNotAllowed naming +15551110002", name, err)
		}
	}
}
