// Package messages is the bridge to the Messages app of a Mac: it reads what
// arrives from the Messages database (chat.db), sends through AppleScript
// (osascript), and reaches reactions, typing, read receipts, threaded
// replies and voice-memo balloons through the optional private-API helper.
//
// It runs on any OS when pointed at a database and an osascript program:
// that is how it is tested on Linux, against a fixture database and a
// stand-in osascript.
package messages

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
)

// Config is one line's Messages bridge.
type Config struct {
	Line string // the line's handle
	// SelfHandles are the handles of the owner's Apple ID: a one-to-one
	// chat with one of them is the owner's chat with themselves.
	SelfHandles    []string
	Service        string // "imessage" or "sms"
	ChatDB         string // the Messages database; "~" is the home folder
	Osascript      string // the AppleScript runner program
	AttachmentsDir string // where files are staged for Messages; "~" is the home folder
	HelperPort     int    // loopback port for the private-API helper; 0: DefaultHelperPort
	// MacOSVersion is the Mac's macOS version ("15.1"), which decides the
	// features that need a recent one; "" reads this Mac's (Open).
	MacOSVersion string
	Cursor       Cursor // where the bridge keeps how far it has read chat.db

	// PollOnly turns off watching chat.db's folder: it is then read every
	// Poll only.
	PollOnly bool
	// SMSFallback sends a one-to-one iMessage that Messages could not
	// deliver because the recipient is not on iMessage once more, as SMS.
	SMSFallback bool
	// HoldUnknownSenders stores what unknown senders write (Messages'
	// Unknown Senders, and chats pending review) without events, and
	// without letting the line answer them; by default they are delivered.
	HoldUnknownSenders bool

	// Zero values mean the defaults below.
	Poll     time.Duration // backstop poll of chat.db: 1 s
	Debounce time.Duration // wait after a change notice, to take a burst at once: 25 ms
	// TextTimeout bounds each osascript run (killed after it) and the wait
	// for a sent text to show as sent in chat.db: 30 s.
	TextTimeout time.Duration
	FileTimeout time.Duration // for a sent file to show as sent: 3 min
	// TransferWait is how long a new message waits for its attachments'
	// transfers before it is reported without them: 2 min.
	TransferWait time.Duration
	// LaunchWait bounds the wait for a (re)launched Messages to answer: 30 s.
	LaunchWait time.Duration
	// LaunchRetryPause is the pause before sending again after Messages,
	// launched moments ago, did not know the chat yet (-1728): 2 s.
	LaunchRetryPause time.Duration
	// PingEvery is how long the line may stay without a script before the
	// watchdog pings Messages (also at the start): 5 min; negative turns
	// the watchdog off.
	PingEvery time.Duration
	Runner    Runner // runs AppleScript; nil: Osascript{Path: Osascript}
	Log       *slog.Logger
}

// Cursor keeps the highest chat.db ROWID the bridge has handled, so that a
// restart neither replays old messages nor misses new ones.
type Cursor interface {
	Load(ctx context.Context) (rowID int64, ok bool, err error)
	Save(ctx context.Context, rowID int64) error
}

// Bridge drives the Messages app for one line.
type Bridge struct {
	cfg Config
	// db is chat.db as now opened: the watcher opens it anew when the file
	// at its path is replaced (watch.go).
	db     atomic.Pointer[chatdb.DB]
	sender *Sender
	helper *HelperServer
	log    *slog.Logger

	// health is what reading chat.db last said (health.go).
	health healthState

	// sendMu makes sends one at a time: a send is recognised in chat.db as
	// the next outgoing row of its chat.
	sendMu sync.Mutex

	// launchedAt is when the bridge last launched Messages (guarded by
	// sendMu): a -1728 soon after is Messages still loading its chats.
	launchedAt time.Time

	mu sync.Mutex
	// sending is the recipient of the send being matched, and the ROWID it
	// started after: the watcher leaves the new outgoing rows of the
	// recipient's chats (and rows filed under no chat) to it.
	sending *sendingState
	// ours are the GUIDs of rows that are our own sends: the outbox records
	// them, the watcher must not report them as sent from elsewhere.
	ours map[string]time.Time
}

type sendingState struct {
	identifier string
	after      int64
	// newGroup is a group being created, whose identifier is not known
	// yet: every new outgoing row of a group may be its first message.
	newGroup bool
}

