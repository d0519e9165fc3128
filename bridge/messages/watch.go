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
// A row of the owner's that is not sent yet (Send Later, an iPhone offline)
// is not among them: the change scanner watches it by its state, however
// long, and records it once sent (changes.go).
const (
	// An outgoing row the sender may be matching as its own waits for it.
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

// Live or history: a new row is news (an event) when it is dated at most
// liveAge before the watcher first read it, or when it is a contact's row
// nobody has read yet dated at most catchUpAge before (the Mac was offline
// or asleep, and catches up). Any other new row is history: old rows that
// Messages writes again under new GUIDs (iCloud replays history that way,
// hours to days old and read long ago) are stored in their place without
// an event. A new row that repeats a stored message under another GUID
// (a twin) is not stored at all.
const (
	liveAge    = bridge.LiveAge
	catchUpAge = 24 * time.Hour
)

// isNews tells a live row from history, by its date as against when it
// was first read (seen), and whether the owner has read it.
func isNews(r chatdb.Row, seen time.Time) bool {
	if r.Date.IsZero() {
		return true
	}
	age := seen.Sub(r.Date)
	return age <= liveAge || !r.IsFromMe && !r.IsRead && age <= catchUpAge
}

// screened reports whether Messages filed the row away from the inbox:
// junk, blocked, the SMS filter's folders, and unknown senders when the
// line holds them. Such rows are stored without events, and their senders
// do not become contacts the line may write to.
func (w *watcher) screened(r chatdb.Row) bool {
	switch r.Filter() {
	case "":
		return false
	case chatdb.FilterUnknownSender, chatdb.FilterPendingReview:
		return w.b.cfg.HoldUnknownSenders
	}
	return true
}

// Run reads chat.db until ctx ends: rows after the cursor, on a change
// notice from the folder (debounced) or every Poll as a backstop, since
// notices can stall for minutes on an idle Mac. On the first start, the
// rows already there are imported as history, without events.
func (b *Bridge) Run(ctx context.Context, sink bridge.Sink) error {
	w := &watcher{b: b, sink: sink, deferred: map[string]deferredRow{}, failed: map[string]failedRow{},
		transcribing: map[string]time.Time{}, states: map[string]chatdb.RowState{}, unrecorded: map[string]time.Time{},
		missingFiles: map[string]missingFiles{}, seen: map[string]time.Time{}}
	var err error
	if w.file, err = os.Stat(b.cfg.ChatDB); err != nil {
		return fmt.Errorf("chat.db: %w", err)
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	go w.helperEvents(ctx)
	go b.watchdog(ctx)

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
		err := w.reopenIfReplaced(ctx)
		if err == nil {
			err = w.scan(ctx)
		}
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
	// seen is when rows not reported yet (waiting, failed, or not sent
	// yet) were first read: what tells news from history once they are.
	seen map[string]time.Time
	// held are the history and screened rows of the page being read,
	// stored together at its end (storeHeld).
	held []heldRow
	// flood sums up the rows taken as history since the last log line.
	flood floodStats
	// file is chat.db's file as opened, to notice another one put at its
	// path.
	file os.FileInfo
}

type heldRow struct {
	rowID int64
	guid  string
	kind  chatdb.Kind
	in    bridge.Inbound
}

type floodStats struct {
	rows, screened   int
	oldest, youngest time.Time
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

// historyPage is how many rows the first start reads at once, historyAhead
// how many pages the reader may have read before they are stored, and
// historyLog how often the import tells how far it has come. The sink
// stores the pages as they come (bridge.Sink.ImportHistory), in
// transactions of many pages; the pages ahead keep the reader going while
// a transaction commits. Measured on 1,000,000 rows in 2,000 chats
// (MessagesFirstStart): 3 pages ahead 9.5–10.1 s, 6 pages 9.1–9.7 s, 8
// pages 8.2–9.0 s with an anonymous memory peak of 134–142 MiB (the goal is
// under 150). Once the reader took a third less CPU (chatdb.Backlog) and
// the sink mapped pages ahead of its transactions, 4 pages took no longer
// than 6 (7.3–7.4 s against 7.8–8.1), with 6 MiB less at the peak.
const (
	historyPage  = 2 * pageSize
	historyAhead = 4
	historyLog   = 5 * time.Second
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
	max, err := w.b.db.Load().MaxRowID(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	w.b.log.Info("importing the Messages history", "last_rowid", max)
	// One goroutine reads and maps chat.db while the sink stores what it
	// read: they overlap but for the sink's commits. (Read, then stored a
	// transaction's worth at a time, each waited for the other: on 2 cores
	// the import took the sum of the two, not the longer.)
	readCtx, stop := context.WithCancel(ctx)
	pages := make(chan historyBatch, historyAhead)
	go w.readHistory(readCtx, max, pages)
	defer func() {
		stop()
		for range pages { // until the reader has stopped
		}
	}()
	n, logged := 0, time.Now()
	read := func(yield func([]bridge.Inbound, error) bool) {
		for p := range pages {
			if p.err != nil {
				yield(nil, p.err)
				return
			}
			if !yield(p.history, nil) {
				return
			}
			n += len(p.history)
			if time.Since(logged) >= historyLog {
				logged = time.Now()
				w.b.log.Info("importing the Messages history", "rowid", p.last, "of", max,
					"percent", p.last*100/max, "messages", n, "took", time.Since(start).Round(time.Millisecond))
			}
		}
	}
	if err := w.sink.ImportHistory(ctx, w.b.cfg.Line, read); err != nil {
		return fmt.Errorf("import history: %w", err)
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
	var db *chatdb.DB
	var backlog *chatdb.Backlog
	defer func() {
		if backlog != nil {
			backlog.Close()
		}
	}()
	for after < max {
		if d := w.b.db.Load(); d != db { // chat.db was opened again
			if backlog != nil {
				backlog.Close()
			}
			db, backlog = d, d.Backlog()
		}
		rows, err := backlog.Rows(ctx, after, historyPage)
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
			if r.Kind() == chatdb.KindMessage && (!r.IsFromMe || r.IsSent) && r.Chat.GUID != "" {
				if _, unsent := r.Unsent(); !unsent {
					in, _ := w.inbound(r, false, time.Time{})
					in.Screened = w.screened(r)
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
	defer w.logFlood()
	for {
		rows, err := w.b.db.Load().Rows(ctx, w.cursor, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rows {
			w.handle(ctx, r)
			w.cursor = r.RowID
		}
		w.storeHeld(ctx)
		if err := w.recheck(ctx); err != nil {
			return err
		}
		if err := w.changes(ctx); err != nil {
			return err
		}
		w.storeHeld(ctx)
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
	rows, err := w.b.db.Load().RowsByGUID(ctx, guids)
	if err != nil {
		return err
	}
	found := map[string]bool{}
	for _, r := range rows {
		found[r.GUID] = true
		if since, ok := w.transcribing[r.GUID]; ok {
			if r.Transcription != nil {
				// Reported again: the receiver fills in the transcription.
				if err := w.report(ctx, r, time.Now()); err != nil {
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

// firstSeen is when the row with guid was first read: now, unless it
// was read before and is still to be reported.
func (w *watcher) firstSeen(guid string) time.Time {
	if t, ok := w.seen[guid]; ok {
		return t
	}
	t := time.Now()
	w.seen[guid] = t
	return t
}

// handle reports one row, or leaves it waiting for what it lacks.
func (w *watcher) handle(ctx context.Context, r chatdb.Row) {
	seen := w.firstSeen(r.GUID)
	if r.IsFromMe && r.IsSent && w.b.health.sentFrom(r.CallerID, w.b.cfg.Line) {
		w.b.log.Warn("Messages sends from another address than the line's handle (Settings > iMessage > Start New Conversations From); "+
			"contacts see that address", "sent_from", r.CallerID)
	}
	if w.keepWaiting(r) {
		return
	}
	delete(w.deferred, r.GUID)
	var err error
	switch kind := r.Kind(); {
	case kind == chatdb.KindMessage:
		err = w.message(ctx, r, seen)
	case kind != chatdb.KindReaction && kind != chatdb.KindGroupChange:
		// System rows, stickers, polls…: not messages. A row without its
		// body or files yet may become one: the change scanner sees it then.
	case w.screened(r):
		w.count(r.Date, true)
	case !isNews(r, seen):
		// Written again, like the messages of a flood: their
		// history was imported without tapbacks or group changes.
		w.count(r.Date, false)
	case kind == chatdb.KindReaction:
		err = w.reaction(ctx, r)
	default:
		err = w.groupChange(ctx, r)
	}
	switch {
	case err != nil:
		w.storeFailed(r.RowID, r.GUID, r.Kind(), err)
	case r.Kind() == chatdb.KindMessage && notSentYet(r):
		// Still owed: remember when it was first read.
		delete(w.failed, r.GUID)
	default:
		w.settled(r.GUID)
	}
}

// settled forgets a row that needs nothing more.
func (w *watcher) settled(guid string) {
	delete(w.failed, guid)
	if _, waiting := w.deferred[guid]; !waiting {
		delete(w.seen, guid)
	}
}

// storeFailed keeps a row whose storing failed, to try again after a
// pause that grows.
func (w *watcher) storeFailed(rowID int64, guid string, kind chatdb.Kind, err error) {
	f := w.failed[guid]
	f.rowID, f.failures = rowID, f.failures+1
	pause := min(retryMax, retryMin<<min(f.failures-1, 10))
	f.retryAt = time.Now().Add(pause)
	w.failed[guid] = f
	w.b.log.Error("record a row of chat.db; trying again", "guid", guid, "kind", kind, "failures", f.failures, "in", pause, "err", err)
}

// count adds a row taken for other than news, dated date, to the
// flood's figures.
func (w *watcher) count(date time.Time, screened bool) {
	if screened {
		w.flood.screened++
		return
	}
	w.flood.rows++
	if w.flood.rows == 1 || date.Before(w.flood.oldest) {
		w.flood.oldest = date
	}
	if w.flood.rows == 1 || date.After(w.flood.youngest) {
		w.flood.youngest = date
	}
}

// logFlood says, once per scan and never per row, how many rows were
// taken as history or screened, and counts them in the bridge's health.
func (w *watcher) logFlood() {
	f := w.flood
	if f.rows == 0 && f.screened == 0 {
		return
	}
	w.flood = floodStats{}
	// Logged before counted: whoever sees the count can read the line.
	defer w.b.health.counted(f.rows, 0, f.screened)
	if f.rows > 0 {
		w.b.log.Warn("old messages written again to chat.db (Messages in iCloud replaying history?): stored as history, without events",
			"rows", f.rows, "oldest", f.oldest.UTC().Format(time.RFC3339), "newest", f.youngest.UTC().Format(time.RFC3339),
			"oldest_age", time.Since(f.oldest).Round(time.Minute).String(), "newest_age", time.Since(f.youngest).Round(time.Minute).String())
	}
	if f.screened > 0 {
		w.b.log.Info("messages Messages filed away (junk, filters, unknown senders held): stored without events", "rows", f.screened)
	}
}

// message reports a message row as news, or holds it to be stored as
// history (storeHeld).
func (w *watcher) message(ctx context.Context, r chatdb.Row, seen time.Time) error {
	if !w.reportable(r) {
		return nil
	}
	if screened := w.screened(r); screened || !isNews(r, seen) {
		in, _ := w.inbound(r, false, seen)
		in.Screened, in.MayBeTwin = screened, true
		w.held = append(w.held, heldRow{rowID: r.RowID, guid: r.GUID, kind: r.Kind(), in: in})
		return nil
	}
	err := w.report(ctx, r, seen)
	if errors.Is(err, bridge.ErrNotRecorded) && w.copyOfOwnSend(r) {
		return w.awaitOwnSend(r, seen)
	}
	if err != nil {
		return err
	}
	if r.IsAudioMessage && r.Transcription == nil {
		w.transcribing[r.GUID] = time.Now()
	}
	return nil
}

// copyOfOwnSend reports whether r is the received copy Messages wrote of
// one of the line's own sends into the owner's chat with themselves: it
// names that send's row (reply_to_guid), which the sender claimed.
func (w *watcher) copyOfOwnSend(r chatdb.Row) bool {
	return !r.IsFromMe && r.ReplyToGUID != "" && w.b.selfChat(r.Chat) && w.b.leaveToSender(chatdb.Row{GUID: r.ReplyToGUID})
}

// awaitOwnSend keeps the copy of one of the line's own sends until the
// outbox has recorded that send, and the copy can be stored as another
// name of it. A send never recorded (it failed after its row appeared)
// leaves the copy to be stored with no event, once the send's own time
// is over.
func (w *watcher) awaitOwnSend(r chatdb.Row, seen time.Time) error {
	if until := seen.Add(w.b.cfg.FileTimeout); time.Now().Before(until) {
		w.deferred[r.GUID] = deferredRow{rowID: r.RowID, since: seen, until: until}
		return nil
	}
	w.b.log.Warn("the copy of a send into the owner's chat with themselves outlived its send: stored without an event", "guid", r.GUID, "copy_of", r.ReplyToGUID)
	in, _ := w.inbound(r, false, seen)
	in.Screened, in.EchoOfOwnSend = true, false
	w.held = append(w.held, heldRow{rowID: r.RowID, guid: r.GUID, kind: r.Kind(), in: in})
	return nil
}

// reportable reports whether a message row is one to record now.
func (w *watcher) reportable(r chatdb.Row) bool {
	if r.IsFromMe && (w.b.leaveToSender(r) || r.Error != 0 || !r.IsSent) {
		// Our own send (the outbox records it), a send that failed where
		// it was made, or one not sent yet: the change scanner records it
		// once Messages sends it.
		return false
	}
	if _, unsent := r.Unsent(); unsent {
		return false // taken back before we saw it
	}
	if r.Chat.GUID == "" {
		// Filed under no chat: there is no conversation to put it in.
		w.b.log.Debug("message under no chat skipped", "guid", r.GUID)
		return false
	}
	return true
}

// notSentYet is a row of the owner's that Messages has still to send
// (Send Later, an iPhone offline): it becomes a message when it is sent.
func notSentYet(r chatdb.Row) bool {
	return r.IsFromMe && !r.IsSent && r.Error == 0
}

// storeHeld stores the rows held as history (or screened), together, with
// no events. When that fails, each is tried again as a row that failed.
func (w *watcher) storeHeld(ctx context.Context) {
	if len(w.held) == 0 {
		return
	}
	held := w.held
	w.held = nil
	msgs := make([]bridge.Inbound, len(held))
	for i, h := range held {
		msgs[i] = h.in
	}
	twins, err := w.sink.ReceiveHistory(ctx, w.b.cfg.Line, msgs)
	if err != nil {
		for _, h := range held {
			w.storeFailed(h.rowID, h.guid, h.kind, err)
		}
		return
	}
	twin := make(map[string]bool, len(twins))
	for _, g := range twins {
		twin[g] = true
	}
	for _, h := range held {
		w.settled(h.guid)
		if !twin[h.guid] {
			w.count(h.in.SentAt, h.in.Screened)
		}
	}
	w.b.health.counted(0, len(twins), 0)
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
	case r.IsFromMe && r.Error == 0 && w.b.beingMatched(r):
		limit = unsentWait
	case !r.IsFromMe && w.b.selfChat(r.Chat) && w.b.sendingToSelf(r):
		// Perhaps the copy of the send in progress, whose row the sender
		// has not claimed yet.
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

// transferring reports whether an attachment of r has not arrived yet,
// or not even its row: Messages flags the message as carrying files
// before it writes them.
func (w *watcher) transferring(r chatdb.Row) bool {
	if r.HasAttachments && len(r.Attachments) == 0 {
		return true
	}
	for _, a := range r.Attachments {
		if a.Path == "" {
			return true
		}
	}
	return false
}

// report records a message as news, with its event; a twin of a stored
// message is counted and left out.
func (w *watcher) report(ctx context.Context, r chatdb.Row, seen time.Time) error {
	in, missing := w.inbound(r, true, seen)
	in.MayBeTwin = true
	in.CatchUp = !r.Date.IsZero() && seen.Sub(r.Date) > liveAge
	twin, err := w.sink.Receive(ctx, in)
	if err != nil {
		return err
	}
	if twin {
		w.b.health.counted(0, 1, 0)
		w.b.log.Info("a message written again under a new GUID was taken as the one stored", "guid", r.GUID)
		return nil
	}
	if len(missing) > 0 {
		w.b.log.Warn("attachment file missing; recorded without it until it appears", "guid", r.GUID, "paths", missing)
		w.missingFiles[r.GUID] = missingFiles{paths: missing, since: time.Now()}
	}
	return nil
}

// inbound maps a row, seen at the time given (zero: when it was written).
// withFiles reports attachment files that exist, to be copied into the file
// store, and returns the paths of those that do not (yet); history keeps
// their metadata only.
func (w *watcher) inbound(r chatdb.Row, withFiles bool, seen time.Time) (_ bridge.Inbound, missing []string) {
	in := bridge.Inbound{
		Line: w.b.cfg.Line, Service: r.Service, Chat: bridgeChat(r.Chat), GUID: r.GUID, Sender: r.Sender,
		IsFromMe: r.IsFromMe, Text: r.Text, SentAt: r.Date, ReplyToGUID: r.ThreadOriginatorGUID,
		IsAudioMessage: r.IsAudioMessage, EditedAt: r.DateEdited,
	}
	if len(r.UnsentParts()) > 0 {
		// Taken back in part before it was seen: date_edited is that, not
		// an edit; the row holds what is left.
		in.EditedAt = time.Time{}
	}
	if r.IsFromMe {
		in.Sender = w.b.cfg.Line
		in.DeliveredAt, in.ReadAt = deliveredAt(r, seen), readAt(r)
	} else {
		in.ReadByLineAt = readByLineAt(r)
	}
	if !r.IsFromMe && w.b.selfChat(r.Chat) {
		in.EchoOf, in.EchoOfOwnSend = r.ReplyToGUID, w.copyOfOwnSend(r)
	}
	in.Attachments, missing = w.files(r, withFiles)
	return in, missing
}

// files maps a row's attachments. withFiles gives the path of each file
// that exists, and returns the paths of those that do not (yet).
func (w *watcher) files(r chatdb.Row, withFiles bool) (out []bridge.File, missing []string) {
	for _, a := range r.Attachments {
		f := bridge.File{Filename: a.TransferName, MimeType: a.MimeType, Size: a.TotalBytes, Inline: a.EmojiDescription != ""}
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

// deliveredAt is when a row of ours reached the contact. An SMS is marked
// delivered with no date: then it is when the row was seen so.
func deliveredAt(r chatdb.Row, seen time.Time) time.Time {
	if r.DateDelivered.IsZero() && r.IsDelivered && r.IsSent {
		if seen.IsZero() {
			return r.Date
		}
		return seen
	}
	return r.DateDelivered
}

// readAt is the contact's read receipt of a row of ours. A group has no
// read state per member in chat.db: a read date there names no reader.
func readAt(r chatdb.Row) time.Time {
	if r.Chat.IsGroup {
		return time.Time{}
	}
	return r.DateRead
}

// readByLineAt is when the owner read a contact's row (here or on another
// device), zero while unread.
func readByLineAt(r chatdb.Row) time.Time {
	switch {
	case !r.IsRead:
		return time.Time{}
	case !r.DateRead.IsZero():
		return r.DateRead
	}
	return r.Date
}

func bridgeChat(c chatdb.Chat) bridge.Chat {
	participants := slices.Clone(c.Participants)
	if !c.IsGroup && len(participants) == 0 {
		participants = []string{c.Identifier}
	}
	return bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup, Name: c.DisplayName, Participants: participants,
		Filter: c.Filter}
}

// reaction reports a tapback added or removed. One on a message we have
// no record of (from before the line was connected) is dropped.
func (w *watcher) reaction(ctx context.Context, r chatdb.Row) error {
	typ, added, ok := r.Reaction()
	if !ok || r.IsFromMe && w.b.leaveToSender(r) {
		// Our own tapback is recorded by the outbox, never as the owner's
		// (which may answer an approval prompt).
		return nil
	}
	if d, waiting := w.deferred[r.AssociatedGUID]; waiting {
		// On a row still held back (the copy of one of our sends): it
		// waits for that row.
		w.deferred[r.GUID] = deferredRow{rowID: r.RowID, since: d.since, until: d.until}
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
			// Group typing names no member: only one-to-one chats. The
			// helper names the chat as Messages keeps it ("any;-;…" on
			// macOS 26): the chat is found under Blueline's name for it.
			chat := w.b.canonicalChat(ctx, ev.ChatGUID)
			if chat.IsGroup || chat.Identifier == "" || !strings.Contains(ev.ChatGUID, ";-;") {
				continue
			}
			err := w.sink.ReceiveTyping(ctx, bridge.InboundTyping{Line: w.b.cfg.Line, Chat: chat,
				Sender: chat.Identifier, On: on, At: time.Now()})
			if err != nil && !errors.Is(err, context.Canceled) {
				w.b.log.Debug("typing not recorded", "chat", ev.ChatGUID, "err", err)
			}
		}
	}
}

// reopenIfReplaced notices another file at chat.db's path (a Time Machine
// or iCloud restore, a database copied from another Mac, Messages
// rebuilding it) or one whose ROWIDs end below the cursor, and then reads
// the new file from its start: rows stored already (by GUID, or as twins)
// are skipped, old ones are history, and only what is new raises events.
// Without this the cursor would hide every message until the new file's
// ROWIDs passed it.
func (w *watcher) reopenIfReplaced(ctx context.Context) error {
	fi, err := os.Stat(w.b.cfg.ChatDB)
	if err != nil {
		return fmt.Errorf("chat.db: %w", err) // moved away for a moment, or access withdrawn
	}
	why := ""
	if !os.SameFile(fi, w.file) {
		why = "another file is at its path"
	} else if last, err := w.b.db.Load().LastRowID(ctx); err != nil {
		return err
	} else if last < w.cursor {
		why = fmt.Sprintf("its rows end at ROWID %d, below the %d read", last, w.cursor)
	}
	if why == "" {
		return nil
	}
	db, err := chatdb.Open(ctx, w.b.cfg.ChatDB)
	if err != nil {
		return err
	}
	w.b.db.Swap(db).Close()
	w.file = fi
	// What was waiting is read again with the rest of the new file.
	clear(w.deferred)
	clear(w.failed)
	clear(w.states)
	clear(w.unrecorded)
	clear(w.seen)
	w.cursor = 0
	if err := w.b.cfg.Cursor.Save(ctx, 0); err != nil {
		return err
	}
	w.saved = 0
	w.b.health.replaced(time.Now())
	w.b.log.Warn("chat.db was replaced: reading the new file from its start; what is stored already raises no event", "why", why)
	return nil
}
