package messages

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// The bridge's own tests: a Bridge opened with Open on a real chat.db
// (chatdbtest), run with Run, and asserted on what it hands its sink. The
// fakes are only at the edges this package cannot run: osascript (a Runner
// that plays Messages, writing the rows Messages would) and the private-API
// helper (a fake peer on the helper's socket).

const (
	rigLine  = "+15550009999" // the line's handle
	alice    = "+15551230001"
	bob      = "+15551230002"
	carol    = "+15551230003"
	stranger = "+15559870000"
)

// rigWait bounds every wait of these tests: a failure, never
// synchronisation.
const rigWait = 5 * time.Second

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, rigWait, cond)
}

// memCursor is a Cursor in memory.
type memCursor struct {
	mu    sync.Mutex
	rowID int64
	ok    bool
	saves []int64
	// loadErr, when set, is what Load answers.
	loadErr error
}

func (c *memCursor) Load(context.Context) (int64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rowID, c.ok, c.loadErr
}

func (c *memCursor) Save(_ context.Context, rowID int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rowID, c.ok = rowID, true
	c.saves = append(c.saves, rowID)
	return nil
}

// saved is the cursor as last saved (-1: never).
func (c *memCursor) saved() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return -1
	}
	return c.rowID
}

func (c *memCursor) allSaves() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.saves)
}

var errDiskFull = errors.New("disk full")

// memSink is the bridge's boundary: it records what the bridge hands it,
// and answers as the daemon's receiver does (ErrNotRecorded for a message
// it has no record of).
type memSink struct {
	mu sync.Mutex
	// offered are all the messages given to Receive, live those it
	// stored (not twins, not failed).
	offered, live []bridge.Inbound
	history       []bridge.Inbound
	imported      int
	reactions     []bridge.InboundReaction
	updates       []bridge.MessageUpdate
	chatUpdates   []bridge.ChatUpdate
	typing        []bridge.InboundTyping
	failures      []bridge.SendFailure
	known         map[string]bool
	// refused counts the updates refused with ErrNotRecorded, by GUID.
	refused map[string]int

	// twins are GUIDs the sink takes as twins of stored messages.
	twins map[string]bool
	// failLive makes Receive fail for a GUID that many times;
	// failHistory makes ReceiveHistory fail that many times.
	failLive    map[string]int
	failHistory int
	// failUpdate makes ReceiveUpdate fail for a GUID that many times.
	failUpdate  map[string]int
	failedCalls int
	// cursor, when set, is read at each stored live message: where the
	// saved cursor stood then (cursorAt).
	cursor   *memCursor
	cursorAt map[string]int64
}

func newMemSink() *memSink {
	return &memSink{known: map[string]bool{}, refused: map[string]int{}, twins: map[string]bool{}, failLive: map[string]int{}, failUpdate: map[string]int{}, cursorAt: map[string]int64{}}
}

func (s *memSink) Receive(_ context.Context, in bridge.Inbound) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = append(s.offered, in)
	if s.failLive[in.GUID] > 0 {
		s.failLive[in.GUID]--
		s.failedCalls++
		return false, errDiskFull
	}
	if s.twins[in.GUID] {
		// The twin's GUID names the stored message from now on, as the
		// daemon's storage keeps it.
		s.known[in.GUID] = true
		return true, nil
	}
	if s.cursor != nil {
		s.cursorAt[in.GUID] = s.cursor.saved()
	}
	s.live = append(s.live, in)
	s.known[in.GUID] = true
	return false, nil
}

func (s *memSink) ReceiveHistory(_ context.Context, line string, msgs []bridge.Inbound) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failHistory > 0 {
		s.failHistory--
		s.failedCalls++
		return nil, errDiskFull
	}
	var twins []string
	for _, m := range msgs {
		if m.Line != line {
			return nil, fmt.Errorf("history of line %q given for line %q", m.Line, line)
		}
		if s.twins[m.GUID] {
			twins = append(twins, m.GUID)
			s.known[m.GUID] = true
			continue
		}
		s.history = append(s.history, m)
		s.known[m.GUID] = true
	}
	return twins, nil
}

