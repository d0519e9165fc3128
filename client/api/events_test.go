package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
)

// event marshals data as the data of an event of type typ, as a webhook
// delivery's body carries it.
func event(t *testing.T, typ string, data any) *api.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(api.Event{Type: typ, Data: raw, Timestamp: 1700000000123, DeliveryID: "evt_1"})
	if err != nil {
		t.Fatal(err)
	}
	var e api.Event
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

func TestEventTime(t *testing.T) {
	e := api.Event{Timestamp: 1700000000123}
	want := time.Date(2023, 11, 14, 22, 13, 20, 123e6, time.UTC)
	if got := e.Time(); !got.Equal(want) {
		t.Errorf("Time() = %v, want %v", got.UTC(), want)
	}
}

func TestEventMessage(t *testing.T) {
	text := "hello & bye"
	e := event(t, api.EventMessageReceived, api.MessageEventData{
		Message:    api.Message{ID: "msg_1", ChatID: "cht_1", Sender: "+15551110001", Text: &text},
		LineHandle: "+15550000001",
	})
	m, err := e.Message()
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "msg_1" || m.ChatID != "cht_1" || m.Sender != "+15551110001" || m.LineHandle != "+15550000001" {
		t.Errorf("Message() = %+v", m)
	}
	if m.Text == nil || *m.Text != text {
		t.Errorf("text = %v, want %q", m.Text, text)
	}
	// Every message.* event decodes as a message.
	for _, typ := range []string{api.EventMessageSent, api.EventMessageFailed, api.EventMessageEdited, api.EventMessageUnsent, api.EventMessageDelivered} {
		e := event(t, typ, api.MessageEventData{Message: api.Message{ID: "msg_2"}})
		if m, err := e.Message(); err != nil || m.ID != "msg_2" {
			t.Errorf("%s: Message() = %+v, %v", typ, m, err)
		}
	}
}

func TestEventReaction(t *testing.T) {
	e := event(t, api.EventReactionRemoved, api.ReactionEventData{
		Reaction:   api.Reaction{ID: "rxn_1", MessageID: "msg_1", Type: "love", Added: false},
		LineHandle: "+15550000001",
	})
	r, err := e.Reaction()
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "rxn_1" || r.MessageID != "msg_1" || r.Type != "love" || r.Added || r.LineHandle != "+15550000001" {
		t.Errorf("Reaction() = %+v", r)
	}
}

func TestEventReceipt(t *testing.T) {
	e := event(t, api.EventReceiptRead, api.ReceiptEventData{
		Receipt:    api.Receipt{ID: "rcp_1", ChatID: "cht_1", Handle: "+15551110001", LastReadAt: 42},
		LineHandle: "+15550000001",
	})
	r, err := e.Receipt()
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "rcp_1" || r.ChatID != "cht_1" || r.LastReadAt != 42 || r.LineHandle != "+15550000001" {
		t.Errorf("Receipt() = %+v", r)
	}
}

func TestEventChat(t *testing.T) {
	name, by := "Friends", "+15551110001"
	e := event(t, api.EventChatUpdated, api.ChatEventData{
		Chat:       api.Chat{ID: "cht_1", IsGroup: true, Name: &name, Participants: []string{by}},
		ChatID:     "cht_1",
		Change:     api.ChatChange{Action: "renamed", Name: &name, By: &by, At: 7},
		LineHandle: "+15550000001",
	})
	c, err := e.Chat()
	if err != nil {
		t.Fatal(err)
	}
	if c.ChatID != "cht_1" || !c.IsGroup || c.Change.Action != "renamed" || c.Change.At != 7 || c.LineHandle != "+15550000001" {
		t.Errorf("Chat() = %+v", c)
	}
	if c.Change.Name == nil || *c.Change.Name != name || c.Change.By == nil || *c.Change.By != by || c.Change.Participant != nil {
		t.Errorf("change = %+v", c.Change)
	}
}

// Decoding an event as another kind is refused, naming both.
func TestEventWrongKind(t *testing.T) {
	msg := event(t, api.EventMessageReceived, api.MessageEventData{Message: api.Message{ID: "msg_1"}})
	rxn := event(t, api.EventReactionAdded, api.ReactionEventData{Reaction: api.Reaction{ID: "rxn_1"}})
	for name, call := range map[string]func() error{
		"Reaction of message.received": func() error { _, err := msg.Reaction(); return err },
		"Receipt of message.received":  func() error { _, err := msg.Receipt(); return err },
		"Chat of message.received":     func() error { _, err := msg.Chat(); return err },
		"Message of reaction.added":    func() error { _, err := rxn.Message(); return err },
	} {
		err := call()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), "event has no") {
			t.Errorf("%s: error %q does not say the event has no such data", name, err)
		}
	}
}

// Data that does not decode is an error naming the event, for Decode and
// the typed decoders alike.
func TestEventDecodeError(t *testing.T) {
	e := &api.Event{Type: api.EventMessageReceived, Data: json.RawMessage(`{"id": 5}`)}
	if _, err := e.Message(); err == nil || !strings.Contains(err.Error(), "decode message.received data") {
		t.Errorf("Message() error = %v, want a decode error naming the event", err)
	}
	var v map[string]any
	e.Data = json.RawMessage(`[1,2]`)
	if err := e.Decode(&v); err == nil || !strings.Contains(err.Error(), "message.received") {
		t.Errorf("Decode() error = %v", err)
	}
	e.Data = json.RawMessage(`{"a":1}`)
	if err := e.Decode(&v); err != nil || v["a"] != float64(1) {
		t.Errorf("Decode() = %v, %v", v, err)
	}
}

// The event lists: webhooks may subscribe to every event; streams follow
// the reference service's four by default, all of them webhook events.
func TestEventLists(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range api.WebhookEvents {
		if seen[e] {
			t.Errorf("%s listed twice in WebhookEvents", e)
		}
		seen[e] = true
	}
	if len(api.StandardEvents) != 4 {
		t.Errorf("StandardEvents = %v, want the four of the reference service", api.StandardEvents)
	}
	for _, e := range api.StandardEvents {
		if !seen[e] {
			t.Errorf("standard event %s is not a webhook event", e)
		}
	}
	// Test marks only test events.
	b, err := json.Marshal(api.Event{Type: api.EventMessageSent, Data: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"test"`) {
		t.Errorf("a real event carries a test mark: %s", b)
	}
}
