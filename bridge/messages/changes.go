package messages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
)

// changesPage is how many changed rows are read in one transaction.
const changesPage = 500

// changes reports what Messages changed on rows it wrote before: edits,
// unsends, delivery, reading, a late failure, a file that arrived. It reads
// the states of the rows in the change window (by the date index), only
// when Messages committed something since the last look or a row is still
// owed, and reads in full only the rows whose state is new. The sink keeps
// what it has, so a row offered again after a restart reports nothing
// twice.
func (w *watcher) changes(ctx context.Context) error {
	changed, err := w.b.db.Load().Changed(ctx)
	if err != nil {
		w.b.log.Warn("cannot tell whether chat.db changed; reading it", "err", err)
	}
	arrived := w.arrivedFiles()
	if !changed && len(w.unrecorded) == 0 && len(arrived) == 0 {
		return nil
	}
	states, err := w.b.db.Load().RowStates(ctx, time.Now().Add(-changeWindow))
	if err != nil {
		return err
	}
	next := make(map[string]chatdb.RowState, len(states))
	byGUID := make(map[string]chatdb.RowState, len(states))
	var due []string
	for _, st := range states {
		if st.RowID > w.cursor {
			continue // new: the scan reads it first
		}
		_, waiting := w.deferred[st.GUID]
		_, failed := w.failed[st.GUID]
		if waiting || failed {
			continue // reported with its state once it is reported
		}
		if old, ok := w.states[st.GUID]; ok && old == st && !arrived[st.GUID] {
			next[st.GUID] = st
			continue
		}
		byGUID[st.GUID] = st
		due = append(due, st.GUID)
	}
	for chunk := range slices.Chunk(due, changesPage) {
		rows, err := w.b.db.Load().RowsByGUID(ctx, chunk)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if w.applyChanges(ctx, r) {
				next[r.GUID] = byGUID[r.GUID]
			}
		}
	}
	w.states = next
	for g := range w.seen {
		_, inWindow := next[g]
		_, waiting := w.deferred[g]
		_, failed := w.failed[g]
		if _, due := byGUID[g]; !inWindow && !due && !waiting && !failed {
			delete(w.seen, g) // gone, or out of the window
		}
	}
	for g, since := range w.unrecorded {
		if _, inWindow := byGUID[g]; !inWindow || time.Since(since) > unrecordedWait {
			delete(w.unrecorded, g)
		}
	}
	return nil
}

// applyChanges gives the sink what a row now records and reports whether
// its state may be taken as applied.
func (w *watcher) applyChanges(ctx context.Context, r chatdb.Row) bool {
	if w.screened(r) {
		return true // filed away: stored as it came, with no events after
	}
	var err error
	if r.IsFromMe && r.Error != 0 {
		// Failed where it was sent, or "Not Delivered" later: the sink
		// keeps only the late failure of a sent outbox message.
		err = w.sink.ReceiveSendFailure(ctx, bridge.SendFailure{Line: w.b.cfg.Line, GUID: r.GUID,
			Reason: fmt.Sprintf("Messages reported error %d%s after the message was sent", r.Error, errorCodeMeaning(r.Error))})
	} else {
		u := bridge.MessageUpdate{Line: w.b.cfg.Line, GUID: r.GUID}
		if at, unsent := r.Unsent(); unsent {
			u.UnsentAt = at
		} else if !r.DateEdited.IsZero() {
			// Taking back a part sets date_edited as well: the sink
			// takes it for an edit only when the text changed.
			u.EditedAt, u.Text, u.UnsentParts = r.DateEdited, r.Text, r.UnsentParts()
		}
		if r.IsFromMe {
			u.DeliveredAt, u.ReadAt = deliveredAt(r, time.Now()), readAt(r)
		} else {
			u.ReadByLineAt = readByLineAt(r)
		}
		var missing []string
		u.Attachments, missing = w.files(r, true)
		if len(missing) == 0 {
			delete(w.missingFiles, r.GUID)
		}
		err = w.sink.ReceiveUpdate(ctx, u)
	}
	switch {
	case err == nil:
		delete(w.unrecorded, r.GUID)
		return true
	case errors.Is(err, bridge.ErrNotRecorded) && r.Kind() == chatdb.KindMessage && w.reportable(r):
		// A row that became a message after it was read: a Send Later
		// or late send of the owner's now sent, files now written.
		if _, waiting := w.deferred[r.GUID]; waiting || w.b.beingMatched(r) {
			return false
		}
		w.handle(ctx, r)
		_, failed := w.failed[r.GUID]
		return !failed
	case errors.Is(err, bridge.ErrNotRecorded) && (r.Kind() == chatdb.KindMessage && notSentYet(r) || r.HasAttachments):
		// Not a message yet, and waiting for Messages to make it one:
		// looked at again when its state changes, however late.
		w.firstSeen(r.GUID)
		delete(w.unrecorded, r.GUID)
		return true
	case errors.Is(err, bridge.ErrNotRecorded):
		// Not recorded yet (a send the outbox is still matching), or
		// never (a message skipped): offered again for a while.
		since, ok := w.unrecorded[r.GUID]
		if !ok {
			w.unrecorded[r.GUID] = time.Now()
			return false
		}
		return time.Since(since) > unrecordedWait
	default:
		w.b.log.Error("record a change from chat.db", "guid", r.GUID, "err", err)
		if _, ok := w.unrecorded[r.GUID]; !ok {
			w.unrecorded[r.GUID] = time.Now()
		}
		return false
	}
}

// arrivedFiles returns the reported messages one of whose missing files is
// now on the disk, and forgets those that waited too long.
func (w *watcher) arrivedFiles() map[string]bool {
	var out map[string]bool
	for g, m := range w.missingFiles {
		if time.Since(m.since) > lateFileWait {
			delete(w.missingFiles, g)
			continue
		}
		for _, p := range m.paths {
			if _, err := os.Stat(p); err == nil {
				if out == nil {
					out = map[string]bool{}
				}
				out[g] = true
				break
			}
		}
	}
	return out
}
