// Package bridge defines the messaging network as Blueline sees it: a way to
// send on a line, and a stream of what arrives on it. The simulated network
// (bridge/sim) and the macOS Messages app (bridge/messages) implement it.
package bridge

import (
	"context"
	"errors"
	"iter"
	"time"
)

// Chat names a conversation the way the network does.
type Chat struct {
	// GUID is the network's chat GUID: "iMessage;-;+15550102000" for a
	// one-to-one chat, "iMessage;+;chat…" for a group.
	GUID string
	// Identifier is the contact's handle, or the group's "chat…" identifier.
	Identifier string
	IsGroup    bool
	Name       string
	// Participants are the other members' handles.
	Participants []string
	// Filter is where the network files the chat away from the inbox
	// ("unknown_sender", "junk", "promotion", …), "" for none.
	Filter string
}

// Conversation is where an outgoing action goes: a chat of a line.
type Conversation struct {
	// OutboxID identifies the request; a bridge may use it to match its
	// action with what the network later reports.
	OutboxID string
	Line     string // the line's handle
	Service  string // "imessage" or "sms"
	Chat     Chat
}

// File is an attachment as a file on the daemon's disk.
type File struct {
	Path     string
	Filename string
	MimeType string
	Size     int64
	// Transcription is the network's transcription of a voice memo, nil
	// when there is none (yet).
	Transcription *string
	// Inline marks an emoji image that sits in the text, such as a Genmoji
	// or inline sticker, whose stand-in the text carries.
	Inline bool
}

// Outgoing is a message a line asks the network to deliver.
type Outgoing struct {
	Conversation
	Text        string
	Attachment  *File
	ReplyToGUID string
	// IsAudioMessage sends Attachment as a native voice memo balloon.
	IsAudioMessage bool

	// Handoff, when set, is called once, right before the first action that
	// may hand the message to the network. A bridge that can tell whether a
	// message reached the network (the Messages app) calls it; from then on
	// the message must never be sent again for the same request, and every
	// error it returns is final unless marked with NotSent. An error from
	// Handoff aborts the send before anything reached the network.
	Handoff func(ctx context.Context) error
	// HandedAt is when an earlier attempt called Handoff and the daemon
	// stopped before it learned the outcome. A bridge that calls Handoff
	// must then only look for what that attempt did, never send again.
	HandedAt time.Time
}

// Reaction types, in the order of the network's codes (love is 2000 when
// added, 3000 when removed; question is 2005 and 3005).
var ReactionTypes = []string{"love", "like", "dislike", "laugh", "emphasize", "question"}

// Reaction adds (or removes) a tapback on a message.
type Reaction struct {
	Conversation
	TargetGUID string
	Type       string // one of ReactionTypes, or ReactionEmoji
	// Emoji is the tapback's emoji when Type is ReactionEmoji.
	Emoji  string
	Remove bool
}

// Edit replaces the text of a message the line sent. The network records
// the edit; a bridge reports it to its sink as a MessageUpdate, as it does
// a contact's.
type Edit struct {
	Conversation
	TargetGUID string
	Text       string
}

// Unsend takes back a message the line sent; reported as Edit is.
type Unsend struct {
	Conversation
	TargetGUID string
}

// NewGroup creates a group chat of the line with its first message.
type NewGroup struct {
	OutboxID     string
	Line         string // the line's handle
	Service      string // "imessage" or "sms"
	Participants []string
	Name         string // "" for none
	Text         string
	// Handoff and HandedAt are as in Outgoing: creating a group sends its
	// first message.
	Handoff  func(ctx context.Context) error
	HandedAt time.Time
}

// GroupChange changes a group chat of the line: Action is ChatRenamed
// (with Name), ChatParticipantAdded or ChatParticipantRemoved (with
// Participant), or ChatParticipantLeft (the line leaves). The network
// records it; a bridge reports it to its sink as a ChatUpdate.
type GroupChange struct {
	Conversation
	Action      string
	Participant string
	Name        string
}

// Typing shows or stops the line's typing indicator in a chat.
type Typing struct {
	Conversation
	On bool
}

// Read marks a chat read, sending a read receipt where the chat has them.
type Read struct {
	Conversation
}

// Receipt is the network's acknowledgement of a send.
type Receipt struct {
	GUID   string
	SentAt time.Time
	// ChatGUID and Service are the chat and service the message finally
	// went out on, where the bridge knows them ("" otherwise).
	ChatGUID string
	Service  string
	// SMSFallback is set when an iMessage send could not reach the
	// recipient and the message went out once as SMS instead.
	SMSFallback bool
}

