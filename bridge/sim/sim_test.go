package sim_test

import (
	"context"
	"errors"
	"iter"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
)

const line = "+15550000001"

// sink records what the network reports, as the daemon's receiver would
// store it.
type sink struct {
	mu      sync.Mutex
	updates []bridge.MessageUpdate
	chats   []bridge.ChatUpdate
}

func (s *sink) Receive(context.Context, bridge.Inbound) (bool, error) { return false, nil }
func (s *sink) ReceiveHistory(context.Context, string, []bridge.Inbound) ([]string, error) {
	return nil, nil
}
func (s *sink) ImportHistory(context.Context, string, iter.Seq2[[]bridge.Inbound, error]) error {
	return nil
}
func (s *sink) HistoryImported(context.Context, string) error                 { return nil }
func (s *sink) ReceiveReaction(context.Context, bridge.InboundReaction) error { return nil }
func (s *sink) ReceiveTyping(context.Context, bridge.InboundTyping) error     { return nil }
func (s *sink) ReceiveRead(context.Context, bridge.InboundRead) error         { return nil }
func (s *sink) ReceiveSendFailure(context.Context, bridge.SendFailure) error  { return nil }
func (s *sink) ReceiveUpdate(_ context.Context, u bridge.MessageUpdate) error {
	return s.add(&s.updates, u)
}
func (s *sink) ReceiveChatUpdate(_ context.Context, u bridge.ChatUpdate) error { return s.addChat(u) }

func (s *sink) add(list *[]bridge.MessageUpdate, u bridge.MessageUpdate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	*list = append(*list, u)
	return nil
}

func (s *sink) addChat(u bridge.ChatUpdate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats = append(s.chats, u)
	return nil
}

func (s *sink) got() ([]bridge.MessageUpdate, []bridge.ChatUpdate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates), slices.Clone(s.chats)
}

var _ bridge.Bridge = (*sim.Network)(nil)

// run starts n's Run with a fresh sink and waits until it takes reports.
func run(t *testing.T, n *sim.Network) *sink {
	t.Helper()
	s := &sink{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, s) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Run sets the sink asynchronously: an unsend in a chat of its own
	// succeeds once it is set.
	probe := bridge.Conversation{Line: line, Chat: sim.OneToOne("imessage", "+15559999000")}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := n.Unsend(context.Background(), bridge.Unsend{Conversation: probe, TargetGUID: "probe"}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never took the sink")
		}
		time.Sleep(time.Millisecond)
	}
	s.mu.Lock()
	s.updates = nil
	s.mu.Unlock()
	return s
}

func conv(contact string) bridge.Conversation {
	return bridge.Conversation{OutboxID: "obx_1", Line: line, Service: "imessage", Chat: sim.OneToOne("imessage", contact)}
}

