package messages

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/blueline-app/blueline/bridge"
)

// The private-API helper is the BlueBubbles helper library loaded into
// Messages. It connects to us over TCP on loopback and speaks
// newline-delimited JSON: we send requests {"action", "data",
// "transactionId"} ending in "\n"; it answers {"transactionId",
// "identifier", "error"?, "data"?} and sends events {"event", …}, ending in
// "\r\n".
const (
	helperPortBase  = 45670
	helperPortMax   = 65535
	helperFirstUID  = 501
	helperMaxLine   = 16 << 20 // bytes of one line, without its "\n"
	helperEventsCap = 64
	// helperWriteGap spaces our frames: the helper hands each socket read
	// to its JSON parser whole, and keeps only the first of two frames
	// that arrive in one read. BlueBubbles spaces writes the same way.
	helperWriteGap = 200 * time.Millisecond
	// helperMaxChecks bounds the connections whose peer is being checked
	// at once; more are refused. helperCheckTimeout bounds one check.
	helperMaxChecks    = 4
	helperCheckTimeout = 10 * time.Second
	// helperReplaceWait is how long a verified connection waits for the
	// connected helper's connection to end before it is refused: a
	// relaunched Messages may connect just before the end of the old
	// process's connection is read.
	helperReplaceWait = 2 * time.Second
)

var (
	// ErrHelperNotConnected is an action for the helper while none is
	// connected.
	ErrHelperNotConnected = errors.New("messages: the private-API helper is not connected")
	// ErrHelperDisconnected is the helper going away before it answered:
	// the action may or may not have happened.
	ErrHelperDisconnected = errors.New("messages: the private-API helper disconnected before answering")
)

// HelperError is the helper's answer that an action failed ("Chat does not
// exist!").
type HelperError struct {
	Action  string
	Message string
}

func (e *HelperError) Error() string {
	return fmt.Sprintf("messages: private-API helper: %s: %s", e.Action, e.Message)
}

// Event is something the helper reports unasked: "ping" when it connects,
// "started-typing" and "stopped-typing" (ChatGUID is the chat's GUID), and
// others Blueline may ignore.
type Event struct {
	Name     string
	ChatGUID string         // the frame's "guid", if any
	Raw      map[string]any // the whole frame
}

// DefaultHelperPort is the port the helper dials for the current user:
// 45670 + uid − 501, within [45670, 65535].
func DefaultHelperPort() int { return helperPortFor(os.Getuid()) }

func helperPortFor(uid int) int {
	return min(max(helperPortBase+uid-helperFirstUID, helperPortBase), helperPortMax)
}

// PeerChecker tells whether a connection to the helper's port comes from
// the private-API helper: from inside the Messages app, run by the daemon's
// user. The protocol has no authentication, and any local process can
// connect to a loopback port. ctx bounds the check.
type PeerChecker interface {
	CheckPeer(ctx context.Context, conn net.Conn) error
}

// PeerCheckFunc is a function as a PeerChecker.
type PeerCheckFunc func(ctx context.Context, conn net.Conn) error

// CheckPeer calls f.
func (f PeerCheckFunc) CheckPeer(ctx context.Context, conn net.Conn) error { return f(ctx, conn) }

// HelperServer is our end of the helper protocol. It listens on 127.0.0.1
// only and keeps one helper connection. Before it reads anything from a new
// connection, it checks where the connection comes from (PeerChecker): one
// that fails is closed and logged. A connection that passes while a helper
// is connected waits for that one to end, for up to helperReplaceWait, and
// is otherwise refused: a connected helper is never replaced.
type HelperServer struct {
	ln       net.Listener
	log      *slog.Logger
	check    PeerChecker
	checking chan struct{} // a slot per peer check under way
	events   chan Event
	shutdown chan struct{}
	stop     context.CancelFunc // ends the peer checks under way
	stopCtx  context.Context
	wg       sync.WaitGroup

	mu          sync.Mutex
	conn        *helperConn // nil when no helper is connected
	closed      bool
	changed     chan struct{} // closed and replaced when conn changes
	replaceWait time.Duration

	writeMu   sync.Mutex // one frame at a time, spaced by writeGap
	writeGap  time.Duration
	lastWrite time.Time
}