// Open checks the database and starts the helper's listener. The bridge
// reads and sends once Run is called.
func Open(ctx context.Context, cfg Config) (*Bridge, error) {
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	if cfg.MacOSVersion == "" {
		cfg.MacOSVersion = hostMacOSVersion()
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = 25 * time.Millisecond
	}
	if cfg.TextTimeout == 0 {
		cfg.TextTimeout = 30 * time.Second
	}
	if cfg.FileTimeout == 0 {
		cfg.FileTimeout = 3 * time.Minute
	}
	if cfg.TransferWait == 0 {
		cfg.TransferWait = 2 * time.Minute
	}
	if cfg.LaunchWait == 0 {
		cfg.LaunchWait = 30 * time.Second
	}
	if cfg.LaunchRetryPause == 0 {
		cfg.LaunchRetryPause = 2 * time.Second
	}
	if cfg.PingEvery == 0 {
		cfg.PingEvery = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log := cfg.Log.With("line", cfg.Line, "bridge", "messages")
	var err error
	if cfg.ChatDB, err = expandHome(cfg.ChatDB); err != nil {
		return nil, err
	}
	if cfg.AttachmentsDir, err = expandHome(cfg.AttachmentsDir); err != nil {
		return nil, err
	}
	if cfg.Runner == nil {
		cfg.Runner = Osascript{Path: cfg.Osascript}
	}
	db, err := chatdb.Open(ctx, cfg.ChatDB)
	if err != nil {
		return nil, fmt.Errorf("line %s: %w", cfg.Line, err)
	}
	port := cfg.HelperPort
	if port == 0 {
		port = DefaultHelperPort()
	}
	helper, err := ListenHelper(ctx, port, log)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("line %s: private-API helper listener: %w", cfg.Line, err)
	}
	b := &Bridge{cfg: cfg, sender: NewSender(cfg.Runner, cfg.TextTimeout), helper: helper, log: log,
		ours: map[string]time.Time{}}
	b.db.Store(db)
	return b, nil
}

// Close releases the database and the helper's listener.
func (b *Bridge) Close() error {
	return errors.Join(b.helper.Close(), b.db.Load().Close())
}

// Advanced reports whether the line's advanced features work now: only
// while the private-API helper is connected.
func (b *Bridge) Advanced() bool { return b.helper.Connected() }

func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %s: %w", p, err)
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}

// errNoHelper is a send that needs the helper while it is not connected:
// nothing was sent, and the helper may come back.
var errNoHelper = bridge.NotSent(errors.New("this needs the private-API helper inside Messages, which is not connected"))

// Send hands a message to Messages at most once, and returns once chat.db
// shows it sent. The outcome is never taken from osascript's exit status
// alone: the outgoing rows are found in chat.db and followed until is_sent
// or an error. Once anything may have reached Messages, a failure is final
// unless it certainly did not (see bridge.Outgoing.Handoff); when the
// outcome is unknown, the error says so and nothing is sent again.
func (b *Bridge) Send(ctx context.Context, out bridge.Outgoing) (bridge.Receipt, error) {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	if !out.HandedAt.IsZero() {
		return b.resume(ctx, out)
	}
	if err := b.unavailable(ctx); err != nil {
		return bridge.Receipt{}, err
	}
	handoff := onlyOnce(out.Handoff)

	var staged string
	if out.Attachment != nil {
		var err error
		if staged, err = b.stage(out.Attachment); err != nil {
			return bridge.Receipt{}, err
		}
		// Messages reads the staged copy while sending: remove it once
		// the send has reached a final state, which is when Send returns.
		defer os.RemoveAll(filepath.Dir(staged))
	}
	if out.IsAudioMessage || out.ReplyToGUID != "" {
		switch {
		case out.IsAudioMessage && !b.helper.Connected():
			return bridge.Receipt{}, errNoHelper
		case out.IsAudioMessage || b.threadedReplies():
			if !b.threadedReplies() {
				out.ReplyToGUID = ""
			}
			return b.sendWithHelper(ctx, out, staged, handoff)
		default:
			// A reply that cannot be threaded now goes out as a plain
			// message: better unthreaded than not at all.
			b.log.Info("reply sent unthreaded", "outbox_id", out.OutboxID, "why", b.Capabilities()["threaded_replies"])
		}
	}
	var receipt bridge.Receipt
	if out.Text != "" {
		r, err := b.deliver(ctx, out.Conversation, part{text: out.Text}, handoff, b.cfg.SMSFallback)
		if err != nil {
			return bridge.Receipt{}, err
		}
		receipt = r
	}
	if staged != "" {
		r, err := b.deliver(ctx, out.Conversation, part{path: staged}, handoff, b.cfg.SMSFallback)
		if err != nil {
			if receipt.GUID != "" {
				// The text went out: sending the item again would repeat it.
				return bridge.Receipt{}, bridge.Permanent(fmt.Errorf("the text was sent (message %s) but the attachment was not: %w", receipt.GUID, err))
			}
			return bridge.Receipt{}, err
		}
		if receipt.GUID == "" {
			receipt = r
		}
	}
	return receipt, nil
}

