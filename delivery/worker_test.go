package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/storage"
)

const (
	mainLine  = "+15550000001"
	otherLine = "+15550000002" // configured, but given no bridge
	alice     = "+15551110001"
	bob       = "+15551110002"
	carol     = "+15551110003"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a real database and file store in a temp folder, with the
// receiver that records what the network delivers.
type env struct {
	t     *testing.T
	db    *storage.DB
	files *files.Store
	recv  *delivery.Receiver
	line  storage.Line
	other storage.Line
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{
		{Handle: mainLine, Service: "imessage", Bridge: "sim"},
		{Handle: otherLine, Service: "imessage", Bridge: "sim"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := files.Open(ctx, t.TempDir(), db, files.Options{MaxUploadBytes: 10 << 20, URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, db: db, files: fs, recv: delivery.NewReceiver(db, fs), line: lines[0], other: lines[1]}
}

// inbound records a message from contact on line and returns it, with its chat.
func (e *env) inbound(line, contact, text string) storage.InboundResult {
	e.t.Helper()
	res, err := e.recv.Record(context.Background(), bridge.Inbound{
		Line: line, Chat: sim.OneToOne("imessage", contact), GUID: sim.NewGUID(), Sender: contact, Text: &text,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// enqueue puts an outbox item in, filling in its ID, line and attempts.
func (e *env) enqueue(item storage.OutboxItem) storage.OutboxItem {
	e.t.Helper()
	item.ID = storage.NewID("obx_")
	if item.LineID == "" {
		item.LineID = e.line.ID
	}
	if item.Kind == "" {
		item.Kind = storage.KindMessage
	}
	if item.MaxAttempts == 0 {
		item.MaxAttempts = 3
	}
	got, _, err := e.db.Enqueue(context.Background(), storage.EnqueueRequest{Item: item})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// sendText enqueues a text message to the chat with contact on the main line.
func (e *env) sendText(chat storage.Chat, text string) storage.OutboxItem {
	return e.enqueue(storage.OutboxItem{ChatID: chat.ID, Text: &text})
}

// run starts a worker over bridges; it is stopped, and Run's return
// checked, when the test ends.
func (e *env) run(b bridge.Bridge, opts delivery.Options) {
	e.t.Helper()
	if opts.RetryBase == 0 {
		opts.RetryBase, opts.RetryMax = time.Millisecond, 4*time.Millisecond
	}
	w := delivery.NewWorker(e.db, map[string]bridge.Bridge{e.line.ID: b}, e.files, opts, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("worker Run: %v", err)
		}
	})
}

// wait polls an outbox item until done says so, or fails the test after a
// deadline.
func (e *env) wait(id string, done func(storage.OutboxItem) bool) storage.OutboxItem {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		item, err := e.db.OutboxItemByID(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if done(item) {
			return item
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("outbox item still %s after 10s: %+v", item.Status, item)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func completed(item storage.OutboxItem) bool {
	return item.Status == storage.StatusSent || item.Status == storage.StatusFailed
}

// fromMe returns the line's own messages in a chat.
func (e *env) fromMe(chatID string) []storage.Message {
	e.t.Helper()
	msgs, _, err := e.db.ListMessages(context.Background(), chatID, nil, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []storage.Message
	for _, m := range msgs {
		if m.IsFromMe {
			out = append(out, m)
		}
	}
	return out
}

// fakeBridge is the network edge: it records every Send it is handed and
// answers each with the next of its scripted behaviours (then succeeds).
type fakeBridge struct {
	mu     sync.Mutex
	sends  []bridge.Outgoing
	script []func(ctx context.Context, out bridge.Outgoing) error
}

func (f *fakeBridge) Send(ctx context.Context, out bridge.Outgoing) (bridge.Receipt, error) {
	f.mu.Lock()
	f.sends = append(f.sends, out)
	var step func(context.Context, bridge.Outgoing) error
	if len(f.script) > 0 {
		step, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	if step != nil {
		if err := step(ctx, out); err != nil {
			return bridge.Receipt{}, err
		}
	}
	return bridge.Receipt{GUID: sim.NewGUID(), ChatGUID: out.Chat.GUID, Service: "sms", SMSFallback: true}, nil
}

func (f *fakeBridge) React(context.Context, bridge.Reaction) (bridge.Receipt, error) {
	return bridge.Receipt{}, errors.New("fake bridge: React not expected")
}
func (f *fakeBridge) SetTyping(context.Context, bridge.Typing) error {
	return errors.New("fake bridge: SetTyping not expected")
}
func (f *fakeBridge) MarkRead(context.Context, bridge.Read) error {
	return errors.New("fake bridge: MarkRead not expected")
}
func (f *fakeBridge) Run(ctx context.Context, _ bridge.Sink) error { <-ctx.Done(); return nil }

func (f *fakeBridge) handed() []bridge.Outgoing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bridge.Outgoing(nil), f.sends...)
}

// handOffThen calls Handoff, as a network that sends at most once does, then
// fails with err.
func handOffThen(err error) func(context.Context, bridge.Outgoing) error {
	return func(ctx context.Context, out bridge.Outgoing) error {
		if herr := out.Handoff(ctx); herr != nil {
			return herr
		}
		return err
	}
}

func TestWorkerSendsEachKind(t *testing.T) {
	e := newEnv(t)
	net := sim.New(0)
	target := e.inbound(mainLine, alice, "hi")
	chat := target.Chat
	text := e.sendText(chat, "hello")
	react := e.enqueue(storage.OutboxItem{Kind: storage.KindReaction, ChatID: chat.ID,
		TargetMessageID: target.Message.ID, TargetGUID: target.Message.GUID, ReactionType: "love"})
	typing := e.enqueue(storage.OutboxItem{Kind: storage.KindTyping, ChatID: chat.ID, TypingOn: true})
	read := e.enqueue(storage.OutboxItem{Kind: storage.KindRead, ChatID: chat.ID})
	e.run(net, delivery.Options{})

	for _, id := range []string{text.ID, react.ID, typing.ID, read.ID} {
		if item := e.wait(id, completed); item.Status != storage.StatusSent || item.Attempts != 1 || item.CompletedAt == 0 {
			t.Errorf("%s item: %+v", item.Kind, item)
		}
	}
	out := net.Delivered()
	if len(out) != 1 || out[0].Text != "hello" || out[0].Line != mainLine || out[0].Chat.Identifier != alice || out[0].OutboxID != text.ID {
		t.Fatalf("network got %+v", out)
	}
	item, _ := e.db.OutboxItemByID(context.Background(), text.ID)
	mine := e.fromMe(chat.ID)
	if len(mine) != 1 || mine[0].ID != item.MessageID || mine[0].OutboxID != text.ID || *mine[0].Text != "hello" || mine[0].Sender != mainLine || mine[0].GUID == "" {
		t.Fatalf("stored sent messages %+v for item %+v", mine, item)
	}
	if r := net.Reactions(); len(r) != 1 || r[0].TargetGUID != target.Message.GUID || r[0].Type != "love" || r[0].Remove {
		t.Errorf("reactions on the network: %+v", r)
	}
	if rs, err := e.db.ReactionsByMessage(context.Background(), target.Message.ID); err != nil || len(rs) != 1 || !rs[0].IsFromMe || rs[0].Type != "love" {
		t.Errorf("stored reactions: %+v %v", rs, err)
	}
	if ty := net.Typing(); len(ty) != 1 || !ty[0].On {
		t.Errorf("typing on the network: %+v", ty)
	}
	if rd := net.Reads(); len(rd) != 1 || rd[0].Chat.Identifier != alice {
		t.Errorf("reads on the network: %+v", rd)
	}
}

// Two transient failures, then success: sent on the third attempt.
// (Moved down from the end-to-end TestDeliveryRetries.)
func TestWorkerRetriesTransientFailures(t *testing.T) {
	e := newEnv(t)
	net := sim.New(0)
	chat := e.inbound(mainLine, alice, "hi").Chat
	net.FailSends(alice, errors.New("network busy"), errors.New("network busy"))
	item := e.sendText(chat, "third time lucky")
	e.run(net, delivery.Options{})

	item = e.wait(item.ID, completed)
	if item.Status != storage.StatusSent || item.Attempts != 3 || item.MaxAttempts != 3 || item.Error != "" {
		t.Fatalf("after two transient failures: %+v", item)
	}
	if out := net.Delivered(); len(out) != 1 || out[0].Text != "third time lucky" {
		t.Fatalf("network got %+v", out)
	}
	if mine := e.fromMe(chat.ID); len(mine) != 1 {
		t.Fatalf("stored %d sent messages", len(mine))
	}
}

// A permanent failure fails at once; transient failures beyond
// max_attempts fail the item. Neither leaves a message in the history.
// (Moved down from the end-to-end TestDeliveryRetries.)
func TestWorkerFailures(t *testing.T) {
	e := newEnv(t)
	net := sim.New(0)
	bobChat := e.inbound(mainLine, bob, "hi").Chat
	carolChat := e.inbound(mainLine, carol, "hi").Chat
	net.FailSends(bob, bridge.Permanent(errors.New("recipient unreachable")))
	net.FailSends(carol, errors.New("e1"), errors.New("e2"), errors.New("e3"))
	lost := e.sendText(bobChat, "lost")
	never := e.sendText(carolChat, "never")
	m := metrics.New(e.db, quiet)
	e.run(net, delivery.Options{Metrics: m})

	if item := e.wait(lost.ID, completed); item.Status != storage.StatusFailed || item.Attempts != 1 ||
		item.Error != "recipient unreachable" || item.CompletedAt == 0 {
		t.Fatalf("after a permanent failure: %+v", item)
	}
	if item := e.wait(never.ID, completed); item.Status != storage.StatusFailed || item.Attempts != 3 || item.Error != "e3" ||
		*item.Text != "never" || item.ChatID != carolChat.ID {
		t.Fatalf("after max_attempts transient failures: %+v", item)
	}
	for _, c := range []storage.Chat{bobChat, carolChat} {
		if mine := e.fromMe(c.ID); len(mine) != 0 {
			t.Errorf("a failed send is in %s's history: %+v", c.Identifier, mine)
		}
	}
	if out := net.Delivered(); len(out) != 0 {
		t.Errorf("network got %+v", out)
	}
	// Four attempts failed: two retried, two failed.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`blueline_outbox_sends_total{outcome="failed"} 2`, `blueline_outbox_sends_total{outcome="retried"} 2`,
		`blueline_bridge_send_seconds_count{bridge="sim"} 4`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// After a transient failure the item waits RetryBase (with jitter, between
// half and all of it) before its next attempt.
func TestWorkerBackoff(t *testing.T) {
	e := newEnv(t)
	fb := &fakeBridge{script: []func(context.Context, bridge.Outgoing) error{
		func(context.Context, bridge.Outgoing) error { return errors.New("busy") },
	}}
	chat := e.inbound(mainLine, alice, "hi").Chat
	before := time.Now().UnixMilli()
	item := e.sendText(chat, "later")
	const base = time.Hour
	e.run(fb, delivery.Options{RetryBase: base, RetryMax: 4 * base})

	item = e.wait(item.ID, func(i storage.OutboxItem) bool { return i.Error != "" })
	after := time.Now().UnixMilli()
	if item.Status != storage.StatusPending || item.Attempts != 1 || item.Error != "busy" {
		t.Fatalf("after a transient failure: %+v", item)
	}
	if lo, hi := before+base.Milliseconds()/2, after+base.Milliseconds(); item.NextAttemptAt < lo || item.NextAttemptAt > hi {
		t.Fatalf("next attempt at %d, want within [%d, %d]", item.NextAttemptAt, lo, hi)
	}
	if n := len(fb.handed()); n != 1 {
		t.Fatalf("bridge handed %d sends before the retry was due", n)
	}
}

// Once the bridge has called Handoff, an error is final unless marked
// NotSent: sending again could duplicate the message.
func TestWorkerHandoff(t *testing.T) {
	t.Run("unknown outcome fails at once", func(t *testing.T) {
		e := newEnv(t)
		fb := &fakeBridge{script: []func(context.Context, bridge.Outgoing) error{handOffThen(errors.New("script timed out"))}}
		item := e.sendText(e.inbound(mainLine, alice, "hi").Chat, "once")
		e.run(fb, delivery.Options{})
		item = e.wait(item.ID, completed)
		if item.Status != storage.StatusFailed || item.Attempts != 1 || item.HandedAt == 0 ||
			!strings.Contains(item.Error, "not retried to avoid a duplicate") || !strings.Contains(item.Error, "script timed out") {
			t.Fatalf("item: %+v", item)
		}
		if n := len(fb.handed()); n != 1 {
			t.Fatalf("bridge handed %d sends", n)
		}
	})
	t.Run("NotSent is retried", func(t *testing.T) {
		e := newEnv(t)
		fb := &fakeBridge{script: []func(context.Context, bridge.Outgoing) error{handOffThen(bridge.NotSent(errors.New("Messages not running")))}}
		chat := e.inbound(mainLine, alice, "hi").Chat
		item := e.sendText(chat, "twice")
		e.run(fb, delivery.Options{})
		item = e.wait(item.ID, completed)
		if item.Status != storage.StatusSent || item.Attempts != 2 || item.SMSFallback != true || item.SentService != "sms" {
			t.Fatalf("item: %+v", item)
		}
		sends := fb.handed()
		if len(sends) != 2 || !sends[1].HandedAt.IsZero() {
			t.Fatalf("bridge handed %+v; the retry must not look for an earlier hand-off", sends)
		}
		if mine := e.fromMe(chat.ID); len(mine) != 1 || mine[0].Service != "sms" {
			t.Fatalf("stored %+v", mine)
		}
	})
	t.Run("permanent keeps its own error", func(t *testing.T) {
		e := newEnv(t)
		fb := &fakeBridge{script: []func(context.Context, bridge.Outgoing) error{handOffThen(bridge.Permanent(errors.New("not delivered")))}}
		item := e.sendText(e.inbound(mainLine, alice, "hi").Chat, "once")
		e.run(fb, delivery.Options{})
		if item = e.wait(item.ID, completed); item.Status != storage.StatusFailed || item.Attempts != 1 || item.Error != "not delivered" {
			t.Fatalf("item: %+v", item)
		}
	})
}

// A bridge that does not answer within SendTimeout is given up on, and the
// attempt counts as a transient failure.
func TestWorkerSendTimeout(t *testing.T) {
	e := newEnv(t)
	hang := func(ctx context.Context, _ bridge.Outgoing) error { <-ctx.Done(); return ctx.Err() }
	fb := &fakeBridge{script: []func(context.Context, bridge.Outgoing) error{hang, hang}}
	item := e.enqueue(storage.OutboxItem{ChatID: e.inbound(mainLine, alice, "hi").Chat.ID, MaxAttempts: 2})
	e.run(fb, delivery.Options{SendTimeout: 20 * time.Millisecond})
	item = e.wait(item.ID, completed)
	if item.Status != storage.StatusFailed || item.Attempts != 2 || !strings.Contains(item.Error, "did not answer within 20ms") {
		t.Fatalf("item: %+v", item)
	}
	if n := len(fb.handed()); n != 2 {
		t.Fatalf("bridge handed %d sends", n)
	}
}

// Items claimed when the daemon stopped are sent at the next start; one
// handed to the network keeps HandedAt, so that its bridge only looks for it.
func TestWorkerRecoversClaimedItems(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	chat := e.inbound(mainLine, alice, "hi").Chat
	plain, handed := e.sendText(chat, "plain"), e.sendText(chat, "handed")
	// A previous run claimed both and handed one over, then died.
	if claimed, _, err := e.db.ClaimDue(ctx, time.Now().Add(time.Minute).UnixMilli(), 10); err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	if err := e.db.MarkHanded(ctx, handed.ID); err != nil {
		t.Fatal(err)
	}
	fb := &fakeBridge{}
	e.run(fb, delivery.Options{})
	for _, id := range []string{plain.ID, handed.ID} {
		if item := e.wait(id, completed); item.Status != storage.StatusSent || item.Attempts != 2 {
			t.Fatalf("recovered item: %+v", item)
		}
	}
	got := map[string]bool{}
	for _, out := range fb.handed() {
		got[out.Text] = !out.HandedAt.IsZero()
	}
	if len(got) != 2 || got["plain"] || !got["handed"] {
		t.Fatalf("bridge handed (text → HandedAt set): %v", got)
	}
}

// What the worker cannot send at all fails at once: a line without a
// bridge, a missing attachment.
func TestWorkerUnsendable(t *testing.T) {
	e := newEnv(t)
	fb := &fakeBridge{}
	otherChat := e.inbound(otherLine, alice, "hi").Chat
	noBridge := e.enqueue(storage.OutboxItem{LineID: e.other.ID, ChatID: otherChat.ID})
	chat := e.inbound(mainLine, alice, "hi").Chat
	noFile := e.enqueue(storage.OutboxItem{ChatID: chat.ID, FileIDs: []string{"file_missing"}})
	badKind := e.enqueue(storage.OutboxItem{Kind: "carrier-pigeon", ChatID: chat.ID})
	e.run(fb, delivery.Options{})
	for id, want := range map[string]string{noBridge.ID: "has no bridge", noFile.ID: "attachment file_missing", badKind.ID: `unknown outbox item kind "carrier-pigeon"`} {
		if item := e.wait(id, completed); item.Status != storage.StatusFailed || item.Attempts != 1 || !strings.Contains(item.Error, want) {
			t.Errorf("want failed with %q: %+v", want, item)
		}
	}
	if n := len(fb.handed()); n != 0 {
		t.Fatalf("bridge handed %d sends", n)
	}
}

// An attachment goes to the bridge as the file on disk, and the sent
// message carries it.
func TestWorkerSendsAttachment(t *testing.T) {
	e := newEnv(t)
	f, err := e.files.Save(context.Background(), strings.NewReader("pretend PNG"), "cat.png", "image/png", storage.FileScope{LineID: e.line.ID})
	if err != nil {
		t.Fatal(err)
	}
	chat := e.inbound(mainLine, alice, "hi").Chat
	item := e.enqueue(storage.OutboxItem{ChatID: chat.ID, FileIDs: []string{f.ID}})
	fb := &fakeBridge{}
	e.run(fb, delivery.Options{})
	if item = e.wait(item.ID, completed); item.Status != storage.StatusSent {
		t.Fatalf("item: %+v", item)
	}
	sends := fb.handed()
	if len(sends) != 1 || sends[0].Attachment == nil || sends[0].Attachment.Path != e.files.Path(f.ID) ||
		sends[0].Attachment.Filename != "cat.png" || sends[0].Attachment.Size != int64(len("pretend PNG")) {
		t.Fatalf("bridge handed %+v", sends)
	}
	mine := e.fromMe(chat.ID)
	if len(mine) != 1 || len(mine[0].Attachments) != 1 || mine[0].Attachments[0].FileID != f.ID || mine[0].Text != nil {
		t.Fatalf("stored %+v", mine)
	}
}

// Sends to one chat reach the network in the order they were accepted,
// while several chats are served at once. (Moved down from the end-to-end
// TestSendOrderPerChat.)
func TestWorkerSendOrderPerChat(t *testing.T) {
	e := newEnv(t)
	net := sim.New(0)
	contacts := []string{alice, bob, carol}
	chats := map[string]storage.Chat{}
	for _, c := range contacts {
		chats[c] = e.inbound(mainLine, c, "hi").Chat
	}
	e.run(net, delivery.Options{Workers: 4})
	const n = 40
	var ids []string
	for i := range n {
		for _, c := range contacts {
			ids = append(ids, e.sendText(chats[c], fmt.Sprint(i)).ID)
		}
	}
	for _, id := range ids {
		if item := e.wait(id, completed); item.Status != storage.StatusSent {
			t.Fatalf("item: %+v", item)
		}
	}
	out := net.Delivered()
	if len(out) != n*len(contacts) {
		t.Fatalf("network got %d messages", len(out))
	}
	next := map[string]int{}
	for _, o := range out {
		if want := fmt.Sprint(next[o.Chat.Identifier]); o.Text != want {
			t.Fatalf("to %s: got %q, want %q", o.Chat.Identifier, o.Text, want)
		}
		next[o.Chat.Identifier]++
	}
}

func deliveryOptions() delivery.Options { return delivery.Options{} }
