package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Event names: what a webhook subscribes to, and what the stream GET
// /v1/events follows. The first four are the reference service's; a
// webhook gets the others only when it names them.
const (
	EventMessageReceived = "message.received"
	EventMessageSent     = "message.sent"
	EventReactionAdded   = "reaction.added"
	EventReactionRemoved = "reaction.removed"
	// EventMessageFailed is a sent message the network later failed.
	EventMessageFailed = "message.failed"
	// Changes the network records after a message.
	EventMessageEdited    = "message.edited"
	EventMessageUnsent    = "message.unsent"
	EventMessageDelivered = "message.delivered"
	// EventReceiptRead is a contact having read a chat up to a time: the
	// name the reference service reserves for it.
	EventReceiptRead = "receipt.read"
	EventChatUpdated = "chat.updated"
	// A contact opting out of a line's messages (a keyword such as STOP)
	// or back in (START).
	EventContactOptedOut = "contact.opted_out"
	EventContactOptedIn  = "contact.opted_in"
	// EventChatHandoff is a chat changing hands between the line's owner
	// and its agents: the owner wrote in it from another device
	// (human_active), or the agents may write again (agent_resumed).
	EventChatHandoff = "chat.handoff"
	// EventChatLeased and EventChatReleased are a key taking, renewing or
	// giving up a chat's lease.
	EventChatLeased   = "chat.leased"
	EventChatReleased = "chat.released"
	// EventMessageSelf is a message the line's owner wrote in their chat
	// with themselves (the line's self_handles): a control channel for
	// agents. Such messages are not message.received or message.sent;
	// Blueline's own sends into that chat are message.sent and never
	// message.self.
	EventMessageSelf = "message.self"
)

// Arrivals of a message event: how the message reached Blueline. Live
// news was recorded as it happened and handed over at once; catch-up news
// was read late (the daemon was down, the Mac offline or asleep), or
// handed to its receiver late (a webhook retried, a stream resumed).
// History (old rows the network writes again) raises no events.
const (
	ArrivalLive    = "live"
	ArrivalCatchUp = "catch_up"
)

// WebhookEvents are the events a webhook can subscribe to.
var WebhookEvents = []string{EventMessageReceived, EventMessageSent, EventReactionAdded, EventReactionRemoved, EventMessageFailed,
	EventMessageEdited, EventMessageUnsent, EventMessageDelivered, EventReceiptRead, EventChatUpdated,
	EventContactOptedOut, EventContactOptedIn, EventChatHandoff, EventChatLeased, EventChatReleased, EventMessageSelf}

// StandardEvents are the reference service's four: what a stream that
// names no events follows, as an SDK-built receiver expects nothing else.
var StandardEvents = []string{EventMessageReceived, EventMessageSent, EventReactionAdded, EventReactionRemoved}

// Event is the body of a webhook delivery, and the data of an event of the
// stream GET /v1/events (whose delivery_id is the event's evt_ ID).
type Event struct {
	Type       string          `json:"event"` // one of the Event… constants
	Data       json.RawMessage `json:"data"`  // decode with Message, Reaction, Receipt, Chat or Decode
	Timestamp  int64           `json:"timestamp"`
	DeliveryID string          `json:"delivery_id"` // the same on every attempt: drop repeats by it
	// Test marks an event `blueline webhooks test` sent: its data is a
	// sample about nothing stored.
	Test bool `json:"test,omitempty"`
}

// MessageEventData is the data of the message.* events: the message as
// GET /v1/messages shows it, and the line's handle.
type MessageEventData struct {
	Message
	LineHandle string `json:"line_handle"`
	// Arrival is ArrivalLive or ArrivalCatchUp.
	Arrival string `json:"arrival"`
	// Filter is where Messages files the chat (unknown_sender, …), null
	// for the inbox.
	Filter *string `json:"filter"`
	// SenderVerified is false for a contact's SMS or RCS message, whose
	// sender ID the network does not authenticate (it can be spoofed);
	// true for iMessage and for the line's own messages.
	SenderVerified bool `json:"sender_verified"`
}