// onlyOnce wraps a Handoff so that it runs at most once (nil: never).
func onlyOnce(handoff func(context.Context) error) func(context.Context) error {
	done := false
	return func(ctx context.Context) error {
		if done || handoff == nil {
			return nil
		}
		if err := handoff(ctx); err != nil {
			return err
		}
		done = true
		return nil
	}
}

// part is one piece of a send: a text, or a staged file.
type part struct {
	text string
	path string
}

func (p part) query(c bridge.Chat, after int64, since time.Time) chatdb.Outgoing {
	q := chatdb.Outgoing{Identifier: c.Identifier, IsGroup: c.IsGroup, After: after, Since: since, Text: p.text}
	if p.path != "" {
		q.Filename = filepath.Base(p.path)
	}
	return q
}

func (b *Bridge) timeout(p part) time.Duration {
	if p.path != "" {
		return b.cfg.FileTimeout
	}
	return b.cfg.TextTimeout
}

// errUnknownOutcome marks a send that may or may not have reached the
// recipient.
var errUnknownOutcome = errors.New("outcome unknown")

// deliver hands one part to Messages, finds its rows in chat.db and follows
// them until sent. With smsFallback, a one-to-one iMessage that Messages
// could not deliver because the recipient is not on iMessage goes out once
// more as SMS.
func (b *Bridge) deliver(ctx context.Context, conv bridge.Conversation, p part, handoff func(context.Context) error, smsFallback bool) (bridge.Receipt, error) {
	targets, err := b.targets(ctx, conv.Chat, conv.Service)
	if err != nil {
		return bridge.Receipt{}, err
	}
	mark, err := b.db.Load().MaxRowID(ctx)
	if err != nil {
		return bridge.Receipt{}, err
	}
	since := time.Now().Add(-2 * time.Second) // the Mac's clock writes chat.db; allow a little skew
	b.setSending(&sendingState{identifier: conv.Chat.Identifier, after: mark})
	defer b.setSending(nil)
	q := p.query(conv.Chat, mark, since)

	target, sendErr := b.handOver(ctx, targets, p, q, handoff)
	if sendErr != nil && (bridge.IsNotSent(sendErr) || !errors.Is(sendErr, errUnknownOutcome)) {
		return bridge.Receipt{}, sendErr
	}
	rows, err := b.find(ctx, q, b.timeout(p))
	if err != nil {
		return bridge.Receipt{}, err
	}
	if len(rows) == 0 {
		if sendErr != nil {
			return bridge.Receipt{}, bridge.Permanent(fmt.Errorf("%w: no message for it appeared in chat.db within %s; it is not sent again: %w",
				errUnknownOutcome, b.timeout(p), sendErr))
		}
		return bridge.Receipt{}, bridge.Permanent(fmt.Errorf("%w: Messages accepted it (%s) but no message for it appeared in chat.db within %s; it is not sent again",
			errUnknownOutcome, target, b.timeout(p)))
	}
	b.claim(rows...)
	receipt, err := b.await(ctx, rows, b.timeout(p))
	if err == nil {
		receipt.ChatGUID = cmp.Or(receipt.ChatGUID, target.ChatGUID)
		return receipt, nil
	}
	var failed *sendFailedError
	if smsFallback && errors.As(err, &failed) && failed.notOnIMessage() && !conv.Chat.IsGroup && conv.Service == "imessage" {
		b.log.Info("recipient not reachable on iMessage: sending once as SMS", "outbox_id", conv.OutboxID, "guid", failed.guid)
		sms := conv
		sms.Service = "sms"
		r, err := b.deliver(ctx, sms, p, handoff, false)
		if err != nil {
			return bridge.Receipt{}, fmt.Errorf("iMessage could not reach %s and the SMS fallback failed: %w", conv.Chat.Identifier, err)
		}
		r.SMSFallback = true
		return r, nil
	}
	return bridge.Receipt{}, err
}

