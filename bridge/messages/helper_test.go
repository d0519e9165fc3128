package messages

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/testkit"
)

// testGuard bounds every wait in these tests; it is a failure, never
// synchronisation.
const testGuard = 10 * time.Second

// acceptAll is the peer check of the protocol's tests: the fake helpers
// are this process, not Messages (TestHelperPeerCheck covers the check).
var acceptAll = PeerCheckFunc(func(context.Context, net.Conn) error { return nil })

// newTestHelper starts a server on a free loopback port, without the
// spacing between frames (TestHelperSpacesFrames covers it), taking every
// connection that comes.
func newTestHelper(t *testing.T) *HelperServer {
	t.Helper()
	return newCheckedTestHelper(t, acceptAll, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// newCheckedTestHelper is newTestHelper with the peer check check.
func newCheckedTestHelper(t *testing.T, check PeerChecker, log *slog.Logger) *HelperServer {
	t.Helper()
	h, err := listenHelper(t.Context(), 0, log, check)
	if err != nil {
		t.Fatal(err)
	}
	h.writeMu.Lock()
	h.writeGap = 0
	h.writeMu.Unlock()
	t.Cleanup(func() { h.Close() })
	return h
}

// helperPeer is a fake helper: it dials the server and speaks the
// protocol as the real one does, its lines ending in "\r\n".
type helperPeer struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

// dialPeer connects a fake helper without announcing it.
func dialPeer(t *testing.T, h *HelperServer) *helperPeer {
	t.Helper()
	conn, err := net.DialTimeout("tcp", h.Addr().String(), testGuard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &helperPeer{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// connectPeer connects a fake helper, sends the helper's greeting and
// waits for the server to deliver it: the server has then taken the
// connection.
func connectPeer(t *testing.T, h *HelperServer) *helperPeer {
	t.Helper()
	p := dialPeer(t, h)
	p.send(map[string]any{"event": "ping", "message": "Helper Connected!", "process": "com.apple.MobileSMS"})
	ev := nextEvent(t, h)
	if ev.Name != "ping" {
		t.Fatalf("first event %q, want ping", ev.Name)
	}
	return p
}

func (p *helperPeer) send(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendLine(string(b))
}

// tryLines writes lines in one write, which may fail: the server may
// already have closed a connection it refuses.
func (p *helperPeer) tryLines(lines ...string) {
	io.WriteString(p.conn, strings.Join(lines, "\r\n")+"\r\n")
}

func (p *helperPeer) sendLine(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.conn, line+"\r\n"); err != nil {
		p.t.Fatal(err)
	}
}

// answer answers a request frame.
func (p *helperPeer) answer(req map[string]any, fields map[string]any) {
	p.t.Helper()
	msg := map[string]any{"transactionId": req["transactionId"]}
	for k, v := range fields {
		msg[k] = v
	}
	p.send(msg)
}

// readFrame reads one frame from the server; it may run off the test's
// goroutine.
func (p *helperPeer) readFrame() (map[string]any, string, error) {
	p.conn.SetReadDeadline(time.Now().Add(testGuard))
	line, err := p.r.ReadString('\n')
	if err != nil {
		return nil, line, err
	}
	if strings.HasSuffix(line, "\r\n") {
		return nil, line, fmt.Errorf("frame ends in \\r\\n: %q", line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return nil, line, fmt.Errorf("frame %q: %w", line, err)
	}
	return m, line, nil
}

func (p *helperPeer) frame() map[string]any {
	p.t.Helper()
	m, _, err := p.readFrame()
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

// expectClosed waits for the server to close the peer's connection.
func (p *helperPeer) expectClosed() {
	p.t.Helper()
	p.conn.SetReadDeadline(time.Now().Add(testGuard))
	_, err := io.Copy(io.Discard, p.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		p.t.Fatal("the server kept the connection open")
	}
}

func nextEvent(t *testing.T, h *HelperServer) Event {
	t.Helper()
	select {
	case ev, ok := <-h.Events():
		if !ok {
			t.Fatal("events channel closed")
		}
		return ev
	case <-time.After(testGuard):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// waitConnected waits until Connected reports want, woken by the server's
// own state changes.
func waitConnected(t *testing.T, h *HelperServer, want bool) {
	t.Helper()
	timeout := time.After(testGuard)
	for {
		got, changed := h.connState()
		if got == want {
			if h.Connected() != want {
				t.Fatalf("Connected() disagrees with the state")
			}
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("Connected() stayed %v", got)
		}
	}
}

type requestResult struct {
	id  string
	err error
}

// async runs a request off the test's goroutine.
func async(f func() (string, error)) <-chan requestResult {
	ch := make(chan requestResult, 1)
	go func() {
		id, err := f()
		ch <- requestResult{id, err}
	}()
	return ch
}

func result(t *testing.T, ch <-chan requestResult) requestResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testGuard):
		t.Fatal("request never returned")
	}
	panic("unreachable")
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("golden %s: %v", s, err)
	}
	return m
}

func TestHelperFrames(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	const chat = "iMessage;-;+15550102000"
	const target = "5A1B2C3D-0000-4000-8000-00000000ABCD"
	const path = "/Users/me/Library/Messages/Attachments/blueline/x/memo.caf"
	tests := []struct {
		name   string
		call   func(ctx context.Context) (string, error)
		answer bool // a request, answered; otherwise a notification
		want   string
	}{
		{
			name: "send-message",
			call: func(ctx context.Context) (string, error) {
				return h.SendMessage(ctx, chat, "hi <b>&</b> \"you\"\n😀", "")
			},
			answer: true,
			want: `{"action":"send-message","data":{"chatGuid":"iMessage;-;+15550102000","message":"hi <b>&</b> \"you\"\n😀",
				"subject":null,"attributedBody":null,"textFormatting":null,"effectId":null,"selectedMessageGuid":null,
				"partIndex":0,"ddScan":0}}`,
		},
		{
			name:   "send-message as a threaded reply",
			call:   func(ctx context.Context) (string, error) { return h.SendMessage(ctx, chat, "yes", target) },
			answer: true,
			want: `{"action":"send-message","data":{"chatGuid":"iMessage;-;+15550102000","message":"yes",
				"subject":null,"attributedBody":null,"textFormatting":null,"effectId":null,
				"selectedMessageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","partIndex":0,"ddScan":0}}`,
		},
		{
			name:   "send-reaction",
			call:   func(ctx context.Context) (string, error) { return h.SendReaction(ctx, chat, target, "love", false) },
			answer: true,
			want: `{"action":"send-reaction","data":{"chatGuid":"iMessage;-;+15550102000",
				"selectedMessageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","reactionType":"love","partIndex":0}}`,
		},
		{
			name:   "send-reaction removing",
			call:   func(ctx context.Context) (string, error) { return h.SendReaction(ctx, chat, target, "question", true) },
			answer: true,
			want: `{"action":"send-reaction","data":{"chatGuid":"iMessage;-;+15550102000",
				"selectedMessageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","reactionType":"-question","partIndex":0}}`,
		},
		{
			name:   "send-attachment as a voice memo reply",
			call:   func(ctx context.Context) (string, error) { return h.SendAttachment(ctx, chat, path, true, target) },
			answer: true,
			want: `{"action":"send-attachment","data":{"chatGuid":"iMessage;-;+15550102000",
				"filePath":"/Users/me/Library/Messages/Attachments/blueline/x/memo.caf","isAudioMessage":1,
				"attributedBody":null,"subject":null,"effectId":null,
				"selectedMessageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","partIndex":0}}`,
		},
		{
			name:   "send-attachment",
			call:   func(ctx context.Context) (string, error) { return h.SendAttachment(ctx, chat, path, false, "") },
			answer: true,
			want: `{"action":"send-attachment","data":{"chatGuid":"iMessage;-;+15550102000",
				"filePath":"/Users/me/Library/Messages/Attachments/blueline/x/memo.caf","isAudioMessage":0,
				"attributedBody":null,"subject":null,"effectId":null,"selectedMessageGuid":null,"partIndex":0}}`,
		},
		{
			name:   "a request without data",
			call:   func(ctx context.Context) (string, error) { return h.Request(ctx, "check-typing-status", nil) },
			answer: true,
			want:   `{"action":"check-typing-status","data":{}}`,
		},
		{
			name: "start-typing",
			call: func(ctx context.Context) (string, error) { return "", h.StartTyping(ctx, chat) },
			want: `{"action":"start-typing","data":{"chatGuid":"iMessage;-;+15550102000"}}`,
		},
		{
			name: "stop-typing",
			call: func(ctx context.Context) (string, error) { return "", h.StopTyping(ctx, chat) },
			want: `{"action":"stop-typing","data":{"chatGuid":"iMessage;-;+15550102000"}}`,
		},
		{
			name: "mark-chat-read",
			call: func(ctx context.Context) (string, error) { return "", h.MarkRead(ctx, "iMessage;+;chat123") },
			want: `{"action":"mark-chat-read","data":{"chatGuid":"iMessage;+;chat123"}}`,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := async(func() (string, error) { return tt.call(t.Context()) })
			got, line, err := p.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(line, "\n") != 1 {
				t.Errorf("frame %q is not one line", line)
			}
			if tt.answer {
				id, _ := got["transactionId"].(string)
				if !uuidV4.MatchString(id) {
					t.Errorf("transactionId %q is not a UUID", got["transactionId"])
				}
				delete(got, "transactionId")
				p.answer(map[string]any{"transactionId": id}, map[string]any{"identifier": "guid-" + strconv.Itoa(i)})
			} else if _, ok := got["transactionId"]; ok {
				t.Errorf("notification carries a transactionId: %s", line)
			}
			if want := mustJSON(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("frame\n got %s\nwant %s", line, tt.want)
			}
			r := result(t, res)
			if r.err != nil {
				t.Fatalf("call: %v", r.err)
			}
			if tt.answer && r.id != "guid-"+strconv.Itoa(i) {
				t.Errorf("identifier %q, want guid-%d", r.id, i)
			}
		})
	}
	t.Run("no HTML escaping", func(t *testing.T) {
		res := async(func() (string, error) { return "", h.Notify(t.Context(), "x", map[string]any{"s": "<&>"}) })
		_, line, err := p.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(line, `"<&>"`) {
			t.Errorf("frame %q escapes <&>", line)
		}
		result(t, res)
	})
}

func TestHelperReactionTypes(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	for _, typ := range bridge.ReactionTypes {
		for _, remove := range []bool{false, true} {
			res := async(func() (string, error) {
				return h.SendReaction(t.Context(), "iMessage;-;a@example.com", "target", typ, remove)
			})
			f := p.frame()
			want := typ
			if remove {
				want = "-" + typ
			}
			if got := f["data"].(map[string]any)["reactionType"]; got != want {
				t.Errorf("reactionType %v, want %q", got, want)
			}
			p.answer(f, map[string]any{"identifier": "r"})
			if r := result(t, res); r.err != nil {
				t.Fatal(r.err)
			}
		}
	}
}

func TestHelperAnswersMatchedOutOfOrder(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	texts := []string{"one", "two", "three", "four"}
	results := map[string]<-chan requestResult{}
	for _, text := range texts {
		results[text] = async(func() (string, error) {
			return h.SendMessage(t.Context(), "iMessage;+;chat1", text, "")
		})
	}
	frames := map[string]map[string]any{}
	for range texts {
		f := p.frame()
		frames[f["data"].(map[string]any)["message"].(string)] = f
	}
	// Answer in the reverse order, with a late event in between.
	for i := len(texts) - 1; i >= 0; i-- {
		p.answer(frames[texts[i]], map[string]any{"identifier": "guid-" + texts[i]})
		if i == 2 {
			p.send(map[string]any{"event": "started-typing", "guid": "iMessage;-;x"})
		}
	}
	for _, text := range texts {
		r := result(t, results[text])
		if r.err != nil || r.id != "guid-"+text {
			t.Errorf("%s: got (%q, %v), want guid-%s", text, r.id, r.err, text)
		}
	}
	if ev := nextEvent(t, h); ev.Name != "started-typing" {
		t.Errorf("event %q", ev.Name)
	}
}

func TestHelperErrorAnswers(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	tests := []struct {
		errValue any
		want     string // "" for success
	}{
		{"Chat does not exist!", "Chat does not exist!"},
		{map[string]any{"code": 4}, `{"code":4}`},
		{"", ""},
		{nil, ""},
		{false, ""},
	}
	for _, tt := range tests {
		res := async(func() (string, error) { return h.SendMessage(t.Context(), "iMessage;-;x", "hi", "") })
		f := p.frame()
		p.answer(f, map[string]any{"identifier": "guid", "error": tt.errValue})
		r := result(t, res)
		if tt.want == "" {
			if r.err != nil || r.id != "guid" {
				t.Errorf("error %v: got (%q, %v), want success", tt.errValue, r.id, r.err)
			}
			continue
		}
		var he *HelperError
		if !errors.As(r.err, &he) || he.Action != "send-message" || he.Message != tt.want {
			t.Errorf("error %v: got %v, want a HelperError %q", tt.errValue, r.err, tt.want)
		}
		if r.id != "" {
			t.Errorf("error %v: identifier %q with an error", tt.errValue, r.id)
		}
	}
}

func TestHelperEvents(t *testing.T) {
	h := newTestHelper(t)
	p := dialPeer(t, h)
	p.send(map[string]any{"event": "ping", "message": "Helper Connected!", "process": "com.apple.MobileSMS"})
	ev := nextEvent(t, h)
	if ev.Name != "ping" || ev.ChatGUID != "" || ev.Raw["message"] != "Helper Connected!" || ev.Raw["process"] != "com.apple.MobileSMS" {
		t.Errorf("ping = %+v", ev)
	}
	p.send(map[string]any{"event": "started-typing", "guid": "iMessage;-;+15550102000"})
	p.send(map[string]any{"event": "stopped-typing", "guid": "iMessage;-;+15550102000"})
	p.sendLine(`{"event":"typing","guid":"SMS;-;+15550102000","extra":[1,2]}`)
	for _, want := range []Event{
		{Name: "started-typing", ChatGUID: "iMessage;-;+15550102000"},
		{Name: "stopped-typing", ChatGUID: "iMessage;-;+15550102000"},
		{Name: "typing", ChatGUID: "SMS;-;+15550102000"},
	} {
		ev := nextEvent(t, h)
		if ev.Name != want.Name || ev.ChatGUID != want.ChatGUID || ev.Raw["event"] != want.Name || ev.Raw["guid"] != want.ChatGUID {
			t.Errorf("event %+v, want %+v", ev, want)
		}
	}
}

func TestHelperSkipsWhatItCannotUse(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	for _, line := range []string{"not json", "[1,2]", "null", "42", "", "   ", `{"foo":1}`,
		`{"transactionId":"nobody-waits","identifier":"x"}`, `{"transactionId":7,"identifier":"x"}`, `{"event":""}`} {
		p.sendLine(line)
	}
	// Two frames in one write, and a bare "\n" ending.
	if _, err := io.WriteString(p.conn, `{"event":"a"}`+"\r\n"+`{"event":"b"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		if ev := nextEvent(t, h); ev.Name != want {
			t.Errorf("event %q, want %q", ev.Name, want)
		}
	}
	if !h.Connected() {
		t.Fatal("garbage dropped the connection")
	}
	res := async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	p.answer(p.frame(), map[string]any{"identifier": "ok"})
	if r := result(t, res); r.err != nil || r.id != "ok" {
		t.Errorf("request after garbage: (%q, %v)", r.id, r.err)
	}
}

func TestHelperConnectedLifecycle(t *testing.T) {
	h := newTestHelper(t)
	if h.Connected() {
		t.Fatal("connected before any helper")
	}
	p := connectPeer(t, h)
	waitConnected(t, h, true)
	p.conn.Close()
	waitConnected(t, h, false)
	if _, err := h.Request(t.Context(), "ping", nil); !errors.Is(err, ErrHelperNotConnected) {
		t.Errorf("request while disconnected: %v", err)
	}

	// The helper reconnects.
	p = connectPeer(t, h)
	waitConnected(t, h, true)
	res := async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	p.answer(p.frame(), map[string]any{"identifier": "again"})
	if r := result(t, res); r.err != nil || r.id != "again" {
		t.Errorf("request after reconnecting: (%q, %v)", r.id, r.err)
	}
}

var helperPing = map[string]any{"event": "ping", "message": "Helper Connected!", "process": "com.apple.MobileSMS"}

// noEvent fails if an event is waiting.
func noEvent(t *testing.T, h *HelperServer) {
	t.Helper()
	select {
	case ev := <-h.Events():
		t.Errorf("event %q from a connection that was refused", ev.Name)
	default:
	}
}

// A second connection that passes the peer check, while the helper's is
// connected and open, is refused: the connected helper keeps its place and
// its requests.
func TestHelperSecondConnectionRefused(t *testing.T) {
	var logs testkit.LogBuffer
	h := newCheckedTestHelper(t, acceptAll, slog.New(slog.NewTextHandler(&logs, nil)))
	h.mu.Lock()
	h.replaceWait = 0
	h.mu.Unlock()
	first := connectPeer(t, h)
	pending := async(func() (string, error) { return h.SendMessage(t.Context(), "iMessage;-;x", "kept", "") })
	f := first.frame()
	_, changed := h.connState()

	second := dialPeer(t, h)
	second.tryLines(`{"event":"ping","message":"Helper Connected!"}`)
	second.expectClosed()
	select {
	case <-changed:
		t.Error("the second connection changed the connected helper")
	default:
	}
	first.answer(f, map[string]any{"identifier": "k"})
	if r := result(t, pending); r.err != nil || r.id != "k" {
		t.Errorf("request on the first connection: (%q, %v)", r.id, r.err)
	}
	noEvent(t, h)
	if got := logs.String(); !strings.Contains(got, "second private-API helper connection refused") {
		t.Errorf("no warning of the refusal in the log:\n%s", got)
	}
}

// The helper's new connection may arrive before the end of its old one is
// read (Messages relaunched): it waits for it, then takes its place.
func TestHelperReconnectsAfterTheOldConnectionEnds(t *testing.T) {
	checked := make(chan struct{}, 4)
	h := newCheckedTestHelper(t, PeerCheckFunc(func(context.Context, net.Conn) error {
		checked <- struct{}{}
		return nil
	}), nil)
	h.writeMu.Lock()
	h.writeGap = 0
	h.writeMu.Unlock()
	h.mu.Lock()
	h.replaceWait = testGuard
	h.mu.Unlock()
	old := connectPeer(t, h)
	<-checked

	p := dialPeer(t, h)
	p.send(helperPing)
	select {
	case <-checked:
	case <-time.After(testGuard):
		t.Fatal("the new connection was never checked")
	}
	old.conn.Close()
	if ev := nextEvent(t, h); ev.Name != "ping" {
		t.Fatalf("event %q, want the new connection's ping", ev.Name)
	}
	waitConnected(t, h, true)
	res := async(func() (string, error) { return h.SendMessage(t.Context(), "iMessage;-;x", "new", "") })
	f := p.frame()
	if f["data"].(map[string]any)["message"] != "new" {
		t.Errorf("frame %v", f)
	}
	p.answer(f, map[string]any{"identifier": "n"})
	if r := result(t, res); r.err != nil || r.id != "n" {
		t.Errorf("request on the new connection: (%q, %v)", r.id, r.err)
	}
}

// fakeLsof plays lsof for messagesPeer: the other end of a connection to
// server is held by process pid of uid, running program. Our own end is
// listed too, as lsof does.
type fakeLsof struct {
	t   *testing.T
	pid int
	lsofAnswers
	mu     sync.Mutex
	server string // the helper server's address, set once it listens
}

// lsofAnswers is what fakeLsof says.
type lsofAnswers struct {
	uid           int
	program       string
	failProgram   bool // the second question fails
	onlyOurOwnEnd bool // the other end is not found
}

func (f *fakeLsof) setServer(addr net.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.server = addr.String()
}

func (f *fakeLsof) run(_ context.Context, args ...string) ([]byte, error) {
	f.mu.Lock()
	server := f.server
	f.mu.Unlock()
	for _, a := range args {
		if peer, ok := strings.CutPrefix(a, "-iTCP@"); ok {
			var out strings.Builder
			if !f.onlyOurOwnEnd {
				fmt.Fprintf(&out, "p%d\nu%d\nf7\nn%s->%s\n", f.pid, f.uid, peer, server)
			}
			fmt.Fprintf(&out, "p%d\nu%d\nf9\nn%s->%s\n", os.Getpid(), os.Getuid(), server, peer)
			return []byte(out.String()), nil
		}
	}
	if strings.Join(args, " ") == "-nP -w -a -p "+strconv.Itoa(f.pid)+" -d txt -Fn" {
		if f.failProgram {
			return nil, errors.New("lsof: exit status 2")
		}
		return []byte(fmt.Sprintf("p%d\nftxt\nn%s\nftxt\nn/usr/lib/dyld\n", f.pid, f.program)), nil
	}
	f.t.Errorf("unexpected lsof %q", args)
	return nil, nil
}

// The Mac's peer check, with lsof played by fakeLsof: only Messages of the
// daemon's user gets in; a fake helper from any other process is closed
// unread and logged, without what it sent.
func TestHelperPeerCheck(t *testing.T) {
	uid := os.Getuid()
	for _, tt := range []struct {
		name string
		lsof lsofAnswers
		want string // in the log; "" when accepted
	}{
		{"Messages", lsofAnswers{uid: uid, program: messagesExecutables[0]}, ""},
		{"Messages before Catalina", lsofAnswers{uid: uid, program: messagesExecutables[1]}, ""},
		{"another program", lsofAnswers{uid: uid, program: "/usr/bin/python3"}, `process 4242 (\"/usr/bin/python3\") is not Messages`},
		{"a copy of Messages", lsofAnswers{uid: uid, program: "/tmp/Messages.app/Contents/MacOS/Messages"}, "is not Messages"},
		{"Messages of another user", lsofAnswers{uid: uid + 1, program: messagesExecutables[0]}, fmt.Sprintf("runs as uid %d, not as uid %d", uid+1, uid)},
		{"a process lsof cannot see", lsofAnswers{uid: uid, onlyOurOwnEnd: true}, "no process of uid"},
		{"lsof failing", lsofAnswers{uid: uid, program: messagesExecutables[0], failProgram: true}, "lsof: exit status 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testkit.LogBuffer
			lsof := &fakeLsof{t: t, pid: 4242, lsofAnswers: tt.lsof}
			h := newCheckedTestHelper(t, messagesPeer{uid: uid, lsof: lsof.run}, slog.New(slog.NewTextHandler(&logs, nil)))
			lsof.setServer(h.Addr())
			p := dialPeer(t, h)
			p.tryLines(`{"event":"ping","message":"Helper Connected!"}`, `{"event":"secret","token":"sk_live_do_not_log"}`)
			if tt.want == "" {
				if ev := nextEvent(t, h); ev.Name != "ping" {
					t.Fatalf("event %q, want ping", ev.Name)
				}
				waitConnected(t, h, true)
				return
			}
			p.expectClosed()
			noEvent(t, h)
			if h.Connected() {
				t.Error("connected")
			}
			got := logs.String()
			if !strings.Contains(got, "private-API helper connection refused") || !strings.Contains(got, tt.want) {
				t.Errorf("log lacks the refusal and %q:\n%s", tt.want, got)
			}
			if strings.Contains(got, "sk_live") {
				t.Errorf("the log shows what the refused connection sent:\n%s", got)
			}
		})
	}
}

// A connection that fails the check while the helper is connected changes
// nothing for the helper.
func TestHelperImpostorLeavesTheHelperAlone(t *testing.T) {
	var n sync.Mutex
	calls := 0
	h := newCheckedTestHelper(t, PeerCheckFunc(func(context.Context, net.Conn) error {
		n.Lock()
		defer n.Unlock()
		calls++
		if calls > 1 {
			return errors.New("not Messages")
		}
		return nil
	}), nil)
	h.writeMu.Lock()
	h.writeGap = 0
	h.writeMu.Unlock()
	helper := connectPeer(t, h)
	_, changed := h.connState()
	impostor := dialPeer(t, h)
	impostor.tryLines(`{"event":"ping","message":"Helper Connected!"}`)
	impostor.expectClosed()
	select {
	case <-changed:
		t.Error("the impostor changed the connected helper")
	default:
	}
	res := async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	helper.answer(helper.frame(), map[string]any{"identifier": "still mine"})
	if r := result(t, res); r.err != nil || r.id != "still mine" {
		t.Errorf("request after the impostor: (%q, %v)", r.id, r.err)
	}
}

func TestParseLsof(t *testing.T) {
	out := "p501\ncMessages\nu501\nf12\nn127.0.0.1:50001->127.0.0.1:45670\nf13\nn*:5000\np77\nu0\nfcwd\nn/\n\npbad\n"
	got := parseLsof([]byte(out))
	want := []lsofProcess{
		{PID: 501, UID: 501, Names: []string{"127.0.0.1:50001->127.0.0.1:45670", "*:5000"}},
		{PID: 77, UID: 0, Names: []string{"/"}},
		{PID: -1, UID: -1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseLsof = %+v\nwant %+v", got, want)
	}
}

func TestHelperLineLimit(t *testing.T) {
	h := newTestHelper(t)

	// A line of exactly the limit (its "\r" included) is taken.
	p := connectPeer(t, h)
	prefix, suffix := `{"event":"big","pad":"`, `"}`
	pad := helperMaxLine - len(prefix) - len(suffix) - len("\r")
	line := prefix + strings.Repeat("x", pad) + suffix
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(p.conn, line+"\r\n")
		written <- err
	}()
	ev := nextEvent(t, h)
	if s, _ := ev.Raw["pad"].(string); ev.Name != "big" || len(s) != pad {
		t.Fatalf("event %q with %d bytes of padding, want big with %d", ev.Name, len(s), pad)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !h.Connected() {
		t.Fatal("a line at the limit dropped the connection")
	}

	// One byte more is refused: the connection is dropped, the server
	// carries on.
	go func() {
		io.WriteString(p.conn, prefix+strings.Repeat("x", pad+1)+suffix+"\r\n")
	}()
	waitConnected(t, h, false)
	p.expectClosed()

	p = connectPeer(t, h)
	res := async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	p.answer(p.frame(), map[string]any{"identifier": "alive"})
	if r := result(t, res); r.err != nil || r.id != "alive" {
		t.Errorf("after an oversized line: (%q, %v)", r.id, r.err)
	}
}

func TestHelperRequestTimesOut(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	res := async(func() (string, error) { return h.SendMessage(ctx, "iMessage;-;x", "unanswered", "") })
	f := p.frame()
	r := result(t, res)
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", r.err)
	}
	h.mu.Lock()
	left := len(h.conn.pending)
	h.mu.Unlock()
	if left != 0 {
		t.Errorf("%d requests still pending", left)
	}

	// The late answer is dropped; the connection still works.
	p.answer(f, map[string]any{"identifier": "late"})
	res = async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	p.answer(p.frame(), map[string]any{"identifier": "on time"})
	if r := result(t, res); r.err != nil || r.id != "on time" {
		t.Errorf("next request: (%q, %v)", r.id, r.err)
	}
}

func TestHelperNotConnected(t *testing.T) {
	h := newTestHelper(t)
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"Request":        func() error { _, err := h.Request(ctx, "ping", nil); return err },
		"Notify":         func() error { return h.Notify(ctx, "start-typing", nil) },
		"SendMessage":    func() error { _, err := h.SendMessage(ctx, "iMessage;-;x", "hi", ""); return err },
		"SendReaction":   func() error { _, err := h.SendReaction(ctx, "iMessage;-;x", "t", "like", false); return err },
		"SendAttachment": func() error { _, err := h.SendAttachment(ctx, "iMessage;-;x", "/a.jpg", false, ""); return err },
		"StartTyping":    func() error { return h.StartTyping(ctx, "iMessage;-;x") },
		"StopTyping":     func() error { return h.StopTyping(ctx, "iMessage;-;x") },
		"MarkRead":       func() error { return h.MarkRead(ctx, "iMessage;-;x") },
	} {
		if err := call(); !errors.Is(err, ErrHelperNotConnected) {
			t.Errorf("%s: err = %v, want ErrHelperNotConnected", name, err)
		}
	}
}

func TestHelperRefusesBadRequests(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"message to a bad GUID":    func() error { _, err := h.SendMessage(ctx, "chat1", "hi", ""); return err },
		"empty message":            func() error { _, err := h.SendMessage(ctx, "iMessage;-;x", "", ""); return err },
		"reaction of no type":      func() error { _, err := h.SendReaction(ctx, "iMessage;-;x", "t", "wow", false); return err },
		"reaction pre-negated":     func() error { _, err := h.SendReaction(ctx, "iMessage;-;x", "t", "-like", false); return err },
		"reaction without target":  func() error { _, err := h.SendReaction(ctx, "iMessage;-;x", "", "like", false); return err },
		"reaction to a bad GUID":   func() error { _, err := h.SendReaction(ctx, "x", "t", "like", false); return err },
		"attachment relative path": func() error { _, err := h.SendAttachment(ctx, "iMessage;-;x", "a.jpg", false, ""); return err },
		"attachment to a bad GUID": func() error { _, err := h.SendAttachment(ctx, "", "/a.jpg", false, ""); return err },
		"typing in a bad GUID":     func() error { return h.StartTyping(ctx, "iMessage;-;a;b") },
		"read of a bad GUID":       func() error { return h.MarkRead(ctx, "") },
		"request without action":   func() error { _, err := h.Request(ctx, "", nil); return err },
		"notify without action":    func() error { return h.Notify(ctx, "", nil) },
	} {
		if err := call(); err == nil || !bridge.IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent error", name, err)
		}
	}
	// Nothing was written: the next frame is the next valid action.
	if err := h.StopTyping(ctx, "iMessage;-;x"); err != nil {
		t.Fatal(err)
	}
	if f := p.frame(); f["action"] != "stop-typing" {
		t.Errorf("first frame %v, want stop-typing", f)
	}
}

