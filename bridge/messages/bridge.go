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
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
)

// Config is one line's Messages bridge.
type Config struct {
	Line           string // the line's handle
	Service        string // "imessage" or "sms"
	ChatDB         string // the Messages database; "~" is the home folder
	Osascript      string // the AppleScript runner program
	AttachmentsDir string // where files are staged for Messages; "~" is the home folder
	HelperPort     int    // loopback port for the private-API helper; 0: DefaultHelperPort
	Cursor         Cursor // where the bridge keeps how far it has read chat.db

	// PollOnly turns off watching chat.db's folder: it is then read every
	// Poll only.
	PollOnly bool

	// Zero values mean the defaults below.
	Poll        time.Duration // backstop poll of chat.db: 1 s
	Debounce    time.Duration // wait after a change notice, to take a burst at once: 25 ms
	TextTimeout time.Duration // for a sent text to show as sent in chat.db: 30 s
	FileTimeout time.Duration // for a sent file: 3 min
	Runner      Runner        // runs AppleScript; nil: Osascript{Path: Osascript}
	Log         *slog.Logger
}

// Cursor keeps the highest chat.db ROWID the bridge has handled, so that a
// restart neither replays old messages nor misses new ones.
type Cursor interface {
	Load(ctx context.Context) (rowID int64, ok bool, err error)
	Save(ctx context.Context, rowID int64) error
}

// Bridge drives the Messages app for one line.
type Bridge struct {
	cfg    Config
	db     *chatdb.DB
	sender *Sender
	helper *HelperServer
	log    *slog.Logger

	// sendMu makes sends one at a time: a send is recognised in chat.db as
	// the next outgoing row of its chat.
	sendMu sync.Mutex

	mu sync.Mutex
	// sending is the chat of the send being matched, and the ROWID it
	// started after: the watcher leaves that chat's new outgoing rows to it.
	sending *sendingState
	// ours are the GUIDs of rows that are our own sends: the outbox records
	// them, the watcher must not report them as sent from elsewhere.
	ours map[string]time.Time
}

type sendingState struct {
	chatGUID string
	after    int64
}

// Open checks the database and starts the helper's listener. The bridge
// reads and sends once Run is called.
func Open(ctx context.Context, cfg Config) (*Bridge, error) {
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
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
	return &Bridge{cfg: cfg, db: db, sender: NewSender(cfg.Runner, cfg.TextTimeout), helper: helper, log: log,
		ours: map[string]time.Time{}}, nil
}