// targets lists, in the order they are tried, the ways to address a chat
// for service ("imessage", "sms" or "rcs"; a one-to-one SMS or RCS
// conversation goes on in whichever of the two the contact last wrote in):
// the service-prefixed GUID, then each
// other form Messages stores the chat under for that service (macOS 26's
// "any;…"), then for a one-to-one chat the contact as a participant of the
// service's account.
func (b *Bridge) targets(ctx context.Context, c bridge.Chat, service string) ([]Target, error) {
	if !c.IsGroup && service != "imessage" {
		// SMS and RCS are one family: answer where the contact last
		// wrote (an RCS chat beside an old SMS one is answered in RCS).
		latest, ok, err := b.db.Load().LatestInboundChat(ctx, c.Identifier)
		if err != nil {
			return nil, err
		}
		if canonical := chatdb.CanonicalGUID(latest.GUID, latest.ServiceName); ok && serviceFamily(canonical) == "sms" {
			service = strings.ToLower(chatdb.ServicePrefix(strings.SplitN(canonical, ";", 2)[0]))
		}
	}
	acct, err := accountService(service)
	if err != nil {
		return nil, err
	}
	style := "-"
	if c.IsGroup {
		style = "+"
	}
	primary := acct + ";" + style + ";" + c.Identifier
	targets := []Target{{ChatGUID: primary}}
	stored, err := b.db.Load().ChatsByIdentifier(ctx, c.Identifier)
	if err != nil {
		return nil, err
	}
	family := serviceFamily(primary)
	for _, sc := range stored {
		guid := sc.GUID
		if serviceFamily(chatdb.CanonicalGUID(guid, sc.ServiceName)) != family || strings.EqualFold(guid, primary) ||
			!strings.Contains(guid, ";"+style+";") || checkChatGUID(guid) != nil {
			continue
		}
		if !slices.ContainsFunc(targets, func(t Target) bool { return t.ChatGUID == guid }) {
			targets = append(targets, Target{ChatGUID: guid})
		}
	}
	if !c.IsGroup && c.Identifier != "" {
		targets = append(targets, Target{Address: c.Identifier, Service: acct})
	}
	return targets, nil
}

// serviceFamily is "sms" for an SMS or RCS chat GUID, else "imessage".
func serviceFamily(guid string) string {
	prefix, _, _ := strings.Cut(guid, ";")
	switch strings.ToLower(prefix) {
	case "sms", "rcs":
		return "sms"
	}
	return "imessage"
}

