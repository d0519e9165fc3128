package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// record stores a contact's message as the bridge reports it.
func (e *apiEnv) record(in bridge.Inbound) storage.Message {
	e.t.Helper()
	if in.GUID == "" {
		in.GUID = sim.NewGUID()
	}
	if in.SentAt.IsZero() {
		in.SentAt = time.Now()
	}
	res, err := e.recv.Record(context.Background(), in)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Message
}

// texts are the texts of the message events of evs, in order.
func texts(t *testing.T, evs []client.StreamedEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		out = append(out, deref(messageData(t, ev).Text))
	}
	return out
}

func messageData(t *testing.T, ev client.StreamedEvent) *api.MessageEventData {
	t.Helper()
	m, err := ev.Message()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Every message event says how it arrived, where Messages files its chat
// and whether its sender is verified. An agent key's stream takes live
// messages of known senders by default and more when it asks; another
// key's takes every one, as before.
func TestWhatWakesAnAgent(t *testing.T) {
	e := newAPI(t, defaultOptions())
	since := time.Now()
	text := func(s string) *string { return &s }
	e.record(bridge.Inbound{Line: mainLine, Service: "imessage", Chat: sim.OneToOne("imessage", alice), Sender: alice, Text: text("live")})
	e.record(bridge.Inbound{Line: mainLine, Service: "sms", Chat: sim.OneToOne("sms", bob), Sender: bob, Text: text("sms")})
	e.record(bridge.Inbound{Line: mainLine, Service: "imessage", Chat: sim.OneToOne("imessage", carol), Sender: carol, Text: text("late"),
		SentAt: time.Now().Add(-3 * time.Hour), CatchUp: true})
	unknown := sim.OneToOne("imessage", "+15551110009")
	unknown.Filter = "unknown_sender"
	e.record(bridge.Inbound{Line: mainLine, Service: "imessage", Chat: unknown, Sender: unknown.Identifier, Text: text("stranger")})
	e.record(bridge.Inbound{Line: mainLine, Service: "imessage", Chat: sim.OneToOne("imessage", alice), Sender: alice, Text: text("last")})

	human := e.key(keyOpts{})
	all := e.streamed(human, client.EventStreamParams{Since: since}, 5)
	if got, want := texts(t, all), []string{"live", "sms", "late", "stranger", "last"}; !slices.Equal(got, want) {
		t.Fatalf("a key that is not an agent's: %q, want %q", got, want)
	}
	for i, want := range []struct {
		arrival, filter string
		verified        bool
	}{{"live", "", true}, {"live", "", false}, {"catch_up", "", true}, {"live", "unknown_sender", true}, {"live", "", true}} {
		m := messageData(t, all[i])
		if m.Arrival != want.arrival || deref(m.Filter) != want.filter || m.SenderVerified != want.verified {
			t.Errorf("%q: arrival %q, filter %q, sender_verified %v; want %q, %q, %v", deref(m.Text), m.Arrival, deref(m.Filter),
				m.SenderVerified, want.arrival, want.filter, want.verified)
		}
	}

	agent := e.key(keyOpts{Agent: true})
	if got, want := texts(t, e.streamed(agent, client.EventStreamParams{Since: since}, 3)), []string{"live", "sms", "last"}; !slices.Equal(got, want) {
		t.Errorf("an agent key by default: %q, want %q", got, want)
	}
	include := true
	got := texts(t, e.streamed(agent, client.EventStreamParams{Since: since, Arrival: []string{"live", "catch_up"}, IncludeFiltered: &include}, 5))
	if want := []string{"live", "sms", "late", "stranger", "last"}; !slices.Equal(got, want) {
		t.Errorf("an agent key asking for catch-up and filtered chats: %q, want %q", got, want)
	}
	got = texts(t, e.streamed(agent, client.EventStreamParams{Since: since, Arrival: []string{"catch_up"}}, 1))
	if want := []string{"late"}; !slices.Equal(got, want) {
		t.Errorf("an agent key asking for catch-up only: %q, want %q", got, want)
	}
	exclude := false
	got = texts(t, e.streamed(human, client.EventStreamParams{Since: since, Arrival: []string{"live"}, IncludeFiltered: &exclude}, 3))
	if want := []string{"live", "sms", "last"}; !slices.Equal(got, want) {
		t.Errorf("a key that is not an agent's asking for less: %q, want %q", got, want)
	}

	for query, param := range map[string]string{"arrival=history": "arrival", "arrival=soon": "arrival", "include_filtered=maybe": "include_filtered"} {
		if r := e.refusedStream(agent, query); r.Status != 400 || r.ErrParam() != param {
			t.Errorf("%s: %d %s, want 400 naming %s", query, r.Status, r.Raw, param)
		}
	}
}

// A live event handed over more than ten minutes after it was recorded (a
// stream resumed late) says catch_up.
func TestArrivalHandedOverLate(t *testing.T) {
	e, ahead := agentEnv(t)
	m := e.inbound(mainLine, alice, "while the agent was away")
	key := e.key(keyOpts{Agent: true})
	evs := e.streamed(key, client.EventStreamParams{Since: time.Now().Add(-time.Hour)}, 1)
	if got := messageData(t, evs[0]); got.ID != m.ID || got.Arrival != api.ArrivalLive {
		t.Fatalf("at once: %s %q", got.ID, got.Arrival)
	}
	ahead.Store((11 * time.Minute).Milliseconds())
	evs = e.streamed(key, client.EventStreamParams{Since: time.Now().Add(-time.Hour)}, 1)
	if got := messageData(t, evs[0]); got.ID != m.ID || got.Arrival != api.ArrivalCatchUp {
		t.Errorf("eleven minutes later: %s %q, want the same message as catch_up", got.ID, got.Arrival)
	}
}

// An agent key with sender gating hears only from the contacts it allows,
// in groups only what mentions it, and writes only to them.
func TestSenderGating(t *testing.T) {
	e := newAPI(t, defaultOptions())
	since := time.Now()
	gated := e.key(keyOpts{Agent: true, Gate: storage.Gate{AllowFrom: []string{alice, carol}, GroupMention: `(?i)@bot\b`}})
	listOnly := e.key(keyOpts{Agent: true, Gate: storage.Gate{AllowFrom: []string{alice, carol}}})
	group := sim.NewGroup("imessage", "Team", []string{alice, bob})
	e.inbound(mainLine, bob, "from bob")
	e.inbound(mainLine, alice, "from alice")
	e.inbound(mainLine, alice, "no mention here", group)
	e.inbound(mainLine, bob, "@Bot from bob", group)
	g := e.inbound(mainLine, alice, "hey @BOT, a question", group)
	e.inbound(mainLine, carol, "from carol")

	got := texts(t, e.streamed(gated, client.EventStreamParams{Since: since}, 3))
	if want := []string{"from alice", "hey @BOT, a question", "from carol"}; !slices.Equal(got, want) {
		t.Errorf("a gated agent key hears %q, want %q", got, want)
	}
	if got := texts(t, e.streamed(e.key(keyOpts{}), client.EventStreamParams{Since: since}, 6)); len(got) != 6 {
		t.Errorf("a key that is not gated hears %q, want all six", got)
	}

	for _, c := range []struct {
		key, to string
		status  int
		code    string
	}{
		{gated, bob, 403, "contact_not_allowed"},
		{gated, alice, 201, ""},
		{gated, g.ChatID, 201, ""},                       // it answers mentions in the group
		{listOnly, g.ChatID, 403, "contact_not_allowed"}, // bob is a member
		{listOnly, alice, 201, ""},
	} {
		r := e.call("POST", "/v1/messages", c.key, map[string]any{"from": mainLine, "to": c.to, "text": "hi"})
		e.wantStatus(r, c.status, c.code, "a gated key's send to "+c.to)
	}
	r := e.call("POST", "/v1/typing", gated, map[string]any{"from": mainLine, "to": bob})
	e.wantStatus(r, 403, "contact_not_allowed", "a gated key's typing to bob")
}

// A webhook delivery says catch_up when its attempt comes more than ten
// minutes after the event was recorded (the receiver was down), or when
// the message was read late.
func TestWebhookArrival(t *testing.T) {
	e := newAPI(t, defaultOptions())
	m := e.inbound(mainLine, alice, "hi")
	now := time.Now()
	for _, c := range []struct {
		name      string
		createdAt time.Time
		recorded  string
		want      string
	}{
		{"the first attempt", now, "", api.ArrivalLive},
		{"a retry 9 minutes later", now.Add(-9 * time.Minute), "", api.ArrivalLive},
		{"a retry 11 minutes later", now.Add(-11 * time.Minute), "", api.ArrivalCatchUp},
		{"news read late, delivered at once", now, api.ArrivalCatchUp, api.ArrivalCatchUp},
	} {
		d := storage.Delivery{ID: storage.NewID("dlv_"), LineID: m.LineID, ChatID: m.ChatID, Event: api.EventMessageReceived,
			CreatedAt: c.createdAt.UnixMilli(), EventSubject: storage.EventSubject{Message: &m, Arrival: c.recorded}}
		raw, err := e.srv.EventData(d, mainLine)
		if err != nil {
			t.Fatal(err)
		}
		var data api.MessageEventData
		if err := json.Unmarshal(raw, &data); err != nil || data.Arrival != c.want {
			t.Errorf("%s: arrival %q (%v), want %q", c.name, data.Arrival, err, c.want)
		}
	}
}