func (s *memSink) ImportHistory(ctx context.Context, line string, pages iter.Seq2[[]bridge.Inbound, error]) error {
	for page, err := range pages {
		if err != nil {
			return err
		}
		if _, err := s.ReceiveHistory(ctx, line, page); err != nil {
			return err
		}
	}
	return nil
}

func (s *memSink) HistoryImported(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imported++
	return nil
}

func (s *memSink) ReceiveReaction(_ context.Context, in bridge.InboundReaction) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known[in.TargetGUID] {
		return bridge.ErrNotRecorded
	}
	s.reactions = append(s.reactions, in)
	return nil
}

func (s *memSink) ReceiveUpdate(_ context.Context, u bridge.MessageUpdate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known[u.GUID] {
		s.refused[u.GUID]++
		return bridge.ErrNotRecorded
	}
	if s.failUpdate[u.GUID] > 0 {
		s.failUpdate[u.GUID]--
		s.failedCalls++
		return errDiskFull
	}
	s.updates = append(s.updates, u)
	return nil
}

func (s *memSink) ReceiveChatUpdate(_ context.Context, u bridge.ChatUpdate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chatUpdates = append(s.chatUpdates, u)
	return nil
}

func (s *memSink) ReceiveTyping(_ context.Context, in bridge.InboundTyping) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typing = append(s.typing, in)
	return nil
}

func (s *memSink) ReceiveRead(context.Context, bridge.InboundRead) error { return nil }

func (s *memSink) ReceiveSendFailure(_ context.Context, f bridge.SendFailure) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known[f.GUID] {
		return bridge.ErrNotRecorded
	}
	s.failures = append(s.failures, f)
	return nil
}

// know makes the sink hold a record of guid (as the outbox does for a
// send of the line's).
func (s *memSink) know(guid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known[guid] = true
}

// refusedUpdates is how many updates of guid the sink refused as not
// recorded.
func (s *memSink) refusedUpdates(guid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[guid]
}

// sinkState is a copy of what a memSink holds.
type sinkState struct {
	offered, live, history []bridge.Inbound
	imported               int
	reactions              []bridge.InboundReaction
	updates                []bridge.MessageUpdate
	chatUpdates            []bridge.ChatUpdate
	typing                 []bridge.InboundTyping
	failures               []bridge.SendFailure
	failedCalls            int
	cursorAt               map[string]int64
}

func (s *memSink) state() sinkState {
	s.mu.Lock()
	defer s.mu.Unlock()
	cursorAt := make(map[string]int64, len(s.cursorAt))
	for k, v := range s.cursorAt {
		cursorAt[k] = v
	}
	return sinkState{offered: slices.Clone(s.offered), live: slices.Clone(s.live), history: slices.Clone(s.history), imported: s.imported,
		reactions: slices.Clone(s.reactions), updates: slices.Clone(s.updates), chatUpdates: slices.Clone(s.chatUpdates),
		typing: slices.Clone(s.typing), failures: slices.Clone(s.failures), failedCalls: s.failedCalls, cursorAt: cursorAt}
}

func findInbound(msgs []bridge.Inbound, guid string) (bridge.Inbound, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GUID == guid {
			return msgs[i], true
		}
	}
	return bridge.Inbound{}, false
}

func countInbound(msgs []bridge.Inbound, guid string) int {
	n := 0
	for _, m := range msgs {
		if m.GUID == guid {
			n++
		}
	}
	return n
}

func guidsOf(msgs []bridge.Inbound) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.GUID
	}
	return out
}

// waitLive waits until the sink stored guid as news, and returns it.
func (s *memSink) waitLive(t *testing.T, guid string) bridge.Inbound {
	t.Helper()
	return s.waitStored(t, guid, func(st sinkState) []bridge.Inbound { return st.live })
}