func TestHelperEventsNeverBlockAnswers(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	for i := range helperEventsCap + 20 {
		p.send(map[string]any{"event": "started-typing", "guid": "iMessage;-;" + strconv.Itoa(i)})
	}
	res := async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	p.answer(p.frame(), map[string]any{"identifier": "through"})
	if r := result(t, res); r.err != nil || r.id != "through" {
		t.Fatalf("request behind unread events: (%q, %v)", r.id, r.err)
	}
	if n := len(h.Events()); n != helperEventsCap {
		t.Errorf("%d events buffered, want %d", n, helperEventsCap)
	}
}

func TestHelperClose(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	pending := async(func() (string, error) { return h.SendMessage(t.Context(), "iMessage;-;x", "hi", "") })
	p.frame()
	if err := h.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if r := result(t, pending); !errors.Is(r.err, ErrHelperDisconnected) {
		t.Errorf("pending request: %v, want ErrHelperDisconnected", r.err)
	}
	if h.Connected() {
		t.Error("connected after Close")
	}
	if _, ok := <-h.Events(); ok {
		t.Error("events channel open after Close")
	}
	if _, err := h.Request(t.Context(), "ping", nil); !errors.Is(err, ErrHelperNotConnected) {
		t.Errorf("request after Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	p.expectClosed()
	if c, err := net.DialTimeout("tcp", h.Addr().String(), testGuard); err == nil {
		c.Close()
		t.Error("still listening after Close")
	}
}

func TestHelperOutlivesItsListenContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	h, err := listenHelper(ctx, 0, nil, acceptAll)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cancel()
	p := connectPeer(t, h)
	res := async(func() (string, error) { return h.Request(t.Context(), "ping", nil) })
	p.answer(p.frame(), map[string]any{"identifier": "still here"})
	if r := result(t, res); r.err != nil || r.id != "still here" {
		t.Errorf("request after the listen context ended: (%q, %v)", r.id, r.err)
	}
	h.Close()
	select {
	case <-drain(h.Events()):
	case <-time.After(testGuard):
		t.Fatal("events channel still open after Close")
	}
}

// drain reads events until the channel closes.
func drain(events <-chan Event) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range events {
		}
		close(done)
	}()
	return done
}