// ReactionEventData is the data of the reaction.* events.
type ReactionEventData struct {
	Reaction
	LineHandle string `json:"line_handle"`
}

// ReceiptEventData is the data of receipt.read.
type ReceiptEventData struct {
	Receipt
	LineHandle string `json:"line_handle"`
}

// ChatEventData is the data of chat.updated: the chat as the change left
// it, and the change.
type ChatEventData struct {
	Chat
	ChatID     string     `json:"chat_id"`
	Change     ChatChange `json:"change"`
	LineHandle string     `json:"line_handle"`
}

// ContactEventData is the data of contact.opted_out and contact.opted_in:
// who opted out of the line's messages or back in, in which chat, when.
type ContactEventData struct {
	Handle     string `json:"handle"`
	ChatID     string `json:"chat_id"`
	At         int64  `json:"at"`
	LineHandle string `json:"line_handle"`
}

// HandoffEventData is the data of chat.handoff.
type HandoffEventData struct {
	ChatID     string `json:"chat_id"`
	LineHandle string `json:"line_handle"`
	// State is human_active (the owner wrote from another device) or
	// agent_resumed.
	State string `json:"state"`
	// Until is, for human_active, when agent keys may write again (Unix
	// ms) unless the owner writes again.
	Until *int64 `json:"until,omitempty"`
}

// LeaseEventData is the data of chat.leased and chat.released.
type LeaseEventData struct {
	ChatID     string  `json:"chat_id"`
	LineHandle string  `json:"line_handle"`
	KeyID      string  `json:"key_id"`
	KeyLabel   string  `json:"key_label"`
	Label      *string `json:"label"`
	ExpiresAt  int64   `json:"expires_at"`
	// Released is, for chat.released, why: released or expired.
	Released *string `json:"released,omitempty"`
}

// ChatChange is what changed in a group chat.
type ChatChange struct {
	// Action is participant_added, participant_removed, participant_left,
	// renamed, photo_changed or photo_removed.
	Action      string  `json:"action"`
	Participant *string `json:"participant"`
	Name        *string `json:"name"`
	By          *string `json:"by"`
	IsFromMe    bool    `json:"is_from_me"`
	At          int64   `json:"at"`
}

// Time is the event's timestamp.
func (e *Event) Time() time.Time { return time.UnixMilli(e.Timestamp) }

// Decode decodes the event's data into v.
func (e *Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("blueline: decode %s data: %w", e.Type, err)
	}
	return nil
}

// Message decodes the data of a message.* event.
func (e *Event) Message() (*MessageEventData, error) {
	return decodeData[MessageEventData](e, "message.")
}

// Reaction decodes the data of a reaction.* event.
func (e *Event) Reaction() (*ReactionEventData, error) {
	return decodeData[ReactionEventData](e, "reaction.")
}

// Receipt decodes the data of a receipt.* event.
func (e *Event) Receipt() (*ReceiptEventData, error) {
	return decodeData[ReceiptEventData](e, "receipt.")
}

// Contact decodes the data of a contact.* event.
func (e *Event) Contact() (*ContactEventData, error) {
	return decodeData[ContactEventData](e, "contact.")
}

// Chat decodes the data of a chat.updated event.
func (e *Event) Chat() (*ChatEventData, error) {
	return decodeData[ChatEventData](e, EventChatUpdated)
}

// Handoff decodes the data of a chat.handoff event.
func (e *Event) Handoff() (*HandoffEventData, error) {
	return decodeData[HandoffEventData](e, EventChatHandoff)
}

// Lease decodes the data of a chat.leased or chat.released event.
func (e *Event) Lease() (*LeaseEventData, error) {
	if e.Type == EventChatReleased {
		return decodeData[LeaseEventData](e, EventChatReleased)
	}
	return decodeData[LeaseEventData](e, EventChatLeased)
}

func decodeData[T any](e *Event, prefix string) (*T, error) {
	if !strings.HasPrefix(e.Type, prefix) {
		return nil, fmt.Errorf("blueline: a %s event has no %s… data", e.Type, prefix)
	}
	var v T
	if err := e.Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
}