// handOver runs the send script against the targets in order until one
// takes it. It calls handoff before the first run. It returns the target
// that took it; or an error marked bridge.NotSent when nothing reached
// Messages (permanent too when no target exists); or, when the outcome is
// unknown (a timeout, an unknown error), the target and an error wrapping
// errUnknownOutcome: the caller then looks for the rows all the same.
//
// Messages not running is launched, and the send tried again. A hung
// Messages (a script timed out, and a ping after it too) is quit and
// launched again; if chat.db then shows nothing of the send, it certainly
// died with the old process and is tried once more.
func (b *Bridge) handOver(ctx context.Context, targets []Target, p part, q chatdb.Outgoing, handoff func(context.Context) error) (Target, error) {
	if err := handoff(ctx); err != nil {
		return Target{}, err
	}
	var lastErr error
	relaunched, retriedAfterLaunch := false, false
	for i := 0; i < len(targets); {
		t := targets[i]
		var err error
		if p.path != "" {
			err = b.sender.SendFile(ctx, t, p.path)
		} else {
			err = b.sender.SendText(ctx, t, p.text)
		}
		switch {
		case err == nil:
			return t, nil
		case ctx.Err() != nil:
			return t, fmt.Errorf("%w: %w", errUnknownOutcome, err)
		case errors.Is(err, ErrChatNotFound):
			if !retriedAfterLaunch && !b.launchedAt.IsZero() && time.Since(b.launchedAt) < launchGrace {
				// Messages launched moments ago may not have loaded its
				// chats yet.
				retriedAfterLaunch = true
				b.log.Info("chat not found just after Messages launched; trying again", "target", t.String())
				if err := sleep(ctx, b.cfg.LaunchRetryPause); err != nil {
					return Target{}, bridge.NotSent(err)
				}
				continue
			}
			lastErr = err
			i++
		case errors.Is(err, ErrNotRunning) && !relaunched:
			relaunched = true
			b.log.Warn("Messages is not running: launching it", "err", err)
			if err := b.launch(ctx); err != nil {
				return Target{}, bridge.NotSent(err)
			}
		case errors.Is(err, ErrTimedOut) && !relaunched:
			if perr := b.sender.Ping(ctx); perr == nil {
				// Messages answers: it was only slow, and may have sent.
				return t, fmt.Errorf("%w: %w", errUnknownOutcome, err)
			}
			relaunched = true
			b.log.Warn("Messages is hung: quitting and launching it again", "err", err)
			if rerr := b.relaunch(ctx); rerr != nil {
				return t, fmt.Errorf("%w: %w (and relaunching Messages failed: %w)", errUnknownOutcome, err, rerr)
			}
			// The old process is gone: what it had not written by now was
			// never sent.
			rows, ferr := b.db.Load().FindOutgoing(ctx, q)
			if ferr != nil {
				return t, fmt.Errorf("%w: %w", errUnknownOutcome, ferr)
			}
			if len(rows) > 0 {
				return t, nil
			}
		case errors.Is(err, ErrAutomationDenied):
			// Nothing reached Messages; the owner can still allow it.
			return Target{}, bridge.Unavailable(bridge.NotSent(err), b.downWait())
		case certainlyNotSent(err):
			return Target{}, bridge.NotSent(err)
		default:
			return t, fmt.Errorf("%w: %w", errUnknownOutcome, err)
		}
	}
	return Target{}, bridge.NotSent(bridge.Permanent(lastErr))
}

// launchGrace is how long after a launch a -1728 may be Messages still
// loading its chats.
const launchGrace = 15 * time.Second

// launch starts Messages and waits until it answers.
func (b *Bridge) launch(ctx context.Context) error {
	if err := b.sender.EnsureRunning(ctx); err != nil {
		return fmt.Errorf("launch Messages: %w", err)
	}
	b.launchedAt = time.Now()
	deadline := time.Now().Add(b.cfg.LaunchWait)
	for {
		err := b.sender.Ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("Messages did not answer within %s of its launch: %w", b.cfg.LaunchWait, err)
		}
		if err := sleep(ctx, launchPoll); err != nil {
			return err
		}
	}
}

const launchPoll = 250 * time.Millisecond

// relaunch quits (or kills) Messages and launches it again.
func (b *Bridge) relaunch(ctx context.Context) error {
	if err := b.sender.Quit(ctx); err != nil {
		return fmt.Errorf("quit Messages: %w", err)
	}
	return b.launch(ctx)
}

