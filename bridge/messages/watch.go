package messages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/files"
)

// How long rows wait for what they lack before being reported as they are.
const (
	// An outgoing row from another device waits to be sent (is_sent).
	unsentWait = 10 * time.Minute
	// An attachment waits for its transfer to finish (filename set).
	transferWait = 2 * time.Minute
	// A reported voice memo waits for its transcription.
	transcriptionWait = 10 * time.Minute
)

// pageSize is how many rows are read at once.
const pageSize = 1000

// Run reads chat.db until ctx ends: rows after the cursor, on a change
// notice from the folder (debounced) or every Poll as a backstop, since
// notices can stall for minutes on an idle Mac. On the first start, the
// rows already there are imported as history, without events.
func (b *Bridge) Run(ctx context.Context, sink bridge.Sink) error {
	w := &watcher{b: b, sink: sink, deferred: map[string]deferredRow{}}
	if err := w.start(ctx); err != nil {
		return err
	}
	go w.helperEvents(ctx)

	changed := make(chan struct{}, 1)
	if b.cfg.PollOnly {
		b.log.Info("polling chat.db only", "every", b.cfg.Poll)
	} else if fw, err := fsnotify.NewWatcher(); err != nil {
		b.log.Warn("cannot watch the Messages folder; polling only", "err", err)
	} else {
		defer fw.Close()
		if err := fw.Add(filepath.Dir(b.cfg.ChatDB)); err != nil {
			b.log.Warn("cannot watch the Messages folder; polling only", "dir", filepath.Dir(b.cfg.ChatDB), "err", err)
		}
		go forwardChanges(ctx, fw, changed)
	}
	poll := time.NewTicker(b.cfg.Poll)
	defer poll.Stop()
	for {
		if err := w.scan(ctx); err != nil && ctx.Err() == nil {
			b.log.Error("read chat.db", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		case <-changed:
			// Messages writes a message in several steps: take the burst
			// at once.
			if err := sleep(ctx, b.cfg.Debounce); err != nil {
				return nil
			}
			select {
			case <-changed:
			default:
			}
		}
	}
}

// forwardChanges turns the folder's events into one pending notice.
func forwardChanges(ctx context.Context, fw *fsnotify.Watcher, changed chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-fw.Events:
			if !ok {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		case _, ok := <-fw.Errors:
			if !ok {
				return
			}
		}
	}
}

// watcher is the reading side of a bridge.
type watcher struct {
	b      *Bridge
	sink   bridge.Sink
	cursor int64
	saved  int64 // the cursor as last saved
	// deferred are rows read but not yet reported, by GUID. The saved
	// cursor stays below the oldest, so a restart reads them again.
	deferred map[string]deferredRow
	// transcribing are voice memos reported without a transcription.
	transcribing map[string]time.Time
	// lateChecked is when failed sends were last looked for; lateReported
	// are the failed rows already reported, while they are in the window.
	lateChecked  time.Time
	lateReported map[string]bool
}

type deferredRow struct {
	rowID int64
	since time.Time
}

