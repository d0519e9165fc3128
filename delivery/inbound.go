package delivery

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/keyword"
	"github.com/blueline-app/blueline/storage"
)

// Receiver records what the network delivers to the lines.
type Receiver struct {
	db    *storage.DB
	files FileImporter
	// Latency times the line's messages from sent to delivered; nil times
	// nothing. Set it before the bridges run.
	Latency LatencyRecorder
}

// FileImporter copies a file on the daemon's disk into the file store.
type FileImporter interface {
	Import(ctx context.Context, path, name, mimeType string, scope storage.FileScope) (storage.File, error)
}

// NewReceiver returns a Receiver storing into db and files.
func NewReceiver(db *storage.DB, files FileImporter) *Receiver {
	return &Receiver{db: db, files: files}
}

// Receive implements bridge.Sink.
func (r *Receiver) Receive(ctx context.Context, in bridge.Inbound) (twin bool, err error) {
	res, err := r.Record(ctx, in)
	return res.Twin, err
}

// Record stores an inbound message and returns what was stored. A message
// whose GUID was stored before is returned as it was, not stored again,
// except that a transcription it lacked is filled in.
func (r *Receiver) Record(ctx context.Context, in bridge.Inbound) (storage.InboundResult, error) {
	line, ok := r.db.LineByHandle(in.Line)
	if !ok {
		return storage.InboundResult{}, fmt.Errorf("inbound message for unknown line %s", in.Line)
	}
	if in.EchoOfOwnSend {
		if _, err := r.db.MessageByGUID(ctx, in.EchoOf); errors.Is(err, storage.ErrNotFound) {
			return storage.InboundResult{}, fmt.Errorf("the copy of message %s, a send not recorded yet: %w", in.EchoOf, bridge.ErrNotRecorded)
		} else if err != nil {
			return storage.InboundResult{}, err
		}
	}
	stored, err := r.db.MessageByGUID(ctx, in.GUID)
	seen := err == nil
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return storage.InboundResult{}, err
	}
	contact := in.Chat.Identifier
	if in.Chat.IsGroup {
		contact = ""
	}
	scope, err := r.fileScope(ctx, line, contact)
	if err != nil {
		return storage.InboundResult{}, err
	}
	attachments, err := r.attachments(ctx, in.GUID, in.Attachments, stored, seen, scope)
	if err != nil {
		return storage.InboundResult{}, err
	}
	if seen {
		// Known by its GUID: nothing to match twins against.
		in.MayBeTwin = false
	}
	record := r.inbound(line, in, attachments, time.Now())
	record.Chat.ID, record.Message.ID = storage.NewID("cht_"), storage.NewID("msg_")
	return r.db.RecordInbound(ctx, record)
}

// inbound maps what the network reports to what storage records, without
// the message's and its chat's IDs: a live message's are made by the
// caller, history's by storage (a chat's only when it is new).
func (r *Receiver) inbound(line storage.Line, in bridge.Inbound, attachments []storage.Attachment, now time.Time) storage.Inbound {
	if in.SentAt.IsZero() {
		in.SentAt = now
	}
	service := in.Service
	if service == "" {
		service = line.Service
	}
	return storage.Inbound{
		Chat: storage.Chat{
			LineID:       line.ID,
			GUID:         in.Chat.GUID,
			Identifier:   in.Chat.Identifier,
			Service:      service,
			Name:         in.Chat.Name,
			IsGroup:      in.Chat.IsGroup,
			Participants: in.Chat.Participants,
			Filter:       in.Chat.Filter,
		},
		Screened:     in.Screened,
		Keyword:      lineKeyword(line, in.Text),
		MatchTwins:   in.MayBeTwin,
		CatchUp:      in.CatchUp,
		ReadByLineAt: unixMilli(in.ReadByLineAt),
		EchoOf:       in.EchoOf,
		Message: storage.Message{
			GUID:           in.GUID,
			Sender:         in.Sender,
			Text:           in.Text,
			Attachments:    attachments,
			Service:        service,
			IsFromMe:       in.IsFromMe,
			IsAudioMessage: in.IsAudioMessage,
			SentAt:         in.SentAt.UnixMilli(),
			SyncedAt:       now.UnixMilli(),
			ReplyToGUID:    in.ReplyToGUID,
			EditedAt:       unixMilli(in.EditedAt),
			DeliveredAt:    unixMilli(in.DeliveredAt),
			ReadAt:         unixMilli(in.ReadAt),
		},
	}
}