// find waits up to timeout for the rows of a send to appear in chat.db.
func (b *Bridge) find(ctx context.Context, q chatdb.Outgoing, timeout time.Duration) ([]chatdb.Row, error) {
	deadline := time.Now().Add(timeout)
	for {
		rows, err := b.db.Load().FindOutgoing(ctx, q)
		if err != nil || len(rows) > 0 {
			return rows, err
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		if err := sleep(ctx, followInterval); err != nil {
			return nil, err
		}
	}
}

// resume settles a send whose earlier attempt handed it to Messages before
// the daemon stopped: it looks for what that attempt wrote and follows it,
// and never sends again.
func (b *Bridge) resume(ctx context.Context, out bridge.Outgoing) (bridge.Receipt, error) {
	since := out.HandedAt.Add(-2 * time.Second)
	var parts []part
	if out.Text != "" {
		parts = append(parts, part{text: out.Text})
	}
	if out.Attachment != nil {
		parts = append(parts, part{path: filepath.Join("/", stagedName(out.Attachment))})
	}
	var receipt bridge.Receipt
	for _, p := range parts {
		rows, err := b.find(ctx, p.query(out.Chat, 0, since), b.timeout(p))
		if err != nil {
			return bridge.Receipt{}, err
		}
		if len(rows) == 0 {
			return bridge.Receipt{}, bridge.Permanent(fmt.Errorf("%w: the daemon stopped after handing the message to Messages, "+
				"and no message for it is in chat.db; it is not sent again", errUnknownOutcome))
		}
		b.claim(rows...)
		r, err := b.await(ctx, rows, b.timeout(p))
		if err != nil {
			return bridge.Receipt{}, err
		}
		if receipt.GUID == "" {
			receipt = r
		}
	}
	return receipt, nil
}

// sendWithHelper sends a voice memo or a threaded reply through the helper,
// which names the new row's GUID.
func (b *Bridge) sendWithHelper(ctx context.Context, out bridge.Outgoing, staged string, handoff func(context.Context) error) (bridge.Receipt, error) {
	var guid string
	var err error
	timeout := b.cfg.TextTimeout
	if err := handoff(ctx); err != nil {
		return bridge.Receipt{}, err
	}
	if staged != "" {
		timeout = b.cfg.FileTimeout
	}
	err = b.withHelperChat(ctx, out.Chat, func(chatGUID string) error {
		var err error
		if staged != "" {
			guid, err = b.helper.SendAttachment(ctx, chatGUID, staged, out.IsAudioMessage, out.ReplyToGUID)
		} else {
			guid, err = b.helper.SendMessage(ctx, chatGUID, out.Text, out.ReplyToGUID)
		}
		return err
	})
	if errors.Is(err, ErrHelperNotConnected) {
		return bridge.Receipt{}, bridge.NotSent(err)
	}
	if err != nil {
		return bridge.Receipt{}, err
	}
	b.claim(chatdb.Row{GUID: guid})
	deadline := time.Now().Add(timeout)
	for {
		rows, err := b.db.Load().RowsByGUID(ctx, []string{guid})
		if err != nil {
			return bridge.Receipt{}, err
		}
		if len(rows) == 1 {
			return b.await(ctx, rows, time.Until(deadline))
		}
		if time.Now().After(deadline) {
			return bridge.Receipt{}, bridge.Permanent(fmt.Errorf("%w: the helper sent message %s but it did not appear in chat.db within %s",
				errUnknownOutcome, guid, timeout))
		}
		if err := sleep(ctx, followInterval); err != nil {
			return bridge.Receipt{}, err
		}
	}
}

const followInterval = 50 * time.Millisecond

// sendFailedError is Messages failing a send: the row's error code.
type sendFailedError struct {
	guid string
	code int
	// sent is whether the row was marked sent before it failed.
	sent bool
}

func (e *sendFailedError) Error() string {
	return fmt.Sprintf("Messages could not send it (error %d%s)", e.code, errorCodeMeaning(e.code))
}

// notOnIMessage reports whether the failure is the recipient not being
// reachable on iMessage: Messages fails the row with error 22 ("Not
// Delivered") without ever marking it sent.
func (e *sendFailedError) notOnIMessage() bool { return e.code == errNotDelivered && !e.sent }

// errNotDelivered is the error code Messages writes on a message it could
// not deliver, shown as "Not Delivered".
const errNotDelivered = 22

func errorCodeMeaning(code int) string {
	if code == errNotDelivered {
		return `, "Not Delivered"`
	}
	return ""
}

// await follows rows of a send until all are sent, or one has failed. It
// returns the first row's GUID and date, and the chat and service it went
// out on.
func (b *Bridge) await(ctx context.Context, rows []chatdb.Row, timeout time.Duration) (bridge.Receipt, error) {
	deadline := time.Now().Add(timeout)
	guids := make([]string, len(rows))
	for i, r := range rows {
		guids[i] = r.GUID
	}
	for {
		current, err := b.db.Load().RowsByGUID(ctx, guids)
		if err != nil {
			return bridge.Receipt{}, err
		}
		sent := 0
		for _, row := range current {
			switch {
			case row.Error != 0:
				return bridge.Receipt{}, bridge.Permanent(&sendFailedError{guid: row.GUID, code: row.Error, sent: row.IsSent})
			case row.IsSent:
				sent++
			}
		}
		if sent == len(guids) && len(current) == len(guids) {
			first := current[0]
			return bridge.Receipt{GUID: first.GUID, SentAt: first.Date, ChatGUID: first.Chat.RawGUID, Service: first.Service}, nil
		}
		if time.Now().After(deadline) {
			// The message exists and may still go out: retrying could send
			// it twice, so this is final. The operator can look in Messages.
			return bridge.Receipt{}, bridge.Permanent(fmt.Errorf("%w: Messages did not confirm message %s sent within %s; it is not sent again",
				errUnknownOutcome, guids[0], timeout))
		}
		if err := sleep(ctx, followInterval); err != nil {
			return bridge.Receipt{}, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stage copies an attachment where sandboxed Messages may read it, under
// its own name (which becomes the row's transfer_name, how the send is
// recognised), in a folder of its own.
func (b *Bridge) stage(f *bridge.File) (string, error) {
	var random [8]byte
	rand.Read(random[:])
	dir := filepath.Join(b.cfg.AttachmentsDir, hex.EncodeToString(random[:]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("stage attachment: %w", err)
	}
	dst := filepath.Join(dir, stagedName(f))
	if err := copyFile(f.Path, dst); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("stage attachment: %w", err)
	}
	return dst, nil
}

// stagedName is the name a file is staged under: its own, when it is a
// plain file name.
func stagedName(f *bridge.File) string {
	name := f.Filename
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "attachment"
	}
	return name
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// React sends a tapback through the helper.
func (b *Bridge) React(ctx context.Context, r bridge.Reaction) (bridge.Receipt, error) {
	if !b.helper.Connected() {
		return bridge.Receipt{}, errNoHelper
	}
	if r.Type == bridge.ReactionEmoji && !b.helper.Declares(HelperEmojiReactions) {
		// The stock helper would send a message quoting the target.
		return bridge.Receipt{}, bridge.NotSent(bridge.Permanent(errors.New(noEmojiReactions)))
	}
	var guid string
	err := b.withHelperChat(ctx, r.Chat, func(chatGUID string) error {
		var err error
		if r.Type == bridge.ReactionEmoji {
			guid, err = b.helper.SendEmojiReaction(ctx, chatGUID, r.TargetGUID, r.Emoji, r.Remove)
		} else {
			guid, err = b.helper.SendReaction(ctx, chatGUID, r.TargetGUID, r.Type, r.Remove)
		}
		return err
	})
	if err != nil {
		return bridge.Receipt{}, err
	}
	// The outbox records it: its row is not the owner's tapback.
	b.claim(chatdb.Row{GUID: guid})
	return bridge.Receipt{GUID: guid, SentAt: time.Now()}, nil
}

// SetTyping shows or hides the line's typing indicator through the helper.
func (b *Bridge) SetTyping(ctx context.Context, t bridge.Typing) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	if t.On {
		return b.helper.StartTyping(ctx, b.helperChatGUID(ctx, t.Chat))
	}
	return b.helper.StopTyping(ctx, b.helperChatGUID(ctx, t.Chat))
}

// MarkRead marks a chat read through the helper.
func (b *Bridge) MarkRead(ctx context.Context, r bridge.Read) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	return b.helper.MarkRead(ctx, b.helperChatGUID(ctx, r.Chat))
}

func (b *Bridge) setSending(s *sendingState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sending = s
}

// sendingToSelf reports whether a send into the owner's chat with
// themselves is in progress, begun before row r was written.
func (b *Bridge) sendingToSelf(r chatdb.Row) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sending != nil && r.RowID > b.sending.after && b.selfChat(chatdb.Chat{Identifier: b.sending.identifier})
}

// selfChat reports whether c is the owner's chat with themselves.
func (b *Bridge) selfChat(c chatdb.Chat) bool {
	return !c.IsGroup && c.Identifier != "" && slices.ContainsFunc(b.cfg.SelfHandles, func(h string) bool { return strings.EqualFold(h, c.Identifier) })
}

// claim marks rows as our sends.
func (b *Bridge) claim(rows ...chatdb.Row) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for _, r := range rows {
		b.ours[r.GUID] = now
	}
	for g, at := range b.ours {
		if now.Sub(at) > time.Hour {
			delete(b.ours, g)
		}
	}
}

// leaveToSender reports whether the watcher must leave an outgoing row
// alone: it is one of our sends.
func (b *Bridge) leaveToSender(r chatdb.Row) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.ours[r.GUID]
	return ok
}

// beingMatched reports whether an outgoing row may belong to the send in
// progress, which has not claimed it yet: a new row in one of the
// recipient's chats, or under no chat.
func (b *Bridge) beingMatched(r chatdb.Row) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sending != nil && r.RowID > b.sending.after &&
		(r.Chat.RowID == 0 || strings.EqualFold(r.Chat.Identifier, b.sending.identifier) || b.sending.newGroup && r.Chat.IsGroup)
}