var guidRE = regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-7[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$`)

func TestSendRecordsAndReceipts(t *testing.T) {
	n := sim.New(0)
	ctx := context.Background()
	before := time.Now()
	r, err := n.Send(ctx, bridge.Outgoing{Conversation: conv("+15551110001"), Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if !guidRE.MatchString(r.GUID) || r.SentAt.Before(before) || r.SentAt.After(time.Now()) {
		t.Fatalf("receipt %+v", r)
	}
	r2, err := n.Send(ctx, bridge.Outgoing{Conversation: conv("+15551110002"), Text: "second"})
	if err != nil || r2.GUID == r.GUID {
		t.Fatalf("second receipt %+v (first %s): %v", r2, r.GUID, err)
	}
	d := n.Delivered()
	if len(d) != 2 || d[0].Text != "hello" || d[1].Text != "second" || d[0].Chat.Identifier != "+15551110001" {
		t.Fatalf("delivered %+v", d)
	}
	// Delivered is a copy.
	d[0].Text = "changed"
	if n.Delivered()[0].Text != "hello" {
		t.Fatal("Delivered shares its list with the network")
	}

	if _, err := n.React(ctx, bridge.Reaction{Conversation: conv("+15551110001"), TargetGUID: r.GUID, Type: "love"}); err != nil {
		t.Fatal(err)
	}
	if err := n.SetTyping(ctx, bridge.Typing{Conversation: conv("+15551110001"), On: true}); err != nil {
		t.Fatal(err)
	}
	if err := n.MarkRead(ctx, bridge.Read{Conversation: conv("+15551110001")}); err != nil {
		t.Fatal(err)
	}
	if rs := n.Reactions(); len(rs) != 1 || rs[0].TargetGUID != r.GUID || rs[0].Type != "love" {
		t.Fatalf("reactions %+v", rs)
	}
	if ts := n.Typing(); len(ts) != 1 || !ts[0].On {
		t.Fatalf("typing %+v", ts)
	}
	if rs := n.Reads(); len(rs) != 1 || rs[0].Chat.Identifier != "+15551110001" {
		t.Fatalf("reads %+v", rs)
	}
}

// FailSends fails the next actions of one chat, one error each, in order.
func TestFailSends(t *testing.T) {
	n := sim.New(0)
	ctx := context.Background()
	refused, flaky := bridge.Permanent(errors.New("refused")), errors.New("flaky")
	n.FailSends("+15551110001", refused, flaky)

	// Another chat is not affected.
	if _, err := n.Send(ctx, bridge.Outgoing{Conversation: conv("+15551110002"), Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Send(ctx, bridge.Outgoing{Conversation: conv("+15551110001"), Text: "a"}); !errors.Is(err, refused) || !bridge.IsPermanent(err) {
		t.Fatalf("first send: %v", err)
	}
	if err := n.SetTyping(ctx, bridge.Typing{Conversation: conv("+15551110001"), On: true}); !errors.Is(err, flaky) || bridge.IsPermanent(err) {
		t.Fatalf("typing: %v", err)
	}
	if _, err := n.Send(ctx, bridge.Outgoing{Conversation: conv("+15551110001"), Text: "b"}); err != nil {
		t.Fatalf("third action: %v", err)
	}
	var texts []string
	for _, d := range n.Delivered() {
		texts = append(texts, d.Text)
	}
	if !slices.Equal(texts, []string{"x", "b"}) || len(n.Typing()) != 0 {
		t.Fatalf("delivered %q, typing %+v", texts, n.Typing())
	}
}

// Every action takes the network's latency, and gives up when its context
// ends first.
func TestLatency(t *testing.T) {
	n := sim.New(30 * time.Millisecond)
	start := time.Now()
	if _, err := n.Send(context.Background(), bridge.Outgoing{Conversation: conv("+15551110001"), Text: "slow"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("send took %v, less than the latency", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.MarkRead(ctx, bridge.Read{Conversation: conv("+15551110001")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v", err)
	}
	if _, err := n.React(ctx, bridge.Reaction{Conversation: conv("+15551110001"), Type: "like"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("reaction with a cancelled context: %v", err)
	}
	if len(n.Reads()) != 0 || len(n.Reactions()) != 0 || len(n.Delivered()) != 1 {
		t.Fatalf("recorded reads %+v, reactions %+v", n.Reads(), n.Reactions())
	}
}

// Edits and unsends are recorded and reported to the sink, once Run took
// one.
func TestEditAndUnsendReported(t *testing.T) {
	n := sim.New(0)
	ctx := context.Background()
	c := conv("+15551110001")
	// Not running yet: recorded, but the outcome cannot be reported.
	if err := n.Edit(ctx, bridge.Edit{Conversation: c, TargetGUID: "G0", Text: "early"}); err == nil {
		t.Fatal("an edit before Run reported no error")
	}

	s := run(t, n)
	for _, text := range []string{"one", "two", "three"} {
		if err := n.Edit(ctx, bridge.Edit{Conversation: c, TargetGUID: "G1", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Unsend(ctx, bridge.Unsend{Conversation: c, TargetGUID: "G2"}); err != nil {
		t.Fatal(err)
	}
	ups, _ := s.got()
	if len(ups) != 4 {
		t.Fatalf("updates %+v", ups)
	}
	var prev time.Time
	for i, text := range []string{"one", "two", "three"} {
		u := ups[i]
		if u.Line != line || u.GUID != "G1" || u.Text == nil || *u.Text != text || !u.UnsentAt.IsZero() {
			t.Fatalf("update %d: %+v", i, u)
		}
		// Edits made within the same millisecond still come in order.
		if !u.EditedAt.After(prev) {
			t.Fatalf("edit %d at %v, not after %v", i, u.EditedAt, prev)
		}
		prev = u.EditedAt
	}
	if u := ups[3]; u.GUID != "G2" || u.UnsentAt.IsZero() || u.Text != nil {
		t.Fatalf("unsend update %+v", u)
	}
	if es := n.Edits(); len(es) != 4 || es[0].Text != "early" || es[3].Text != "three" {
		t.Fatalf("edits %+v", es)
	}
	if us := n.Unsends(); len(us) < 2 || us[len(us)-1].TargetGUID != "G2" {
		t.Fatalf("unsends %+v", us)
	}

	// A failing network reports nothing.
	n.FailSends("+15551110001", errors.New("down"))
	if err := n.Edit(ctx, bridge.Edit{Conversation: c, TargetGUID: "G1", Text: "four"}); err == nil {
		t.Fatal("an edit on a failing network succeeded")
	}
	if ups, _ := s.got(); len(ups) != 4 {
		t.Fatalf("a failed edit was reported: %+v", ups[4:])
	}
}

func TestGroups(t *testing.T) {
	n := sim.New(0)
	ctx := context.Background()
	s := run(t, n)
	members := []string{"+15551110001", "friend@example.com"}
	chat, r, err := n.CreateGroup(ctx, bridge.NewGroup{OutboxID: "obx_g", Line: line, Service: "imessage",
		Participants: members, Name: "Climbing", Text: "hi all"})
	if err != nil {
		t.Fatal(err)
	}
	if !chat.IsGroup || chat.Name != "Climbing" || !slices.Equal(chat.Participants, members) ||
		!regexp.MustCompile(`^chat\d{18}$`).MatchString(chat.Identifier) || chat.GUID != "iMessage;+;"+chat.Identifier {
		t.Fatalf("group chat %+v", chat)
	}
	if !guidRE.MatchString(r.GUID) {
		t.Fatalf("receipt %+v", r)
	}
	members[0] = "changed" // the chat keeps its own list
	if chat.Participants[0] != "+15551110001" {
		t.Fatalf("the chat shares its participants with the request: %v", chat.Participants)
	}
	if gs := n.Groups(); len(gs) != 1 || gs[0].Text != "hi all" {
		t.Fatalf("groups %+v", gs)
	}
	other, _, err := n.CreateGroup(ctx, bridge.NewGroup{Line: line, Service: "sms", Participants: members})
	if err != nil || other.Identifier == chat.Identifier || !strings.HasPrefix(other.GUID, "SMS;+;chat") {
		t.Fatalf("second group %+v: %v", other, err)
	}

	gc := bridge.Conversation{Line: line, Service: "imessage", Chat: chat}
	if err := n.ChangeGroup(ctx, bridge.GroupChange{Conversation: gc, Action: bridge.ChatRenamed, Name: "Bouldering"}); err != nil {
		t.Fatal(err)
	}
	if err := n.ChangeGroup(ctx, bridge.GroupChange{Conversation: gc, Action: bridge.ChatParticipantAdded, Participant: "+15551110003"}); err != nil {
		t.Fatal(err)
	}
	if err := n.ChangeGroup(ctx, bridge.GroupChange{Conversation: gc, Action: bridge.ChatParticipantLeft}); err != nil {
		t.Fatal(err)
	}
	_, chats := s.got()
	if len(chats) != 3 {
		t.Fatalf("chat updates %+v", chats)
	}
	for _, u := range chats {
		if u.Line != line || u.Chat.GUID != chat.GUID || !u.IsFromMe || u.By != line || !guidRE.MatchString(u.GUID) || u.At.IsZero() {
			t.Fatalf("chat update %+v", u)
		}
	}
	if chats[0].Action != bridge.ChatRenamed || chats[0].Name != "Bouldering" ||
		chats[1].Action != bridge.ChatParticipantAdded || chats[1].Participant != "+15551110003" ||
		chats[2].Action != bridge.ChatParticipantLeft || chats[2].Participant != line {
		t.Fatalf("chat updates %+v", chats)
	}
	if len(n.GroupChanges()) != 3 {
		t.Fatalf("group changes %+v", n.GroupChanges())
	}

	// The line left: it can no longer send to the group or change it.
	if _, err := n.Send(ctx, bridge.Outgoing{Conversation: gc, Text: "still here?"}); !bridge.IsPermanent(err) {
		t.Fatalf("send after leaving: %v", err)
	}
	if err := n.ChangeGroup(ctx, bridge.GroupChange{Conversation: gc, Action: bridge.ChatRenamed, Name: "x"}); !bridge.IsPermanent(err) {
		t.Fatalf("change after leaving: %v", err)
	}
	// Another line of the same group still can.
	gc2 := gc
	gc2.Line = "+15550000002"
	if _, err := n.Send(ctx, bridge.Outgoing{Conversation: gc2, Text: "I am"}); err != nil {
		t.Fatalf("another line's send: %v", err)
	}
	// A one-to-one chat is not a group.
	if err := n.ChangeGroup(ctx, bridge.GroupChange{Conversation: conv("+15551110001"), Action: bridge.ChatRenamed, Name: "x"}); !bridge.IsPermanent(err) {
		t.Fatalf("renaming a one-to-one chat: %v", err)
	}
	if len(n.GroupChanges()) != 3 {
		t.Fatalf("refused changes were recorded: %+v", n.GroupChanges())
	}
}

func TestAvailability(t *testing.T) {
	n := sim.New(0)
	ctx := context.Background()
	for handle, want := range map[string]bool{
		"+15551110001":       true,
		"+15551110099":       false, // an Android phone
		"friend@example.com": true,
		"someone99":          true, // not a phone number
	} {
		if got, err := n.Availability(ctx, line, handle); err != nil || got != want {
			t.Errorf("Availability(%s) = %v, %v; want %v", handle, got, err, want)
		}
	}
	n.SetAvailability("+15551110099", true)
	n.SetAvailability("friend@example.com", false)
	if ok, _ := n.Availability(ctx, line, "+15551110099"); !ok {
		t.Error("a handle set reachable is not")
	}
	if ok, _ := n.Availability(ctx, line, "friend@example.com"); ok {
		t.Error("a handle set unreachable is reachable")
	}
}

func TestChatNames(t *testing.T) {
	c := sim.OneToOne("imessage", "+15551110001")
	if c.GUID != "iMessage;-;+15551110001" || c.Identifier != "+15551110001" || c.IsGroup ||
		!slices.Equal(c.Participants, []string{"+15551110001"}) {
		t.Fatalf("one-to-one chat %+v", c)
	}
	if c := sim.OneToOne("sms", "+15551110001"); c.GUID != "SMS;-;+15551110001" {
		t.Fatalf("SMS chat %+v", c)
	}
	// GUIDs are version 7: later ones sort after earlier ones.
	a := sim.NewGUID()
	time.Sleep(2 * time.Millisecond)
	b := sim.NewGUID()
	if !guidRE.MatchString(a) || !guidRE.MatchString(b) || a >= b {
		t.Fatalf("GUIDs %s then %s", a, b)
	}
}