// start loads the cursor, or on the first start imports the history.
func (w *watcher) start(ctx context.Context) error {
	cursor, ok, err := w.b.cfg.Cursor.Load(ctx)
	if err != nil {
		return err
	}
	if ok {
		w.cursor, w.saved = cursor, cursor
		return nil
	}
	max, err := w.b.db.MaxRowID(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	n := 0
	for w.cursor < max {
		rows, err := w.b.db.Rows(ctx, w.cursor, pageSize*5)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		var history []bridge.Inbound
		for _, r := range rows {
			if r.RowID > max {
				break
			}
			if r.Kind() == chatdb.KindMessage && (!r.IsFromMe || r.IsSent) {
				history = append(history, w.inbound(r, false))
			}
			w.cursor = r.RowID
		}
		if err := w.sink.ReceiveHistory(ctx, w.b.cfg.Line, history); err != nil {
			return fmt.Errorf("import history: %w", err)
		}
		n += len(history)
	}
	w.cursor, w.saved = max, max
	w.b.log.Info("imported the Messages history", "messages", n, "took", time.Since(start).Round(time.Millisecond))
	return w.b.cfg.Cursor.Save(ctx, w.cursor)
}

// scan reports new rows, then rows that were waiting.
func (w *watcher) scan(ctx context.Context) error {
	for {
		rows, err := w.b.db.Rows(ctx, w.cursor, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rows {
			w.handle(ctx, r)
			w.cursor = r.RowID
		}
		if err := w.recheck(ctx); err != nil {
			return err
		}
		if err := w.lateFailures(ctx); err != nil {
			return err
		}
		if c := w.saveable(); c != w.saved {
			if err := w.b.cfg.Cursor.Save(ctx, c); err != nil {
				return err
			}
			w.saved = c
		}
		if len(rows) < pageSize {
			return nil
		}
	}
}

// lateFailureWindow is how long after it was sent a message of ours is
// watched for a late failure.
const lateFailureWindow = 6 * time.Hour

// lateFailures reports our messages that Messages failed after they were
// sent ("Not Delivered" after is_sent turned 1), every LateFailureCheck.
// Messages sets the row's error then: looking for error rows in a recent
// window by date (an indexed column) finds them after a restart too. The
// sink ignores rows that are not the message of a sent outbox item.
func (w *watcher) lateFailures(ctx context.Context) error {
	now := time.Now()
	if now.Sub(w.lateChecked) < w.b.cfg.LateFailureCheck {
		return nil
	}
	w.lateChecked = now
	failed, err := w.b.db.FailedOutgoing(ctx, now.Add(-lateFailureWindow))
	if err != nil {
		return err
	}
	reported := make(map[string]bool, len(failed))
	for _, f := range failed {
		if w.lateReported[f.GUID] {
			reported[f.GUID] = true
			continue
		}
		err := w.sink.ReceiveSendFailure(ctx, bridge.SendFailure{Line: w.b.cfg.Line, GUID: f.GUID,
			Reason: fmt.Sprintf("Messages reported error %d%s after the message was sent", f.Error, errorCodeMeaning(f.Error))})
		if errors.Is(err, bridge.ErrNotRecorded) {
			continue // ours and not recorded yet, or not ours: looked at again next time
		}
		if err != nil {
			w.b.log.Error("record a late send failure", "guid", f.GUID, "err", err)
			continue
		}
		reported[f.GUID] = true
	}
	w.lateReported = reported
	return nil
}

// saveable is the cursor a restart may resume from: below every row that
// is still waiting.
func (w *watcher) saveable() int64 {
	c := w.cursor
	for _, d := range w.deferred {
		c = min(c, d.rowID-1)
	}
	return c
}

// recheck reads the waiting rows and voice memos again.
func (w *watcher) recheck(ctx context.Context) error {
	if len(w.deferred) == 0 && len(w.transcribing) == 0 {
		return nil
	}
	guids := make([]string, 0, len(w.deferred)+len(w.transcribing))
	for g := range w.deferred {
		guids = append(guids, g)
	}
	for g := range w.transcribing {
		guids = append(guids, g)
	}
	rows, err := w.b.db.RowsByGUID(ctx, guids)
	if err != nil {
		return err
	}
	found := map[string]bool{}
	for _, r := range rows {
		found[r.GUID] = true
		if since, ok := w.transcribing[r.GUID]; ok {
			if r.Transcription != nil || time.Since(since) > transcriptionWait {
				delete(w.transcribing, r.GUID)
			}
			if r.Transcription != nil {
				// Reported again: the receiver fills in the transcription.
				w.report(ctx, r)
			}
			continue
		}
		w.handle(ctx, r)
	}
	for _, g := range guids {
		if !found[g] { // deleted meanwhile
			delete(w.deferred, g)
			delete(w.transcribing, g)
		}
	}
	return nil
}

// handle reports one row, or leaves it waiting for what it lacks.
func (w *watcher) handle(ctx context.Context, r chatdb.Row) {
	if w.keepWaiting(r) {
		return
	}
	delete(w.deferred, r.GUID)
	switch r.Kind() {
	case chatdb.KindReaction:
		w.reaction(ctx, r)
		return
	case chatdb.KindMessage:
	default:
		return // system rows, stickers, polls…: not messages
	}
	if r.IsFromMe && (w.b.leaveToSender(r) || r.Error != 0 || !r.IsSent) {
		// Our own send (the outbox records it), a send that failed where
		// it was made, or one that never went out.
		return
	}
	if r.Chat.GUID == "" {
		// Filed under no chat: there is no conversation to put it in.
		w.b.log.Debug("message under no chat skipped", "guid", r.GUID)
		return
	}
	w.report(ctx, r)
	if r.IsAudioMessage && r.Transcription == nil {
		if w.transcribing == nil {
			w.transcribing = map[string]time.Time{}
		}
		w.transcribing[r.GUID] = time.Now()
	}
}

// keepWaiting reports whether a message row still lacks something it is
// worth waiting for, and if so defers it, up to a limit.
func (w *watcher) keepWaiting(r chatdb.Row) bool {
	if r.Kind() != chatdb.KindMessage {
		return false
	}
	limit := time.Duration(0)
	switch {
	case r.IsFromMe && w.b.leaveToSender(r):
	case r.IsFromMe && r.Error == 0 && (w.b.beingMatched(r) || !r.IsSent):
		limit = unsentWait
	case w.transferring(r):
		limit = transferWait
	}
	if limit == 0 {
		return false
	}
	d, ok := w.deferred[r.GUID]
	if !ok {
		d = deferredRow{rowID: r.RowID, since: time.Now()}
		w.deferred[r.GUID] = d
	}
	return time.Since(d.since) <= limit
}

// transferring reports whether an attachment of r has not arrived yet.
func (w *watcher) transferring(r chatdb.Row) bool {
	for _, a := range r.Attachments {
		if a.Path == "" {
			return true
		}
	}
	return false
}

func (w *watcher) report(ctx context.Context, r chatdb.Row) {
	if err := w.sink.Receive(ctx, w.inbound(r, true)); err != nil {
		w.b.log.Error("record a message from chat.db", "guid", r.GUID, "err", err)
	}
}

// inbound maps a row. withFiles reports attachment files that exist, to be
// copied into the file store; history keeps their metadata only.
func (w *watcher) inbound(r chatdb.Row, withFiles bool) bridge.Inbound {
	in := bridge.Inbound{
		Line: w.b.cfg.Line, Service: r.Service, Chat: bridgeChat(r.Chat), GUID: r.GUID, Sender: r.Sender,
		IsFromMe: r.IsFromMe, Text: r.Text, SentAt: r.Date, ReplyToGUID: r.ThreadOriginatorGUID,
		IsAudioMessage: r.IsAudioMessage,
	}
	if r.IsFromMe {
		in.Sender = w.b.cfg.Line
	}
	for _, a := range r.Attachments {
		f := bridge.File{Filename: a.TransferName, MimeType: a.MimeType, Size: a.TotalBytes}
		if f.Filename == "" {
			f.Filename = filepath.Base(a.Path)
		}
		if f.MimeType == "" {
			f.MimeType = files.TypeByName(f.Filename)
		}
		if r.IsAudioMessage {
			f.Transcription = r.Transcription
		}
		if withFiles && a.Path != "" {
			if _, err := os.Stat(a.Path); err == nil {
				f.Path = a.Path
			} else {
				w.b.log.Warn("attachment file missing; recorded without it", "guid", r.GUID, "path", a.Path, "err", err)
			}
		}
		in.Attachments = append(in.Attachments, f)
	}
	return in
}

func bridgeChat(c chatdb.Chat) bridge.Chat {
	participants := slices.Clone(c.Participants)
	if !c.IsGroup && len(participants) == 0 {
		participants = []string{c.Identifier}
	}
	return bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup, Name: c.DisplayName, Participants: participants}
}

// reaction reports a tapback added or removed.
func (w *watcher) reaction(ctx context.Context, r chatdb.Row) {
	typ, added, ok := r.Reaction()
	if !ok {
		return
	}
	sender := r.Sender
	if r.IsFromMe {
		sender = w.b.cfg.Line
	}
	err := w.sink.ReceiveReaction(ctx, bridge.InboundReaction{
		Line: w.b.cfg.Line, Chat: bridgeChat(r.Chat), TargetGUID: r.AssociatedGUID, Type: typ, Added: added,
		Sender: sender, IsFromMe: r.IsFromMe, SentAt: r.Date,
	})
	if err != nil {
		// Most often a tapback on a message from before the line was
		// connected: nothing to attach it to.
		w.b.log.Debug("tapback not recorded", "guid", r.GUID, "target", r.AssociatedGUID, "err", err)
	}
}

// helperEvents reports contacts' typing, which only the helper sees.
func (w *watcher) helperEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.b.helper.Events():
			if !ok {
				return
			}
			var on bool
			switch ev.Name {
			case "started-typing":
				on = true
			case "stopped-typing":
			default:
				continue
			}
			// Group typing names no member: only one-to-one chats.
			_, contact, isDirect := strings.Cut(ev.ChatGUID, ";-;")
			if !isDirect || contact == "" {
				continue
			}
			err := w.sink.ReceiveTyping(ctx, bridge.InboundTyping{Line: w.b.cfg.Line, Chat: bridge.Chat{GUID: ev.ChatGUID, Identifier: contact},
				Sender: contact, On: on, At: time.Now()})
			if err != nil && !errors.Is(err, context.Canceled) {
				w.b.log.Debug("typing not recorded", "chat", ev.ChatGUID, "err", err)
			}
		}
	}
}
