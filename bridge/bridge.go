// Package bridge defines the messaging network as Blueline sees it: a way to
// send on a line, and a stream of what arrives on it. The simulated network
// (bridge/sim) and the macOS Messages app (bridge/messages) implement it.
package bridge

import (
	"context"
	"errors"
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
}

// Outgoing is a message a line asks the network to deliver.
type Outgoing struct {
	// OutboxID identifies the request; a bridge may use it to match its
	// send with what the network later reports.
	OutboxID    string
	Line        string // the sending line's handle
	Service     string // "imessage" or "sms"
	Chat        Chat
	Text        string
	ReplyToGUID string
}

// Receipt is the network's acknowledgement of a send.
type Receipt struct {
	GUID   string
	SentAt time.Time
}

// Inbound is a message that arrived on a line, or one the line's owner sent
// from another device (IsFromMe).
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
}

// Bridge is the network behind a set of lines.
type Bridge interface {
	// Send delivers out and returns once the network accepted it. An error
	// wrapped with Permanent is not worth retrying; any other is.
	Send(ctx context.Context, out Outgoing) (Receipt, error)
	// Run reports what arrives on the bridge's lines to sink until ctx is
	// cancelled.
	Run(ctx context.Context, sink Sink) error
}

// Sink takes what arrives from the network.
type Sink interface {
	Receive(ctx context.Context, in Inbound) error
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