// waitHistory waits until the sink stored guid as history, and returns
// it.
func (s *memSink) waitHistory(t *testing.T, guid string) bridge.Inbound {
	t.Helper()
	return s.waitStored(t, guid, func(st sinkState) []bridge.Inbound { return st.history })
}

// waitStored waits until guid is among the messages that in picks from
// the sink's state, and returns it.
func (s *memSink) waitStored(t *testing.T, guid string, in func(sinkState) []bridge.Inbound) bridge.Inbound {
	t.Helper()
	var found bridge.Inbound
	waitUntil(t, func() bool {
		var ok bool
		found, ok = findInbound(in(s.state()), guid)
		return ok
	})
	return found
}

// waitUpdate waits for an update of guid for which ok holds.
func (s *memSink) waitUpdate(t *testing.T, guid string, ok func(bridge.MessageUpdate) bool) bridge.MessageUpdate {
	t.Helper()
	var got bridge.MessageUpdate
	waitUntil(t, func() bool {
		for _, u := range s.state().updates {
			if u.GUID == guid && ok(u) {
				got = u
				return true
			}
		}
		return false
	})
	return got
}

// fakeMessages is the Runner of these tests: it records each script run
// and answers it with its handler, which plays Messages (writing the rows
// Messages would write to chat.db). A nil handler accepts every run and
// writes nothing.
type fakeMessages struct {
	mu      sync.Mutex
	calls   []scriptCall
	handler func(n int, c scriptCall) error
}

func (f *fakeMessages) Run(ctx context.Context, script string, args []string) (string, error) {
	d, _ := ctx.Deadline()
	c := scriptCall{script: script, args: slices.Clone(args), deadline: d}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	n, h := len(f.calls)-1, f.handler
	f.mu.Unlock()
	if h == nil {
		return "", nil
	}
	return "", h(n, c)
}

// answer replaces the handler and forgets the runs so far.
func (f *fakeMessages) answer(h func(n int, c scriptCall) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.handler = nil, h
}

// forget forgets the runs so far.
func (f *fakeMessages) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func (f *fakeMessages) recorded() []scriptCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// kinds names the runs so far by what their scripts do.
func (f *fakeMessages) kinds() []string {
	var out []string
	for _, c := range f.recorded() {
		out = append(out, scriptKind(c.script))
	}
	return out
}

func (f *fakeMessages) checkKinds(t *testing.T, want ...string) {
	t.Helper()
	if got := f.kinds(); !slices.Equal(got, want) {
		t.Fatalf("script runs %q, want %q", got, want)
	}
}

func scriptKind(script string) string {
	switch script {
	case sendTextToChatScript:
		return "text→chat"
	case sendTextToParticipantScript:
		return "text→participant"
	case sendFileToChatScript:
		return "file→chat"
	case sendFileToParticipantScript:
		return "file→participant"
	case pingMessagesScript:
		return "ping"
	case ensureMessagesScript:
		return "launch"
	case quitMessagesScript:
		return "quit"
	}
	return "unknown"
}

// scriptFailure is osascript's failure with AppleScript error code.
func scriptFailure(code int) *ScriptError {
	return &ScriptError{ExitCode: 1, Code: code, Stderr: fmt.Sprintf("0:120: execution error: Messages got an error. (%d)\n", code)}
}

// rig is a Bridge opened on a fixture chat.db, with its sink, cursor and
// stand-in Messages.
type rig struct {
	t      *testing.T
	db     *chatdbtest.Fixture
	cfg    Config
	b      *Bridge
	sink   *memSink
	cursor *memCursor
	mac    *fakeMessages
	logs   *testkit.LogBuffer
	stop   func()
}