// Inbound is a message that arrived on a line, or one the line's owner sent
// from another device (IsFromMe). A message seen again (same GUID) is not
// stored twice, but a transcription that was missing is filled in: this is
// how a voice memo's late transcription arrives.
type Inbound struct {
	Line        string // the receiving line's handle
	Service     string
	Chat        Chat
	GUID        string
	Sender      string
	IsFromMe    bool
	Text        *string
	SentAt      time.Time
	ReplyToGUID string
	// Attachments are files on the daemon's disk; the receiver copies them
	// into the file store. One with no Path (the file is missing) keeps its
	// name, type and size only.
	Attachments    []File
	IsAudioMessage bool
	// What the network recorded before the message was reported (zero
	// when nothing): the last edit (Text is the edited body), and for a
	// message of the line, its delivery and reading. They are stored with
	// the message, without events of their own.
	EditedAt    time.Time
	DeliveredAt time.Time
	ReadAt      time.Time
	// ReadByLineAt is, for a contact's message, when the line's owner read
	// it (on another device), zero for unread.
	ReadByLineAt time.Time
	// Screened is a message the network filed away from the inbox (junk,
	// a filter folder, an unknown sender held): the sink stores it without
	// an event, and its sender does not become a contact the line may
	// write to.
	Screened bool
	// MayBeTwin is a message the network may have written before under
	// another GUID (iCloud replays history that way): the sink stores it
	// only if no stored message of the chat has the same sender,
	// direction and body and a date within a couple of seconds.
	MayBeTwin bool
	// EchoOf is, for a received message, the GUID of the message the
	// network says it follows (chat.db's reply_to_guid). In the owner's
	// chat with themselves, Messages writes a message sent there a second
	// time as received, naming the sent one: that copy is no news.
	EchoOf string
	// EchoOfOwnSend says that EchoOf is a message the line sent through
	// Blueline (an outbox item's): the sink answers ErrNotRecorded until
	// that send is recorded, so that the copy is never taken for news.
	EchoOfOwnSend bool
	// CatchUp is news the bridge read late: dated more than LiveAge
	// before it first read it (the daemon was down, the Mac offline or
	// asleep). Its events say arrival catch_up.
	CatchUp bool
}

// LiveAge is how old news may be when it is first read, or an event when
// it is handed to a receiver, and still be live: older is catch-up.
const LiveAge = 10 * time.Minute

// Inbound tapback types beyond ReactionTypes: a tapback with any emoji
// (iOS 18 and macOS 15 onwards), and one with a sticker. Lines receive
// both; they send emoji tapbacks, not stickers.
const (
	ReactionEmoji   = "emoji"
	ReactionSticker = "sticker"
)

// InboundReaction is a tapback added or removed on a line's chat, by a
// contact or by the line's owner on another device. A sender has one
// current tapback on a message: adding one replaces any other.
type InboundReaction struct {
	Line       string
	Chat       Chat
	TargetGUID string
	// Type is one of ReactionTypes, ReactionEmoji or ReactionSticker.
	Type string
	// Emoji is the tapback's emoji when Type is ReactionEmoji.
	Emoji    string
	Added    bool
	Sender   string
	IsFromMe bool
	SentAt   time.Time
}

// MessageUpdate is what the network recorded about a message after it
// arrived or was sent: an edit, an unsend, its delivery, its reading. Zero
// times are "not (yet)"; the sink keeps what it already knows and reports
// only what is new, so the same update may be given again.
type MessageUpdate struct {
	Line string
	GUID string
	// Text is the body after the last edit (with EditedAt set).
	Text     *string
	EditedAt time.Time
	// UnsentAt is when the sender took the message back: it keeps its ID
	// and loses its text and attachments.
	UnsentAt time.Time
	// UnsentParts are the parts of the message the sender took back while
	// the others stay (with UnsentAt zero), all those taken back so far.
	// A part is numbered as Messages numbers it in a message of files and
	// text: 0 to N-1 are its N attachments in order, N its text.
	UnsentParts []int
	// DeliveredAt and ReadAt are for messages the line sent: when the
	// contact's device received it, and when the contact read it.
	DeliveredAt time.Time
	ReadAt      time.Time
	// ReadByLineAt is, for a contact's message, when the line's owner read
	// it on another device.
	ReadByLineAt time.Time
	// Attachments are the message's files as they now are: a file that
	// had not arrived when the message was reported is filled in.
	Attachments []File
}

// Group changes, as ChatUpdate.Action.
const (
	ChatParticipantAdded   = "participant_added"
	ChatParticipantRemoved = "participant_removed"
	ChatParticipantLeft    = "participant_left"
	ChatRenamed            = "renamed"
	ChatPhotoChanged       = "photo_changed"
	ChatPhotoRemoved       = "photo_removed"
)

// ChatUpdate is a change to a group chat: a member added, removed or gone,
// a new name or photo.
type ChatUpdate struct {
	Line string
	Chat Chat
	// GUID identifies the change on the network (the system message that
	// records it), so that it is applied once.
	GUID   string
	Action string // one of the Chat… constants
	// Participant is the member added, removed or gone.
	Participant string
	// Name is the new name of a renamed chat ("" when the name was
	// cleared).
	Name string
	// By is who made the change, "" when the network does not say; the
	// line's handle (with IsFromMe) when it was the line's owner.
	By       string
	IsFromMe bool
	At       time.Time
}