// lineKeyword is which of line's keywords text is, if any: storage
// decides what it does.
func lineKeyword(line storage.Line, text *string) string {
	if text == nil {
		return ""
	}
	folded := keyword.Fold(*text)
	switch {
	case slices.Contains(line.OptOutWords, folded):
		return storage.KeywordOptOut
	case slices.Contains(line.OptInWords, folded):
		return storage.KeywordOptIn
	}
	return ""
}

// ReceiveHistory implements bridge.Sink.
func (r *Receiver) ReceiveHistory(ctx context.Context, lineHandle string, msgs []bridge.Inbound) (twins []string, err error) {
	line, ok := r.db.LineByHandle(lineHandle)
	if !ok {
		return nil, fmt.Errorf("history for unknown line %s", lineHandle)
	}
	return r.db.ImportHistory(ctx, line.ID, r.history(line, msgs))
}

// ImportHistory implements bridge.Sink.
func (r *Receiver) ImportHistory(ctx context.Context, lineHandle string, pages iter.Seq2[[]bridge.Inbound, error]) error {
	line, ok := r.db.LineByHandle(lineHandle)
	if !ok {
		return fmt.Errorf("history for unknown line %s", lineHandle)
	}
	// The pages are mapped on a goroutine of their own, a page ahead of the
	// transaction that stores them: storing is a first start's longest
	// stage, and mapping (two new IDs a message, the keywords) took a
	// seventh of its CPU when the pages were mapped as it asked for them.
	type mapped struct {
		page []storage.Inbound
		err  error
	}
	ahead := make(chan mapped, 1)
	mapCtx, stop := context.WithCancel(ctx)
	go func() {
		defer close(ahead)
		for page, err := range pages {
			m := mapped{err: err}
			if err == nil {
				m.page = r.history(line, page)
			}
			select {
			case ahead <- m:
			case <-mapCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		stop()
		for range ahead { // until the mapping has stopped reading pages
		}
	}()
	_, err := r.db.ImportHistoryPages(ctx, line.ID, func(yield func([]storage.Inbound, error) bool) {
		for m := range ahead {
			if !yield(m.page, m.err) || m.err != nil {
				return
			}
		}
	})
	return err
}

// history is what storage keeps of messages that are not news.
func (r *Receiver) history(line storage.Line, msgs []bridge.Inbound) []storage.Inbound {
	now := time.Now()
	out := make([]storage.Inbound, len(msgs))
	for i, in := range msgs {
		atts := make([]storage.Attachment, len(in.Attachments))
		for j, a := range in.Attachments {
			atts[j] = metadataOnly(a)
		}
		out[i] = r.inbound(line, in, atts, now) // storage gives history its IDs
	}
	return out
}

// HistoryImported implements bridge.Sink.
func (r *Receiver) HistoryImported(ctx context.Context, lineHandle string) error {
	return r.db.SettleHistory(ctx)
}

func metadataOnly(a bridge.File) storage.Attachment {
	return storage.Attachment{Filename: a.Filename, MimeType: a.MimeType, Size: a.Size, Transcription: a.Transcription, Inline: a.Inline}
}

// fileScope is whom the files arriving in a chat with contact ("" for a
// group) belong to: the line and, on the sandbox line, the owner paired
// with the contact.
func (r *Receiver) fileScope(ctx context.Context, line storage.Line, contact string) (storage.FileScope, error) {
	scope := storage.FileScope{LineID: line.ID}
	if !line.IsSandbox || contact == "" {
		return scope, nil
	}
	var err error
	scope.Owner, err = r.db.SandboxOwner(ctx, contact)
	return scope, err
}

// attachments copies the files of message guid into the file store: all
// of them for a new message; for one seen before (stored), only the files
// it still lacks (they arrived late), the others passed on as they were.
func (r *Receiver) attachments(ctx context.Context, guid string, files []bridge.File, stored storage.Message, seen bool, scope storage.FileScope) ([]storage.Attachment, error) {
	out := make([]storage.Attachment, 0, len(files))
	for i, a := range files {
		lacking := !seen || i < len(stored.Attachments) && stored.Attachments[i].FileID == "" && stored.UnsentAt == 0
		if !lacking || a.Path == "" {
			out = append(out, metadataOnly(a))
			continue
		}
		f, err := r.files.Import(ctx, a.Path, a.Filename, a.MimeType, scope)
		if err != nil {
			return nil, fmt.Errorf("attachment of message %s: %w", guid, err)
		}
		out = append(out, storage.Attachment{FileID: f.ID, Filename: f.Filename, MimeType: f.MimeType, Size: f.Size,
			Transcription: a.Transcription, Inline: a.Inline})
	}
	return out, nil
}

// ReceiveReaction implements bridge.Sink.
func (r *Receiver) ReceiveReaction(ctx context.Context, in bridge.InboundReaction) error {
	_, _, err := r.RecordReaction(ctx, in)
	return err
}

// RecordReaction stores a tapback added or removed on a message of a line.
// changed is false when it repeats the state already stored.
func (r *Receiver) RecordReaction(ctx context.Context, in bridge.InboundReaction) (rec storage.Reaction, changed bool, err error) {
	line, ok := r.db.LineByHandle(in.Line)
	if !ok {
		return rec, false, fmt.Errorf("inbound reaction for unknown line %s", in.Line)
	}
	switch {
	case in.Type == bridge.ReactionEmoji && in.Emoji == "":
		return rec, false, errors.New("inbound emoji reaction without its emoji")
	case in.Type != bridge.ReactionEmoji && in.Type != bridge.ReactionSticker && !slices.Contains(bridge.ReactionTypes, in.Type):
		return rec, false, fmt.Errorf("inbound reaction of unknown type %q", in.Type)
	}
	if in.Type != bridge.ReactionEmoji {
		in.Emoji = ""
	}
	target, err := r.db.MessageByGUID(ctx, in.TargetGUID)
	if err == nil && target.LineID != line.ID || errors.Is(err, storage.ErrNotFound) {
		// Most often a tapback on a message from before the line was
		// connected: nothing to attach it to.
		return rec, false, fmt.Errorf("reaction to message %s: %w", in.TargetGUID, bridge.ErrNotRecorded)
	}
	if err != nil {
		return rec, false, fmt.Errorf("reaction to message %s: %w", in.TargetGUID, err)
	}
	now := time.Now()
	if in.SentAt.IsZero() {
		in.SentAt = now
	}
	return r.db.ApplyReaction(ctx, storage.Reaction{MessageID: target.ID, ChatID: target.ChatID, LineID: line.ID, Type: in.Type,
		Emoji: in.Emoji, Sender: in.Sender, IsFromMe: in.IsFromMe, Added: in.Added, SentAt: in.SentAt.UnixMilli(), SyncedAt: now.UnixMilli()})
}

// ReceiveUpdate implements bridge.Sink.
func (r *Receiver) ReceiveUpdate(ctx context.Context, u bridge.MessageUpdate) error {
	_, _, err := r.RecordUpdate(ctx, u)
	return err
}

// RecordUpdate stores what the network recorded about a message after it
// arrived (an edit, an unsend, delivered, read) and returns the message as
// stored with the events it caused. A message not recorded (yet) is
// bridge.ErrNotRecorded.
func (r *Receiver) RecordUpdate(ctx context.Context, u bridge.MessageUpdate) (storage.Message, []string, error) {
	line, ok := r.db.LineByHandle(u.Line)
	if !ok {
		return storage.Message{}, nil, fmt.Errorf("update for unknown line %s", u.Line)
	}
	var atts []storage.Attachment
	if len(u.Attachments) > 0 {
		// Files are copied only for a message stored already.
		stored, err := r.db.MessageByGUID(ctx, u.GUID)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return storage.Message{}, nil, fmt.Errorf("message %s: %w", u.GUID, bridge.ErrNotRecorded)
		case err != nil:
			return storage.Message{}, nil, err
		}
		c, err := r.db.ChatByID(ctx, stored.ChatID)
		if err != nil {
			return storage.Message{}, nil, err
		}
		contact := c.Identifier
		if c.IsGroup {
			contact = ""
		}
		scope, err := r.fileScope(ctx, line, contact)
		if err != nil {
			return storage.Message{}, nil, err
		}
		// The files reported are those left: compare them with the
		// stored ones left.
		stored.UnsendParts(u.UnsentParts)
		if atts, err = r.attachments(ctx, u.GUID, u.Attachments, stored, true, scope); err != nil {
			return storage.Message{}, nil, err
		}
	}
	m, events, err := r.db.UpdateMessage(ctx, line.ID, storage.MessageUpdate{GUID: u.GUID, Text: u.Text, Attachments: atts,
		EditedAt: unixMilli(u.EditedAt), UnsentAt: unixMilli(u.UnsentAt), UnsentParts: u.UnsentParts, DeliveredAt: unixMilli(u.DeliveredAt),
		ReadAt: unixMilli(u.ReadAt), ReadByLineAt: unixMilli(u.ReadByLineAt)})
	if errors.Is(err, storage.ErrNotFound) {
		return m, nil, fmt.Errorf("message %s: %w", u.GUID, bridge.ErrNotRecorded)
	}
	// Timed once, when the receipt is new: both dates are the network's.
	if r.Latency != nil && slices.Contains(events, api.EventMessageDelivered) {
		r.Latency.Latency(line.ID, "sent_to_delivered", time.Duration(m.DeliveredAt-m.SentAt)*time.Millisecond)
	}
	return m, events, err
}

// unixMilli is t in Unix ms, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ReceiveChatUpdate implements bridge.Sink.
func (r *Receiver) ReceiveChatUpdate(ctx context.Context, u bridge.ChatUpdate) error {
	_, _, err := r.RecordChatUpdate(ctx, u)
	return err
}

// RecordChatUpdate applies a change to a group chat, once per change GUID,
// and returns the change with the chat as it left it.
func (r *Receiver) RecordChatUpdate(ctx context.Context, u bridge.ChatUpdate) (storage.ChatUpdate, bool, error) {
	line, ok := r.db.LineByHandle(u.Line)
	if !ok {
		return storage.ChatUpdate{}, false, fmt.Errorf("chat update for unknown line %s", u.Line)
	}
	if u.At.IsZero() {
		u.At = time.Now()
	}
	want := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: u.Chat.GUID, Identifier: u.Chat.Identifier,
		Service: line.Service, Name: u.Chat.Name, IsGroup: u.Chat.IsGroup, Participants: u.Chat.Participants}
	return r.db.ApplyChatUpdate(ctx, u.GUID, want, storage.ChatUpdate{Action: u.Action, Participant: u.Participant,
		Name: u.Name, By: u.By, IsFromMe: u.IsFromMe, At: u.At.UnixMilli()})
}