// helperConn is one helper connection and the requests waiting for its
// answers. pending and gone are guarded by HelperServer.mu.
type helperConn struct {
	nc      net.Conn
	pending map[string]chan helperResult
	gone    bool
	// declared are the features the helper says it has, beyond the stock
	// BlueBubbles helper's (see Declares).
	declared map[string]bool
}

// Features a helper may declare beyond the stock BlueBubbles helper's: in a
// "capabilities" array of its "ping" event (sent as it connects) or of a
// "capabilities" event. The stock helper declares none: given an emoji
// tapback it sends a message quoting the target instead, and its threaded
// replies stall on macOS 26.
const (
	HelperEmojiReactions  = "emoji-reactions"
	HelperThreadedReplies = "threaded-replies"
)

// Declares reports whether the connected helper declared feature.
func (h *HelperServer) Declares(feature string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil && h.conn.declared[feature]
}

// declare records the features an event frame declares, if any.
func (h *HelperServer) declare(c *helperConn, m map[string]any) {
	list, ok := m["capabilities"].([]any)
	if data, _ := m["data"].(map[string]any); !ok && data != nil {
		list, ok = data["capabilities"].([]any)
	}
	if !ok {
		return
	}
	declared := map[string]bool{}
	for _, f := range list {
		if name, _ := f.(string); name != "" {
			declared[name] = true
		}
	}
	h.mu.Lock()
	c.declared = declared
	h.mu.Unlock()
	h.log.Info("private-API helper declared its features", "features", list)
}

type helperResult struct {
	identifier string
	data       map[string]any // the answer's "data" object, if any
	err        error
}

// ListenHelper listens for the helper on 127.0.0.1:port (0: any free port).
// ctx bounds setting up the listener only: the server runs until Close.
// log may be nil. Connections are checked as this system allows: on a Mac,
// they must come from the Messages app of the daemon's user; on Linux, where
// there is no Messages, from a process of the daemon's user.
func ListenHelper(ctx context.Context, port int, log *slog.Logger) (*HelperServer, error) {
	return listenHelper(ctx, port, log, platformPeerChecker())
}

// listenHelper is ListenHelper with the peer check check.
func listenHelper(ctx context.Context, port int, log *slog.Logger, check PeerChecker) (*HelperServer, error) {
	if port < 0 || port > helperPortMax {
		return nil, fmt.Errorf("messages: helper port %d out of range", port)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("messages: listen for the private-API helper: %w", err)
	}
	stopCtx, stop := context.WithCancel(context.Background())
	h := &HelperServer{
		ln:          ln,
		log:         log.With("component", "helper"),
		check:       check,
		checking:    make(chan struct{}, helperMaxChecks),
		events:      make(chan Event, helperEventsCap),
		shutdown:    make(chan struct{}),
		stop:        stop,
		stopCtx:     stopCtx,
		changed:     make(chan struct{}),
		replaceWait: helperReplaceWait,
		writeGap:    helperWriteGap,
	}
	h.wg.Add(1)
	go h.accept()
	return h, nil
}

// Addr is the listener's address.
func (h *HelperServer) Addr() net.Addr { return h.ln.Addr() }

// Connected reports whether a helper is connected.
func (h *HelperServer) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil
}

// connState returns whether a helper is connected, and a channel closed at
// the next change.
func (h *HelperServer) connState() (bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil, h.changed
}

// Events delivers the helper's events. It is closed when the server is.
// Events are dropped (and logged) while the channel is full: reading the
// helper never waits on the bridge.
func (h *HelperServer) Events() <-chan Event { return h.events }

// Close stops listening and drops the helper's connection. Requests still
// waiting fail with ErrHelperDisconnected.
func (h *HelperServer) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	c := h.conn
	h.setConnLocked(nil)
	h.mu.Unlock()

	close(h.shutdown)
	h.stop()
	err := h.ln.Close()
	if c != nil {
		c.nc.Close()
	}
	h.wg.Wait()
	close(h.events)
	return err
}