// newRig opens a bridge on a new, empty chat.db. opts adjust its Config.
func newRig(t *testing.T, opts ...func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, db: chatdbtest.New(t, t.TempDir()), sink: newMemSink(), cursor: &memCursor{}, mac: &fakeMessages{},
		logs: &testkit.LogBuffer{}}
	r.sink.cursor = r.cursor
	r.cfg = Config{
		Line: rigLine, Service: "imessage", ChatDB: r.db.Path(), AttachmentsDir: t.TempDir(), MacOSVersion: "15.1",
		Cursor: r.cursor, PollOnly: true, Poll: 20 * time.Millisecond, Debounce: time.Millisecond,
		TextTimeout: time.Second, FileTimeout: time.Second, TransferWait: time.Minute, LaunchWait: time.Second,
		LaunchRetryPause: 10 * time.Millisecond, PingEvery: -1, Runner: r.mac,
		Log: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&r.cfg)
	}
	r.b = openBridge(t, r.cfg)
	return r
}

// openBridge opens a bridge with cfg on a free loopback port, then puts a
// test helper server in place of the one Open started: the fake helper
// peers are this process, which the platform's peer check would refuse
// on a Mac (TestHelperPeerCheck covers that check).
func openBridge(t *testing.T, cfg Config) *Bridge {
	t.Helper()
	var b *Bridge
	var err error
	for range 5 { // another test may take the free port meanwhile
		cfg.HelperPort = freeLoopbackPort(t)
		if b, err = Open(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "helper listener") {
			break
		}
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.helper.Close(); err != nil {
		t.Fatal(err)
	}
	b.helper = newTestHelper(t)
	return b
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// run runs the bridge into the rig's sink until the test ends (or stop).
func (r *rig) run() {
	r.t.Helper()
	r.stop = runBridge(r.t, r.b, r.sink)
}

// start runs the bridge and waits for the first start's history import.
func (r *rig) start() {
	r.t.Helper()
	r.run()
	waitUntil(r.t, func() bool { return r.sink.state().imported > 0 })
}

// runBridge runs b into sink until the test ends or the returned stop is
// called; stop waits for Run to return, and fails the test on its error.
func runBridge(t *testing.T, b *Bridge, sink bridge.Sink) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(rigWait):
				t.Errorf("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// sentinel inserts a contact's message and waits for it: what the bridge
// read before it has been handled.
func (r *rig) sentinel(chat chatdbtest.ChatRef, from string) (rowID int64, guid string) {
	r.t.Helper()
	rowID, guid = r.db.Insert(chatdbtest.Msg{Chat: chat, From: from, Text: "sentinel"})
	r.sink.waitLive(r.t, guid)
	return rowID, guid
}

func (r *rig) maxRowID() int64 {
	r.t.Helper()
	var n int64
	if err := r.db.QueryRow("SELECT IFNULL(MAX(ROWID), 0) FROM message").Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// conversation is an outgoing action's conversation with a one-to-one
// chat (or a group, with its identifier).
func conversation(guid, identifier string, group bool) bridge.Conversation {
	c := bridge.Chat{GUID: guid, Identifier: identifier, IsGroup: group}
	if !group {
		c.Participants = []string{identifier}
	}
	service := "imessage"
	if strings.HasPrefix(guid, "SMS;") {
		service = "sms"
	}
	return bridge.Conversation{OutboxID: "obx_1", Line: rigLine, Service: service, Chat: c}
}

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenAndClose(t *testing.T) {
	t.Parallel()
	db := chatdbtest.New(t, t.TempDir())

	t.Run("a missing chat.db", func(t *testing.T) {
		_, err := Open(t.Context(), Config{Line: rigLine, ChatDB: filepath.Join(t.TempDir(), "none", "chat.db"), Cursor: &memCursor{},
			HelperPort: freeLoopbackPort(t)})
		if err == nil || !strings.Contains(err.Error(), rigLine) {
			t.Fatalf("Open on a missing chat.db: %v", err)
		}
	})
	t.Run("a helper port out of range", func(t *testing.T) {
		_, err := Open(t.Context(), Config{Line: rigLine, ChatDB: db.Path(), Cursor: &memCursor{}, HelperPort: 70000})
		if err == nil || !strings.Contains(err.Error(), "private-API helper listener") {
			t.Fatalf("Open with port 70000: %v", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skip("no home folder:", err)
		}
		b, err := Open(t.Context(), Config{Line: rigLine, ChatDB: db.Path(), AttachmentsDir: "~/Library/Messages/Attachments/blueline",
			Cursor: &memCursor{}, HelperPort: freeLoopbackPort(t)})
		if err != nil {
			t.Fatal(err)
		}
		c := b.cfg
		if c.Poll != time.Second || c.Debounce != 25*time.Millisecond || c.TextTimeout != 30*time.Second || c.FileTimeout != 3*time.Minute ||
			c.TransferWait != 2*time.Minute || c.LaunchWait != 30*time.Second || c.LaunchRetryPause != 2*time.Second ||
			c.PingEvery != 5*time.Minute || c.Log == nil {
			t.Errorf("defaults: %+v", c)
		}
		if want := filepath.Join(home, "Library/Messages/Attachments/blueline"); c.AttachmentsDir != want {
			t.Errorf("AttachmentsDir %q, want %q", c.AttachmentsDir, want)
		}
		if _, ok := c.Runner.(Osascript); !ok {
			t.Errorf("Runner %T, want Osascript", c.Runner)
		}
		if b.Advanced() {
			t.Error("Advanced with no helper connected")
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// Closed: the database no longer answers.
		if _, err := b.db.Load().MaxRowID(t.Context()); err == nil {
			t.Error("chat.db still readable after Close")
		}
	})
}

// Capabilities name why each feature cannot be used now.
func TestBridgeCapabilities(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for f, why := range r.b.Capabilities() {
		if why != "the private-API helper is not connected" {
			t.Errorf("no helper: %s: %q", f, why)
		}
	}
	peer := connectPeer(t, r.b.helper)
	waitConnected(t, r.b.helper, true)
	got := r.b.Capabilities()
	for _, f := range []string{"reactions", "typing", "receipts", "edit", "unsend", "groups", "availability", "audio_messages", "threaded_replies"} {
		if got[f] != "" {
			t.Errorf("helper connected: %s: %q", f, got[f])
		}
	}
	if got["emoji_reactions"] != noEmojiReactions {
		t.Errorf("emoji_reactions %q", got["emoji_reactions"])
	}
	// A chat.db that cannot be read: groups, found there, cannot be made.
	r.b.health.read(errors.New("authorization denied"))
	if got := r.b.Capabilities()["groups"]; !strings.Contains(got, "chat.db is not readable") {
		t.Errorf("groups with chat.db unreadable: %q", got)
	}
	if h := r.b.Health(); h.ChatDB != "not readable (see the log)" || h.Helper != "connected" {
		t.Errorf("health %+v", h)
	}
	r.b.health.read(nil)

	// An SMS line has no edits, unsends or emoji tapbacks.
	r.b.cfg.Service = "sms"
	got = r.b.Capabilities()
	for _, f := range []string{"edit", "unsend", "emoji_reactions"} {
		if got[f] != "not on an SMS line" {
			t.Errorf("SMS line: %s: %q", f, got[f])
		}
	}
	r.b.cfg.Service = "imessage"

	// Availability asks the helper.
	done := make(chan error, 1)
	var available bool
	go func() {
		var err error
		available, err = r.b.Availability(t.Context(), rigLine, alice)
		done <- err
	}()
	f := peer.frame()
	if f["action"] != "check-imessage-availability" {
		t.Fatalf("frame %v", f)
	}
	peer.answer(f, map[string]any{"data": map[string]any{"available": true}})
	if err := <-done; err != nil || !available {
		t.Fatalf("Availability: %v, %v", available, err)
	}
	peer.conn.Close()
	waitConnected(t, r.b.helper, false)
	if _, err := r.b.Availability(t.Context(), rigLine, alice); !bridge.IsNotSent(err) {
		t.Fatalf("Availability with no helper: %v", err)
	}
}