// Close releases the database and the helper's listener.
func (b *Bridge) Close() error {
	return errors.Join(b.helper.Close(), b.db.Close())
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

var errNoHelper = bridge.Permanent(errors.New("this needs the private-API helper inside Messages, which is not connected"))

// Send sends a message and returns once chat.db shows it sent. The outcome
// is never taken from osascript's exit status alone: the new outgoing row is
// found and followed until is_sent or an error.
func (b *Bridge) Send(ctx context.Context, out bridge.Outgoing) (bridge.Receipt, error) {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	mark, err := b.db.MaxRowID(ctx)
	if err != nil {
		return bridge.Receipt{}, err
	}
	since := time.Now().Add(-2 * time.Second) // the Mac's clock writes chat.db; allow a little skew
	b.setSending(&sendingState{chatGUID: out.Chat.GUID, after: mark})
	defer b.setSending(nil)

	var staged string
	if out.Attachment != nil {
		if staged, err = b.stage(out.Attachment); err != nil {
			return bridge.Receipt{}, err
		}
		// Messages reads the staged copy while sending: remove it once
		// the send has reached a final state, which is when Send returns.
		defer os.RemoveAll(filepath.Dir(staged))
	}
	address := ""
	if !out.Chat.IsGroup {
		address = out.Chat.Identifier
	}
	if out.IsAudioMessage || out.ReplyToGUID != "" {
		if !b.helper.Connected() {
			if out.IsAudioMessage {
				return bridge.Receipt{}, errNoHelper
			}
			// A reply without the helper goes out as a plain message:
			// better unthreaded than not at all.
			b.log.Info("private-API helper not connected: reply sent unthreaded", "outbox_id", out.OutboxID)
		} else {
			return b.sendWithHelper(ctx, out, staged)
		}
	}
	var first chatdb.Row
	if out.Text != "" {
		if err := b.sender.SendText(ctx, out.Chat.GUID, address, out.Service, out.Text); err != nil {
			return bridge.Receipt{}, err
		}
		if first, err = b.follow(ctx, out.Chat.GUID, &mark, since, out.Text, "", b.cfg.TextTimeout); err != nil {
			return bridge.Receipt{}, err
		}
	}
	if staged != "" {
		if err := b.sender.SendFile(ctx, out.Chat.GUID, address, out.Service, staged); err != nil {
			return bridge.Receipt{}, err
		}
		row, err := b.follow(ctx, out.Chat.GUID, &mark, since, "", filepath.Base(staged), b.cfg.FileTimeout)
		if err != nil {
			return bridge.Receipt{}, err
		}
		if first.GUID == "" {
			first = row
		}
	}
	return bridge.Receipt{GUID: first.GUID, SentAt: first.Date}, nil
}

// sendWithHelper sends a voice memo or a threaded reply through the helper,
// which names the new row's GUID.
func (b *Bridge) sendWithHelper(ctx context.Context, out bridge.Outgoing, staged string) (bridge.Receipt, error) {
	var guid string
	var err error
	timeout := b.cfg.TextTimeout
	if staged != "" {
		timeout = b.cfg.FileTimeout
		guid, err = b.helper.SendAttachment(ctx, out.Chat.GUID, staged, out.IsAudioMessage, out.ReplyToGUID)
	} else {
		guid, err = b.helper.SendMessage(ctx, out.Chat.GUID, out.Text, out.ReplyToGUID)
	}
	if err != nil {
		return bridge.Receipt{}, err
	}
	b.claim(guid)
	row, err := b.await(ctx, guid, timeout)
	if err != nil {
		return bridge.Receipt{}, err
	}
	return bridge.Receipt{GUID: row.GUID, SentAt: row.Date}, nil
}

// follow finds the outgoing row of a send (by text, or by the file's name)
// and follows it until it is sent or has failed.
func (b *Bridge) follow(ctx context.Context, chatGUID string, mark *int64, since time.Time, text, filename string, timeout time.Duration) (chatdb.Row, error) {
	deadline := time.Now().Add(timeout)
	for {
		row, ok, err := b.db.FindOutgoing(ctx, chatGUID, *mark, since, text, filename)
		if err != nil {
			return chatdb.Row{}, err
		}
		if ok {
			b.claim(row.GUID)
			*mark = row.RowID
			return b.await(ctx, row.GUID, time.Until(deadline))
		}
		if time.Now().After(deadline) {
			// Nothing reached chat.db: the send may be retried.
			return chatdb.Row{}, fmt.Errorf("Messages accepted the send but wrote no message for it within %s", timeout)
		}
		if err := sleep(ctx, followInterval); err != nil {
			return chatdb.Row{}, err
		}
	}
}

const followInterval = 50 * time.Millisecond

// await follows a known outgoing row until it is sent or has failed.
func (b *Bridge) await(ctx context.Context, guid string, timeout time.Duration) (chatdb.Row, error) {
	deadline := time.Now().Add(timeout)
	for {
		rows, err := b.db.RowsByGUID(ctx, []string{guid})
		if err != nil {
			return chatdb.Row{}, err
		}
		if len(rows) == 1 {
			switch row := rows[0]; {
			case row.Error != 0:
				return chatdb.Row{}, bridge.Permanent(fmt.Errorf("Messages could not send it (error %d)", row.Error))
			case row.IsSent:
				return row, nil
			}
		}
		if time.Now().After(deadline) {
			// The message exists and may still go out: retrying could send
			// it twice, so this is final. The operator can look in Messages.
			return chatdb.Row{}, bridge.Permanent(fmt.Errorf("Messages did not confirm message %s sent within %s", guid, timeout))
		}
		if err := sleep(ctx, followInterval); err != nil {
			return chatdb.Row{}, err
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
	name := f.Filename
	if name == "" || name == "." || strings.ContainsAny(name, `/\`) {
		name = "attachment"
	}
	dst := filepath.Join(dir, name)
	if err := copyFile(f.Path, dst); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("stage attachment: %w", err)
	}
	return dst, nil
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
	guid, err := b.helper.SendReaction(ctx, r.Chat.GUID, r.TargetGUID, r.Type, r.Remove)
	if err != nil {
		return bridge.Receipt{}, err
	}
	return bridge.Receipt{GUID: guid, SentAt: time.Now()}, nil
}

// SetTyping shows or hides the line's typing indicator through the helper.
func (b *Bridge) SetTyping(ctx context.Context, t bridge.Typing) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	if t.On {
		return b.helper.StartTyping(ctx, t.Chat.GUID)
	}
	return b.helper.StopTyping(ctx, t.Chat.GUID)
}

// MarkRead marks a chat read through the helper.
func (b *Bridge) MarkRead(ctx context.Context, r bridge.Read) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	return b.helper.MarkRead(ctx, r.Chat.GUID)
}

func (b *Bridge) setSending(s *sendingState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sending = s
}

// claim marks a row as one of our sends.
func (b *Bridge) claim(guid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.ours[guid] = now
	for g, at := range b.ours {
		if now.Sub(at) > time.Hour {
			delete(b.ours, g)
		}
	}
}

// leaveToSender reports whether the watcher must leave an outgoing row
// alone: it is one of our sends, or may be one still being matched.
func (b *Bridge) leaveToSender(r chatdb.Row) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.ours[r.GUID]
	return ok
}

// beingMatched reports whether an outgoing row may belong to the send in
// progress, which has not claimed it yet.
func (b *Bridge) beingMatched(r chatdb.Row) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sending != nil && b.sending.chatGUID == r.Chat.GUID && r.RowID > b.sending.after
}