func (h *HelperServer) setConnLocked(c *helperConn) {
	if h.conn == c {
		return
	}
	h.conn = c
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *HelperServer) accept() {
	defer h.wg.Done()
	for {
		nc, err := h.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			h.log.Warn("accept a helper connection", "err", err)
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-h.shutdown:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		select {
		case h.checking <- struct{}{}:
		default:
			h.log.Warn("private-API helper connection refused: too many connections are being checked", "remote", nc.RemoteAddr())
			nc.Close()
			continue
		}
		h.wg.Add(1)
		go h.admit(nc)
	}
}

// admit checks where nc comes from, and attaches it if it passes. Nothing is
// read from nc before: a connection that fails is closed unread.
func (h *HelperServer) admit(nc net.Conn) {
	defer h.wg.Done()
	ctx, cancel := context.WithTimeout(h.stopCtx, helperCheckTimeout)
	err := h.check.CheckPeer(ctx, nc)
	cancel()
	<-h.checking
	if h.stopCtx.Err() != nil {
		nc.Close()
		return
	}
	if err != nil {
		h.log.Warn("private-API helper connection refused: it does not come from the helper inside Messages", "remote", nc.RemoteAddr(), "err", err)
		nc.Close()
		return
	}
	h.attach(nc)
}

// attach makes nc, a checked connection, the helper connection. While
// another is connected, it waits up to replaceWait for that one to end;
// then, if it has not, nc is refused and closed.
func (h *HelperServer) attach(nc net.Conn) {
	c := &helperConn{nc: nc, pending: map[string]chan helperResult{}}
	var timeout <-chan time.Time
	h.mu.Lock()
	for h.conn != nil && !h.closed {
		if timeout == nil {
			t := time.NewTimer(h.replaceWait)
			defer t.Stop()
			timeout = t.C
		}
		current, changed := h.conn.nc.RemoteAddr(), h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			h.log.Warn("second private-API helper connection refused: the connected helper's connection is still open",
				"remote", nc.RemoteAddr(), "connected", current)
			nc.Close()
			return
		}
		h.mu.Lock()
	}
	if h.closed {
		h.mu.Unlock()
		nc.Close()
		return
	}
	h.setConnLocked(c)
	h.wg.Add(1)
	h.mu.Unlock()
	h.log.Info("private-API helper connected", "remote", nc.RemoteAddr())
	go h.read(c)
}

// read handles the helper's lines until the connection ends.
func (h *HelperServer) read(c *helperConn) {
	defer h.wg.Done()
	sc := bufio.NewScanner(c.nc)
	sc.Buffer(make([]byte, 0, 64<<10), helperMaxLine+1)
	sc.Split(splitHelperLines)
	for sc.Scan() {
		h.handle(c, sc.Bytes())
	}
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		h.log.Warn("private-API helper sent a line over the limit; dropping its connection", "limit_bytes", helperMaxLine)
	}
	h.detach(c, err)
}

// splitHelperLines splits on "\n". A last line without one is dropped: the
// connection ended mid-frame.
func splitHelperLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// detach forgets c and fails its waiting requests.
func (h *HelperServer) detach(c *helperConn, err error) {
	h.mu.Lock()
	wasCurrent := h.conn == c
	if wasCurrent {
		h.setConnLocked(nil)
	}
	c.gone = true
	for id, ch := range c.pending {
		ch <- helperResult{err: ErrHelperDisconnected}
		delete(c.pending, id)
	}
	h.mu.Unlock()
	c.nc.Close()
	if wasCurrent {
		h.log.Info("private-API helper disconnected", "err", err)
	}
}

// handle takes one line from the helper: an answer to a request, or an
// event. Anything else is logged and skipped.
func (h *HelperServer) handle(c *helperConn, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		h.log.Warn("private-API helper sent a line that is not a JSON object", "err", err, "bytes", len(line))
		return
	}
	if id, _ := m["transactionId"].(string); id != "" {
		h.resolve(c, id, m)
		return
	}
	if name, _ := m["event"].(string); name != "" {
		if name == "ping" || name == "capabilities" {
			h.declare(c, m)
		}
		guid, _ := m["guid"].(string)
		select {
		case h.events <- Event{Name: name, ChatGUID: guid, Raw: m}:
		default:
			h.log.Warn("private-API helper event dropped: nobody is reading events", "event", name)
		}
		return
	}
	h.log.Debug("private-API helper sent a frame with neither transactionId nor event")
}