// ReceiveTyping implements bridge.Sink.
func (r *Receiver) ReceiveTyping(ctx context.Context, in bridge.InboundTyping) error {
	_, err := r.RecordTyping(ctx, in)
	return err
}

// RecordTyping updates a contact's typing indicator in a chat. A chat we
// have no record of is an error wrapping storage.ErrNotFound.
func (r *Receiver) RecordTyping(ctx context.Context, in bridge.InboundTyping) (storage.Indicator, error) {
	chat, err := r.chat(ctx, in.Line, in.Chat)
	if err != nil {
		return storage.Indicator{}, err
	}
	if in.At.IsZero() {
		in.At = time.Now()
	}
	return r.db.SetTyping(chat.ID, in.Sender, in.On, in.At), nil
}

// ReceiveRead implements bridge.Sink.
func (r *Receiver) ReceiveRead(ctx context.Context, in bridge.InboundRead) error {
	chat, err := r.chat(ctx, in.Line, in.Chat)
	if err != nil {
		return err
	}
	if in.ReadAt.IsZero() {
		in.ReadAt = time.Now()
	}
	_, err = r.db.RecordRead(ctx, chat.ID, in.Reader, in.ReadAt.UnixMilli())
	return err
}

func (r *Receiver) chat(ctx context.Context, lineHandle string, c bridge.Chat) (storage.Chat, error) {
	line, ok := r.db.LineByHandle(lineHandle)
	if !ok {
		return storage.Chat{}, fmt.Errorf("event for unknown line %s", lineHandle)
	}
	chat, err := r.db.ChatByGUID(ctx, line.ID, c.GUID)
	if err != nil {
		return storage.Chat{}, fmt.Errorf("chat %s on line %s: %w", c.GUID, lineHandle, err)
	}
	return chat, nil
}

// ReceiveSendFailure implements bridge.Sink: a message of ours that the
// network failed after it was sent. One that is not the message of a sent
// outbox item (sent from another device, or failed already) is ignored.
func (r *Receiver) ReceiveSendFailure(ctx context.Context, f bridge.SendFailure) error {
	line, ok := r.db.LineByHandle(f.Line)
	if !ok {
		return fmt.Errorf("send failure for unknown line %s", f.Line)
	}
	_, _, err := r.db.MarkLateFailure(ctx, line.ID, f.GUID, f.Reason)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		// Maybe sent moments ago and not recorded yet.
		return fmt.Errorf("message %s: %w", f.GUID, bridge.ErrNotRecorded)
	case errors.Is(err, storage.ErrNotSentItem):
		return nil
	}
	return err
}
