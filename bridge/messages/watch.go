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
	"github.com/blueline-app/blueline/mediatype"
)

// How long rows wait for what they lack before being reported as they are.
const (
	// An outgoing row from another device waits to be sent (is_sent).
	unsentWait = 10 * time.Minute
	// A reported voice memo waits for its transcription.
	transcriptionWait = 10 * time.Minute
	// A reported message whose file is missing from the disk (still
	// downloading from iCloud) is looked at again until it appears.
	lateFileWait = 24 * time.Hour
)

// changeWindow is how far back, by date, rows are watched for changes:
// edits and unsends come within minutes, but a contact may read a message
// days later.
const changeWindow = 7 * 24 * time.Hour

// unrecordedWait is how long a changed row the sink has no message for (a
// send the outbox has not recorded yet) is offered again.
const unrecordedWait = 10 * time.Minute

// A row that could not be stored is tried again after a pause that doubles
// from retryMin up to retryMax, for as long as it fails: the saved cursor
// stays below it meanwhile, so not even a restart skips it.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// pageSize is how many rows are read at once.
const pageSize = 1000

// Run reads chat.db until ctx ends: rows after the cursor, on a change
// notice from the folder (debounced) or every Poll as a backstop, since
// notices can stall for minutes on an idle Mac. On the first start, the
// rows already there are imported as history, without events.
func (b *Bridge) Run(ctx context.Context, sink bridge.Sink) error {
	w := &watcher{b: b, sink: sink, deferred: map[string]deferredRow{}, failed: map[string]failedRow{},
		transcribing: map[string]time.Time{}, states: map[string]chatdb.RowState{}, unrecorded: map[string]time.Time{},
		missingFiles: map[string]missingFiles{}}
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
	poll := time.NewTimer(b.cfg.Poll)
	defer poll.Stop()
	for {
		err := w.scan(ctx)
		if ctx.Err() != nil {
			return nil
		}
		b.health.read(err)
		if err != nil {
			b.log.Error("read chat.db", "err", err)
		}
		poll.Reset(min(b.cfg.Poll, time.Until(w.nextWake())))
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
	// deferred are rows read but not yet reported, by GUID, and failed
	// those whose storing failed. The saved cursor stays below the oldest
	// of both, so a restart reads them again.
	deferred map[string]deferredRow
	failed   map[string]failedRow
	// transcribing are voice memos reported without a transcription.
	transcribing map[string]time.Time
	// states are the states of the rows in the change window as last
	// applied, by GUID; unrecorded are changed rows the sink had no
	// message for, since when; missingFiles are reported messages whose
	// files were not on the disk.
	states       map[string]chatdb.RowState
	unrecorded   map[string]time.Time
	missingFiles map[string]missingFiles
}

type deferredRow struct {
	rowID int64
	since time.Time
	until time.Time // when it is reported as it is
}

// owedWake is how soon the watcher looks again while a row is owed to the
// sink (not recorded yet) or a file to a message.
const owedWake = time.Second

// nextWake is when the watcher must read again whatever the database does:
// a waiting row's deadline, a failed row's retry, a row or file still owed.
func (w *watcher) nextWake() time.Time {
	wake := time.Now().Add(w.b.cfg.Poll)
	for _, d := range w.deferred {
		wake = earliest(wake, d.until)
	}
	for _, f := range w.failed {
		wake = earliest(wake, f.retryAt)
	}
	if len(w.unrecorded) > 0 || len(w.missingFiles) > 0 {
		wake = earliest(wake, time.Now().Add(owedWake))
	}
	return wake
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

type failedRow struct {
	rowID    int64
	failures int
	retryAt  time.Time
}

type missingFiles struct {
	paths []string
	since time.Time
}

// historyPage is how many rows the first start reads at once, and
// historyLog how often it tells how far the import has come.
const (
	historyPage = 5 * pageSize
	historyLog  = 5 * time.Second
)

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
	w.b.log.Info("importing the Messages history", "last_rowid", max)
	// One goroutine reads and maps the next page of chat.db while this one
	// stores the last.
	readCtx, stop := context.WithCancel(ctx)
	pages := make(chan historyBatch, 1)
	go w.readHistory(readCtx, max, pages)
	defer func() {
		stop()
		for range pages { // until the reader has stopped
		}
	}()
	n, logged := 0, time.Now()
	for p := range pages {
		if p.err != nil {
			return p.err
		}
		if err := w.sink.ReceiveHistory(ctx, w.b.cfg.Line, p.history); err != nil {
			return fmt.Errorf("import history: %w", err)
		}
		n += len(p.history)
		w.cursor = p.last
		if time.Since(logged) >= historyLog {
			logged = time.Now()
			w.b.log.Info("importing the Messages history", "rowid", w.cursor, "of", max,
				"percent", w.cursor*100/max, "messages", n, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	if err := ctx.Err(); err != nil {
		return err // stopped before the end: the next start imports again
	}
	if err := w.sink.HistoryImported(ctx, w.b.cfg.Line); err != nil {
		return fmt.Errorf("import history: %w", err)
	}
	w.cursor, w.saved = max, max
	w.b.log.Info("imported the Messages history", "messages", n, "took", time.Since(start).Round(time.Millisecond))
	return w.b.cfg.Cursor.Save(ctx, w.cursor)
}

// historyBatch is one page of history read: its messages, and the last
// ROWID read.
type historyBatch struct {
	history []bridge.Inbound
	last    int64
	err     error
}

// readHistory reads the rows up to max ROWID after the cursor, a page at a
// time, and sends their messages (sent ones only, none unsent) on pages,
// which it closes when done or when ctx ends.
func (w *watcher) readHistory(ctx context.Context, max int64, pages chan<- historyBatch) {
	defer close(pages)
	after := w.cursor
	for after < max {
		rows, err := w.b.db.Rows(ctx, after, historyPage)
		if err != nil {
			pages <- historyBatch{err: err}
			return
		}
		if len(rows) == 0 {
			return
		}
		p := historyBatch{history: make([]bridge.Inbound, 0, len(rows))}
		for _, r := range rows {
			if r.RowID > max {
				break
			}
			if r.Kind() == chatdb.KindMessage && (!r.IsFromMe || r.IsSent) {
				if _, unsent := r.Unsent(); !unsent {
					in, _ := w.inbound(r, false)
					p.history = append(p.history, in)
				}
			}
			p.last = r.RowID
		}
		if p.last == 0 {
			return // the rows up to max are gone
		}
		after = p.last
		select {
		case pages <- p:
		case <-ctx.Done():
			return
		}
	}
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
		if err := w.changes(ctx); err != nil {
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

// saveable is the cursor a restart may resume from: below every row that
// is still waiting.
func (w *watcher) saveable() int64 {
	c := w.cursor
	for _, d := range w.deferred {
		c = min(c, d.rowID-1)
	}
	for _, f := range w.failed {
		c = min(c, f.rowID-1)
	}
	return c
}

// recheck reads the waiting rows, the rows due to be stored again and the
// voice memos again.
func (w *watcher) recheck(ctx context.Context) error {
	now := time.Now()
	guids := make([]string, 0, len(w.deferred)+len(w.transcribing))
	for g := range w.deferred {
		guids = append(guids, g)
	}
	for g, f := range w.failed {
		if !now.Before(f.retryAt) {
			guids = append(guids, g)
		}
	}
	for g := range w.transcribing {
		guids = append(guids, g)
	}
	if len(guids) == 0 {
		return nil
	}
	rows, err := w.b.db.RowsByGUID(ctx, guids)
	if err != nil {
		return err
	}
	found := map[string]bool{}
	for _, r := range rows {
		found[r.GUID] = true
		if since, ok := w.transcribing[r.GUID]; ok {
			if r.Transcription != nil {
				// Reported again: the receiver fills in the transcription.
				if err := w.report(ctx, r); err != nil {
					w.b.log.Error("record a transcription; trying again", "guid", r.GUID, "err", err)
					continue
				}
			}
			if r.Transcription != nil || time.Since(since) > transcriptionWait {
				delete(w.transcribing, r.GUID)
			}
			continue
		}
		w.handle(ctx, r)
	}
	for _, g := range guids {
		if !found[g] { // deleted meanwhile
			delete(w.deferred, g)
			delete(w.failed, g)
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
	var err error
	switch r.Kind() {
	case chatdb.KindReaction:
		err = w.reaction(ctx, r)
	case chatdb.KindGroupChange:
		err = w.groupChange(ctx, r)
	case chatdb.KindMessage:
		err = w.message(ctx, r)
	default:
		return // system rows, stickers, polls…: not messages
	}
	if err == nil {
		delete(w.failed, r.GUID)
		return
	}
	f := w.failed[r.GUID]
	f.rowID, f.failures = r.RowID, f.failures+1
	pause := min(retryMax, retryMin<<min(f.failures-1, 10))
	f.retryAt = time.Now().Add(pause)
	w.failed[r.GUID] = f
	w.b.log.Error("record a row of chat.db; trying again", "guid", r.GUID, "kind", r.Kind(), "failures", f.failures, "in", pause, "err", err)
}

// message reports a message row.
func (w *watcher) message(ctx context.Context, r chatdb.Row) error {
	if r.IsFromMe && (w.b.leaveToSender(r) || r.Error != 0 || !r.IsSent) {
		// Our own send (the outbox records it), a send that failed where
		// it was made, or one that never went out.
		return nil
	}
	if _, unsent := r.Unsent(); unsent {
		return nil // taken back before we saw it
	}
	if r.Chat.GUID == "" {
		// Filed under no chat: there is no conversation to put it in.
		w.b.log.Debug("message under no chat skipped", "guid", r.GUID)
		return nil
	}
	if err := w.report(ctx, r); err != nil {
		return err
	}
	if r.IsAudioMessage && r.Transcription == nil {
		w.transcribing[r.GUID] = time.Now()
	}
	return nil
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
		limit = w.b.cfg.TransferWait
	}
	if limit == 0 {
		return false
	}
	d, ok := w.deferred[r.GUID]
	if !ok {
		d = deferredRow{rowID: r.RowID, since: time.Now(), until: time.Now().Add(limit)}
		w.deferred[r.GUID] = d
	}
	return time.Now().Before(d.until)
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

func (w *watcher) report(ctx context.Context, r chatdb.Row) error {
	in, missing := w.inbound(r, true)
	if err := w.sink.Receive(ctx, in); err != nil {
		return err
	}
	if len(missing) > 0 {
		w.b.log.Warn("attachment file missing; recorded without it until it appears", "guid", r.GUID, "paths", missing)
		w.missingFiles[r.GUID] = missingFiles{paths: missing, since: time.Now()}
	}
	return nil
}

// inbound maps a row. withFiles reports attachment files that exist, to be
// copied into the file store, and returns the paths of those that do not
// (yet); history keeps their metadata only.
func (w *watcher) inbound(r chatdb.Row, withFiles bool) (_ bridge.Inbound, missing []string) {
	in := bridge.Inbound{
		Line: w.b.cfg.Line, Service: r.Service, Chat: bridgeChat(r.Chat), GUID: r.GUID, Sender: r.Sender,
		IsFromMe: r.IsFromMe, Text: r.Text, SentAt: r.Date, ReplyToGUID: r.ThreadOriginatorGUID,
		IsAudioMessage: r.IsAudioMessage, EditedAt: r.DateEdited,
	}
	if r.IsFromMe {
		in.Sender = w.b.cfg.Line
		in.DeliveredAt, in.ReadAt = r.DateDelivered, r.DateRead
	}
	in.Attachments, missing = w.files(r, withFiles)
	return in, missing
}

// files maps a row's attachments. withFiles gives the path of each file
// that exists, and returns the paths of those that do not (yet).
func (w *watcher) files(r chatdb.Row, withFiles bool) (out []bridge.File, missing []string) {
	for _, a := range r.Attachments {
		f := bridge.File{Filename: a.TransferName, MimeType: a.MimeType, Size: a.TotalBytes}
		if f.Filename == "" {
			f.Filename = filepath.Base(a.Path)
		}
		if f.MimeType == "" {
			f.MimeType = mediatype.ByName(f.Filename)
		}
		if r.IsAudioMessage {
			f.Transcription = r.Transcription
		}
		if withFiles && a.Path != "" {
			if _, err := os.Stat(a.Path); err == nil {
				f.Path = a.Path
			} else {
				missing = append(missing, a.Path)
			}
		}
		out = append(out, f)
	}
	return out, missing
}

func bridgeChat(c chatdb.Chat) bridge.Chat {
	participants := slices.Clone(c.Participants)
	if !c.IsGroup && len(participants) == 0 {
		participants = []string{c.Identifier}
	}
	return bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup, Name: c.DisplayName, Participants: participants}
}

// reaction reports a tapback added or removed. One on a message we have
// no record of (from before the line was connected) is dropped.
func (w *watcher) reaction(ctx context.Context, r chatdb.Row) error {
	typ, added, ok := r.Reaction()
	if !ok {
		return nil
	}
	sender := r.Sender
	if r.IsFromMe {
		sender = w.b.cfg.Line
	}
	err := w.sink.ReceiveReaction(ctx, bridge.InboundReaction{
		Line: w.b.cfg.Line, Chat: bridgeChat(r.Chat), TargetGUID: r.AssociatedGUID, Type: typ, Emoji: r.AssociatedEmoji,
		Added: added, Sender: sender, IsFromMe: r.IsFromMe, SentAt: r.Date,
	})
	if errors.Is(err, bridge.ErrNotRecorded) {
		w.b.log.Debug("tapback not recorded", "guid", r.GUID, "target", r.AssociatedGUID, "err", err)
		return nil
	}
	return err
}

// groupChange reports a member added, removed or gone, or a group's new
// name or photo.
func (w *watcher) groupChange(ctx context.Context, r chatdb.Row) error {
	if !r.Chat.IsGroup {
		return nil
	}
	u := bridge.ChatUpdate{Line: w.b.cfg.Line, Chat: bridgeChat(r.Chat), GUID: r.GUID, By: r.Sender, IsFromMe: r.IsFromMe, At: r.Date}
	if r.IsFromMe {
		u.By = w.b.cfg.Line
	}
	switch {
	case r.ItemType == chatdb.ItemMembers && r.GroupActionType == 0:
		u.Action, u.Participant = bridge.ChatParticipantAdded, r.OtherHandle
	case r.ItemType == chatdb.ItemMembers && r.GroupActionType == 1:
		u.Action, u.Participant = bridge.ChatParticipantRemoved, r.OtherHandle
	case r.ItemType == chatdb.ItemRename:
		u.Action, u.Name = bridge.ChatRenamed, r.GroupTitle
	case r.ItemType == chatdb.ItemGroup && r.GroupActionType == 0:
		u.Action, u.Participant = bridge.ChatParticipantLeft, u.By
	case r.ItemType == chatdb.ItemGroup && r.GroupActionType == 1:
		u.Action = bridge.ChatPhotoChanged
	case r.ItemType == chatdb.ItemGroup && r.GroupActionType == 2:
		u.Action = bridge.ChatPhotoRemoved
	default:
		return nil
	}
	if (u.Action == bridge.ChatParticipantAdded || u.Action == bridge.ChatParticipantRemoved) && u.Participant == "" {
		return nil // names no member: nothing to change
	}
	return w.sink.ReceiveChatUpdate(ctx, u)
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