func TestHelperSpacesFrames(t *testing.T) {
	h := newTestHelper(t)
	const gap = 50 * time.Millisecond
	h.writeMu.Lock()
	h.writeGap = gap
	h.writeMu.Unlock()
	p := connectPeer(t, h)
	start := time.Now()
	for range 3 {
		if err := h.StartTyping(t.Context(), "iMessage;-;x"); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 2*gap {
		t.Errorf("three frames written in %s, want at least %s", elapsed, 2*gap)
	}
	for range 3 {
		if f := p.frame(); f["action"] != "start-typing" {
			t.Errorf("frame %v", f)
		}
	}
	// A caller that cannot wait out the gap gives up.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.StopTyping(ctx, "iMessage;-;x"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestHelperListensOnLoopbackOnly(t *testing.T) {
	h := newTestHelper(t)
	addr := h.Addr().(*net.TCPAddr)
	if !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) || addr.Port == 0 {
		t.Fatalf("listening on %v, want 127.0.0.1 and a port", addr)
	}
	others := []net.IP{net.IPv6loopback}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				others = append(others, ipn.IP)
			}
		}
	}
	for _, ip := range others {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port)), 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("reachable on %s", ip)
		}
	}
	for _, port := range []int{-1, 65536} {
		if _, err := ListenHelper(t.Context(), port, nil); err == nil {
			t.Errorf("port %d accepted", port)
		}
	}
}

func TestDefaultHelperPort(t *testing.T) {
	for uid, want := range map[int]int{501: 45670, 502: 45671, 600: 45769, 0: 45670, -1: 45670, 20000: 65169, 1 << 20: 65535} {
		if got := helperPortFor(uid); got != want {
			t.Errorf("helperPortFor(%d) = %d, want %d", uid, got, want)
		}
	}
	if got, want := DefaultHelperPort(), helperPortFor(os.Getuid()); got != want {
		t.Errorf("DefaultHelperPort() = %d, want %d", got, want)
	}
}

func TestTransactionIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := newTransactionID()
		if err != nil {
			t.Fatal(err)
		}
		if !uuidV4.MatchString(id) || seen[id] {
			t.Fatalf("id %q: malformed or repeated", id)
		}
		seen[id] = true
	}
}