// resolve hands an answer to the request waiting for it.
func (h *HelperServer) resolve(c *helperConn, id string, m map[string]any) {
	h.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	h.mu.Unlock()
	if !ok {
		h.log.Debug("private-API helper answered a request nobody waits for", "transaction_id", id)
		return
	}
	var r helperResult
	r.identifier, _ = m["identifier"].(string)
	r.data, _ = m["data"].(map[string]any)
	if msg := helperErrorText(m["error"]); msg != "" {
		r = helperResult{err: &HelperError{Message: msg}}
	}
	ch <- r
}

// helperErrorText is the text of a response's "error"; "" when there is
// no error (absent, null, "" or false).
func helperErrorText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		if !v {
			return ""
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Request sends an action and waits for the helper's answer, or for ctx to
// end. It returns the answer's "identifier": the new message's GUID for
// sends. An "error" in the answer is returned as a *HelperError.
func (h *HelperServer) Request(ctx context.Context, action string, data map[string]any) (string, error) {
	r, err := h.request(ctx, action, data)
	return r.identifier, err
}

// request is Request with the whole answer.
func (h *HelperServer) request(ctx context.Context, action string, data map[string]any) (helperResult, error) {
	if action == "" {
		return helperResult{}, bridge.Permanent(errors.New("messages: helper request without an action"))
	}
	id, err := newTransactionID()
	if err != nil {
		return helperResult{}, err
	}
	frame, err := helperFrame(action, data, id)
	if err != nil {
		return helperResult{}, err
	}
	ch := make(chan helperResult, 1)
	h.mu.Lock()
	c := h.conn
	if c == nil || c.gone {
		h.mu.Unlock()
		return helperResult{}, ErrHelperNotConnected
	}
	c.pending[id] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(c.pending, id)
		h.mu.Unlock()
	}()

	if err := h.write(ctx, c, frame); err != nil {
		return helperResult{}, fmt.Errorf("messages: send %s to the private-API helper: %w", action, err)
	}
	select {
	case r := <-ch:
		var he *HelperError
		if errors.As(r.err, &he) {
			he.Action = action
		}
		return r, r.err
	case <-ctx.Done():
		return helperResult{}, fmt.Errorf("messages: the private-API helper did not answer %s (transaction %s): %w", action, id, ctx.Err())
	}
}

// Notify sends an action that gets no answer (no transactionId): as
// BlueBubbles does for start-typing, stop-typing and mark-chat-read.
func (h *HelperServer) Notify(ctx context.Context, action string, data map[string]any) error {
	if action == "" {
		return bridge.Permanent(errors.New("messages: helper notification without an action"))
	}
	frame, err := helperFrame(action, data, "")
	if err != nil {
		return err
	}
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	if c == nil {
		return ErrHelperNotConnected
	}
	if err := h.write(ctx, c, frame); err != nil {
		return fmt.Errorf("messages: send %s to the private-API helper: %w", action, err)
	}
	return nil
}

// helperFrame encodes a request; id "" leaves transactionId out.
func helperFrame(action string, data map[string]any, id string) ([]byte, error) {
	if data == nil {
		data = map[string]any{}
	}
	msg := map[string]any{"action": action, "data": data}
	if id != "" {
		msg["transactionId"] = id
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil { // Encode ends the frame with "\n"
		return nil, bridge.Permanent(fmt.Errorf("messages: encode %s for the private-API helper: %w", action, err))
	}
	return buf.Bytes(), nil
}

// write sends one frame on c, no sooner than writeGap after the previous
// one. A frame cut short leaves the stream unreadable, so a failed write
// drops the connection.
func (h *HelperServer) write(ctx context.Context, c *helperConn, frame []byte) error {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if wait := h.writeGap - time.Since(h.lastWrite); h.writeGap > 0 && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	c.nc.SetWriteDeadline(deadline)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		c.nc.SetWriteDeadline(time.Unix(1, 0))
	})
	n, err := c.nc.Write(frame)
	if !stop() {
		<-fired
	}
	h.lastWrite = time.Now()
	if err == nil {
		return nil
	}
	if n > 0 || ctx.Err() == nil {
		h.detach(c, err)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return fmt.Errorf("%w: %w", ErrHelperDisconnected, err)
}