// InboundTyping is a contact starting or stopping typing in a chat.
type InboundTyping struct {
	Line   string
	Chat   Chat
	Sender string
	On     bool
	At     time.Time
}

// InboundRead is a contact's read receipt: they read the chat up to ReadAt.
type InboundRead struct {
	Line   string
	Chat   Chat
	Reader string
	ReadAt time.Time
}

// SendFailure is a message of ours the network took as sent and later
// reported not delivered ("Not Delivered" on a Mac).
type SendFailure struct {
	Line   string
	GUID   string // the message's network GUID
	Reason string
}

// ErrNotRecorded is a sink's answer for a report about a message it has no
// record of (yet): the bridge may report it again later.
var ErrNotRecorded = errors.New("no such message recorded")

// Bridge is the network behind a set of lines. Each method returns once the
// network accepted the action. An error wrapped with Permanent is not worth
// retrying; any other is, except after Outgoing.Handoff was called: then
// only an error marked NotSent is.
type Bridge interface {
	Send(ctx context.Context, out Outgoing) (Receipt, error)
	React(ctx context.Context, r Reaction) (Receipt, error)
	SetTyping(ctx context.Context, t Typing) error
	MarkRead(ctx context.Context, r Read) error
	// Run reports what arrives on the bridge's lines to sink until ctx is
	// cancelled.
	Run(ctx context.Context, sink Sink) error
}

// Sink takes what arrives from the network.
type Sink interface {
	// Receive takes a new message, with its event. twin reports a message
	// (MayBeTwin) taken as the twin of a stored one: not stored again, no
	// event.
	Receive(ctx context.Context, in Inbound) (twin bool, err error)
	// ReceiveHistory takes messages that are not news: those on the
	// network before the line was connected, old ones the network writes
	// again, screened ones. They are stored without events, and without
	// copying their files (their attachments keep name, type and size, no
	// URL). twins are the GUIDs of those taken as twins of stored
	// messages.
	ReceiveHistory(ctx context.Context, line string, msgs []Inbound) (twins []string, err error)
	// ImportHistory takes a line's history at its first start, as
	// ReceiveHistory does, from pages as they are read; it stores them as
	// they come, and returns once pages ends (or at its first error).
	ImportHistory(ctx context.Context, line string, pages iter.Seq2[[]Inbound, error]) error
	// HistoryImported says that a line's history import is complete: the
	// sink may settle what it held for the import's sake.
	HistoryImported(ctx context.Context, line string) error
	ReceiveReaction(ctx context.Context, in InboundReaction) error
	// ReceiveUpdate takes a change to a message. It returns ErrNotRecorded
	// for a message it does not know (yet).
	ReceiveUpdate(ctx context.Context, u MessageUpdate) error
	// ReceiveChatUpdate takes a change to a group chat.
	ReceiveChatUpdate(ctx context.Context, u ChatUpdate) error
	ReceiveTyping(ctx context.Context, in InboundTyping) error
	ReceiveRead(ctx context.Context, in InboundRead) error
	// ReceiveSendFailure takes a late failure of a message that was sent.
	// It returns ErrNotRecorded for a message it does not know (yet), and
	// nil for one that is not the line's sent message (sent from another
	// device, or failed already).
	ReceiveSendFailure(ctx context.Context, f SendFailure) error
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix (an unknown recipient,
// a refused attachment).
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type unavailableError struct {
	err   error
	after time.Duration
}

func (e unavailableError) Error() string { return e.err.Error() }
func (e unavailableError) Unwrap() error { return e.err }

// Unavailable marks err as the network known not to work now (Messages not
// answering, Automation not granted yet), found before anything was
// tried: the action waits, without counting an attempt, and is tried
// again after the pause given.
func Unavailable(err error, after time.Duration) error { return unavailableError{err, after} }

// IsUnavailable reports whether err was marked with Unavailable, and the
// pause before trying again.
func IsUnavailable(err error) (time.Duration, bool) {
	var u unavailableError
	if errors.As(err, &u) {
		return u.after, true
	}
	return 0, false
}

type notSentError struct{ err error }

func (e notSentError) Error() string { return e.err.Error() }
func (e notSentError) Unwrap() error { return e.err }

// NotSent marks err as a failure that certainly did not reach the network,
// after Handoff was called: the send may be tried again (unless the error is
// also Permanent).
func NotSent(err error) error { return notSentError{err} }

// IsNotSent reports whether err was marked with NotSent.
func IsNotSent(err error) bool {
	var n notSentError
	return errors.As(err, &n)
}