// newTransactionID returns a random (version 4) UUID.
func newTransactionID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("messages: transaction id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// nullable is v, or JSON null when v is "".
func nullable(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// SendMessage sends text through the helper, as a threaded reply to
// replyToGUID unless it is "". It returns the new message's GUID.
func (h *HelperServer) SendMessage(ctx context.Context, chatGUID, text, replyToGUID string) (string, error) {
	if err := checkChatGUID(chatGUID); err != nil {
		return "", err
	}
	if text == "" {
		return "", bridge.Permanent(errors.New("messages: empty text"))
	}
	return h.Request(ctx, "send-message", map[string]any{
		"chatGuid":            chatGUID,
		"message":             text,
		"subject":             nil,
		"attributedBody":      nil,
		"textFormatting":      nil,
		"effectId":            nil,
		"selectedMessageGuid": nullable(replyToGUID),
		"partIndex":           0,
		"ddScan":              0,
	})
}

// SendAttachment sends the file at path (absolute, where Messages may read
// it) through the helper: as a voice-memo balloon when isAudioMessage, as
// a threaded reply to replyToGUID unless it is "". It returns the new
// message's GUID.
func (h *HelperServer) SendAttachment(ctx context.Context, chatGUID, path string, isAudioMessage bool, replyToGUID string) (string, error) {
	if err := checkChatGUID(chatGUID); err != nil {
		return "", err
	}
	if err := checkPath(path); err != nil {
		return "", err
	}
	audio := 0
	if isAudioMessage {
		audio = 1
	}
	return h.Request(ctx, "send-attachment", map[string]any{
		"chatGuid":            chatGUID,
		"filePath":            path,
		"isAudioMessage":      audio,
		"attributedBody":      nil,
		"subject":             nil,
		"effectId":            nil,
		"selectedMessageGuid": nullable(replyToGUID),
		"partIndex":           0,
	})
}

// SendReaction adds (or, with remove, removes) a tapback of typ (one of
// bridge.ReactionTypes) on the message targetGUID. It returns the
// reaction's message GUID.
func (h *HelperServer) SendReaction(ctx context.Context, chatGUID, targetGUID, typ string, remove bool) (string, error) {
	if err := checkChatGUID(chatGUID); err != nil {
		return "", err
	}
	if targetGUID == "" {
		return "", bridge.Permanent(errors.New("messages: reaction without a target message"))
	}
	if !slices.Contains(bridge.ReactionTypes, typ) {
		return "", bridge.Permanent(fmt.Errorf("messages: unknown reaction type %q", typ))
	}
	if remove {
		typ = "-" + typ
	}
	return h.Request(ctx, "send-reaction", map[string]any{
		"chatGuid":            chatGUID,
		"selectedMessageGuid": targetGUID,
		"reactionType":        typ,
		"partIndex":           0,
	})
}

// StartTyping shows the line's typing indicator in a chat.
func (h *HelperServer) StartTyping(ctx context.Context, chatGUID string) error {
	return h.notifyChat(ctx, "start-typing", chatGUID)
}

// StopTyping hides the line's typing indicator in a chat.
func (h *HelperServer) StopTyping(ctx context.Context, chatGUID string) error {
	return h.notifyChat(ctx, "stop-typing", chatGUID)
}

// MarkRead marks a chat read, which sends a read receipt where the chat
// has them.
func (h *HelperServer) MarkRead(ctx context.Context, chatGUID string) error {
	return h.notifyChat(ctx, "mark-chat-read", chatGUID)
}

func (h *HelperServer) notifyChat(ctx context.Context, action, chatGUID string) error {
	if err := checkChatGUID(chatGUID); err != nil {
		return err
	}
	return h.Notify(ctx, action, map[string]any{"chatGuid": chatGUID})
}
