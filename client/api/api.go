// Package api holds the JSON shapes of Blueline's HTTP API: what the
// server writes, and what its clients (the console, the Go client) read,
// the events its webhooks and event stream deliver included (events.go).
// Fields the reference service leaves null are pointers; a field added by
// Blueline says so.
package api

import "encoding/json"

// Line is a line (a phone number or Apple ID handle) of the host.
type Line struct {
	ID       string  `json:"id"`
	Handle   string  `json:"handle"`
	Label    *string `json:"label"`
	Service  string  `json:"service"`
	IsActive bool    `json:"is_active"`
	// Not in the reference shape; tells a client which calls the line takes.
	AdvancedFeatures bool `json:"advanced_features"`
	IsSandbox        bool `json:"is_sandbox"`
	// Capabilities says what the line can do now, by feature (reactions,
	// emoji_reactions, typing, receipts, edit, unsend, groups,
	// availability, audio_messages, threaded_replies), and for each it
	// cannot, why.
	Capabilities map[string]Capability `json:"capabilities"`
	// Guard is the line's Apple ID guard and its standing today.
	Guard LineGuard `json:"guard"`
	// Health is what the line's bridge has seen of the Mac (a Messages
	// line), null on the simulated network.
	Health *LineHealth `json:"health"`
	// Latency is how long the line's traffic took over the last day, by
	// stage.
	Latency LineLatency `json:"latency"`
}

// LineLatency is a line's p50 and p99 of each timed stage over the last
// day. The figures are kept in the daemon's memory: a restart starts the
// day over (Since says from when).
type LineLatency struct {
	// Since is where the figures start (Unix ms): a day ago, to the 10
	// minutes, or the daemon's start when that is later.
	Since int64 `json:"since"`
	// AcceptToSent: an outbox message from its acceptance (or scheduled
	// time) to the network reporting it sent.
	AcceptToSent LatencyQuantiles `json:"accept_to_sent"`
	// RowToWebhook: a contact's message from its time on the network (the
	// chat.db row's date; on the simulated network its arrival) to a
	// webhook's 2xx answer to its message.received, one per webhook.
	RowToWebhook LatencyQuantiles `json:"row_to_webhook"`
	// SentToDelivered: a message of the line from when it was sent to its
	// delivered receipt, as the network dates both.
	SentToDelivered LatencyQuantiles `json:"sent_to_delivered"`
}

// LatencyQuantiles are one stage's figures: how many were timed, and the
// median and 99th percentile in milliseconds (null when none was timed).
type LatencyQuantiles struct {
	Count int64  `json:"count"`
	P50Ms *int64 `json:"p50_ms"`
	P99Ms *int64 `json:"p99_ms"`
}

// LineHealth is a Messages line's bridge as it last saw chat.db and
// Messages, with what it took for other than news since the daemon
// started.
type LineHealth struct {
	// Summary is the bridge's health in a line, as /readyz shows it.
	Summary string `json:"summary"`
	// HistoryRows are new rows stored as history, without events (old
	// messages written again, as Messages in iCloud does).
	HistoryRows int64 `json:"history_rows"`
	// TwinsSuppressed are new rows that repeated a stored message under
	// another GUID, not stored again.
	TwinsSuppressed int64 `json:"twins_suppressed"`
	// ScreenedRows are rows Messages filed away (junk, filter folders,
	// unknown senders held), stored without events.
	ScreenedRows int64 `json:"screened_rows"`
	// ChatDBReplacedAt is when another chat.db was found at its path
	// (Unix ms), null when not since the daemon started.
	ChatDBReplacedAt *int64 `json:"chat_db_replaced_at"`
	// SendingAlias is the address Messages last sent from when it is not
	// the line's handle, null otherwise.
	SendingAlias *string `json:"sending_alias"`
}

// LineGuard is a line's Apple ID guard: whether it is on, its pace and
// caps, and today's counts (UTC) the caps are checked against.
type LineGuard struct {
	Enabled bool        `json:"enabled"`
	PaceMS  int64       `json:"pace_ms"`
	Today   GuardToday  `json:"today"`
	Limits  GuardLimits `json:"limits"`
}

// SentAllowed is how many messages the ratio cap allows today: MaxRatio
// per message received, counting at least one; 0 when there is no cap.
func (g LineGuard) SentAllowed() int {
	return g.Limits.MaxRatio * max(g.Today.Received, 1)
}

// GuardToday is a line's counts of the UTC day.
type GuardToday struct {
	Sent         int   `json:"sent"`          // messages accepted
	Received     int   `json:"received"`      // messages received from contacts
	ColdContacts int   `json:"cold_contacts"` // chats messaged whose contacts were silent for cold_after_ms
	ResetsAt     int64 `json:"resets_at"`     // the next midnight UTC
}

// GuardLimits are a line's caps; 0 is no cap.
type GuardLimits struct {
	MaxUnanswered   int   `json:"max_unanswered"`
	MaxRatio        int   `json:"max_ratio"`
	MaxColdContacts int   `json:"max_cold_contacts"`
	ColdAfterMS     int64 `json:"cold_after_ms"`
	// MaxAvailabilityLookups is per hour: lookups of GET /v1/availability
	// that reach the network.
	MaxAvailabilityLookups int `json:"max_availability_lookups"`
}

// Capability is whether a line can use a feature now; Reason says why not
// (null when it can).
type Capability struct {
	Available bool    `json:"available"`
	Reason    *string `json:"reason"`
}

// Availability is whether a handle is reachable on iMessage, as the line's
// network last answered (answers are kept for a while: CheckedAt).
type Availability struct {
	Handle    string `json:"handle"`
	IMessage  bool   `json:"imessage"`
	CheckedAt int64  `json:"checked_at"`
	RequestID string `json:"request_id"`
}

// Chat is a conversation on a line: one-to-one or a group.
type Chat struct {
	ID                 string   `json:"id"`
	LineID             string   `json:"line_id"`
	Identifier         string   `json:"identifier"`
	Service            string   `json:"service"`
	Name               *string  `json:"name"`
	IsGroup            bool     `json:"is_group"`
	Participants       []string `json:"participants"`
	HasReceivedInbound bool     `json:"has_received_inbound"`
	LastMessageAt      *int64   `json:"last_message_at"`
	// Filter is where the network files the chat away from the inbox
	// ("unknown_sender", "pending_review", "junk", "blocked",
	// "promotion", "transaction", "filtered"), null for none.
	Filter *string `json:"filter"`
	// UnreadCount counts the contacts' messages after the line last read
	// the chat (through the API, or its owner on another device).
	UnreadCount int `json:"unread_count"`
}

// Message is a message in a chat, received or sent by the line.
type Message struct {
	ID             string       `json:"id"`
	LineID         string       `json:"line_id"`
	ChatID         string       `json:"chat_id"`
	GUID           string       `json:"guid"`
	Sender         string       `json:"sender"`
	Text           *string      `json:"text"`
	Attachments    []Attachment `json:"attachments"`
	Service        *string      `json:"service"`
	IsFromMe       bool         `json:"is_from_me"`
	IsAudioMessage bool         `json:"is_audio_message"`
	SentAt         int64        `json:"sent_at"`
	SyncedAt       int64        `json:"synced_at"`
	OutboxID       *string      `json:"outbox_id"`
	ReplyToGUID    *string      `json:"reply_to_guid"`
	// FailedAt and Error report a message of ours the network failed
	// after it was sent (a late "Not Delivered").
	FailedAt *int64  `json:"failed_at"`
	Error    *string `json:"error"`
	// What Messages recorded later (Unix ms, null for not (yet)): the last
	// edit (text is then the latest version), the unsend (text null, no
	// attachments), and for the line's own messages delivery and reading.
	EditedAt    *int64 `json:"edited_at"`
	UnsentAt    *int64 `json:"unsent_at"`
	DeliveredAt *int64 `json:"delivered_at"`
	ReadAt      *int64 `json:"read_at"`
	// UnsentParts says what the sender took back of a message that keeps
	// the rest (gone from text and attachments); null when nothing, and
	// once the whole message is unsent (unsent_at).
	UnsentParts *UnsentParts `json:"unsent_parts"`
}

// UnsentParts are the parts of a message its sender took back.
type UnsentParts struct {
	// Text is true when the text was taken back (text is then null).
	Text bool `json:"text"`
	// Attachments are the indexes of the attachments taken back among
	// those the message arrived with, in order.
	Attachments []int `json:"attachments"`
}

// Attachment is a file a message carries, with a signed download URL.
type Attachment struct {
	Filename      *string `json:"filename"`
	MimeType      *string `json:"mime_type"`
	Size          *int64  `json:"size"`
	URL           *string `json:"url"`
	Transcription *string `json:"transcription"`
	// Inline marks an emoji image that sits in the text (a Genmoji or
	// inline sticker): the text carries its description, ":smiling frog:",
	// where the image goes.
	Inline bool `json:"inline"`
}

// File is an uploaded file, as POST and GET /v1/files answer it.
type File struct {
	ID        string  `json:"id"`
	URL       string  `json:"url"`
	Filename  *string `json:"filename"`
	MimeType  string  `json:"mime_type"`
	Size      int64   `json:"size"`
	RequestID string  `json:"request_id"`
}

// Reaction is a tapback on a message.
type Reaction struct {
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	// Type is one of the six classic tapbacks, or "emoji" (see Emoji) or
	// "sticker" for the tapbacks of recent Apple systems.
	Type     string  `json:"type"`
	Emoji    *string `json:"emoji"`
	Sender   string  `json:"sender"`
	IsFromMe bool    `json:"is_from_me"`
	Added    bool    `json:"added"`
	SentAt   int64   `json:"sent_at"`
	SyncedAt int64   `json:"synced_at"`
}

// Indicator is a typing indicator in a chat.
type Indicator struct {
	ID        string `json:"id"`
	ChatID    string `json:"chat_id"`
	Handle    string `json:"handle"`
	IsTyping  bool   `json:"is_typing"`
	UpdatedAt int64  `json:"updated_at"`
}

// Receipt is how far a contact has read a chat.
type Receipt struct {
	ID         string `json:"id"`
	ChatID     string `json:"chat_id"`
	Handle     string `json:"handle"`
	LastReadAt int64  `json:"last_read_at"`
	SyncedAt   int64  `json:"synced_at"`
}

// OutboxItem is an accepted write on its way out: its status is one of
// pending, claimed, sent, failed.
type OutboxItem struct {
	ID          string          `json:"id"`
	LineID      string          `json:"line_id"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
	CompletedAt *int64          `json:"completed_at"`
	Error       *string         `json:"error"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	CreatedAt   int64           `json:"created_at"`
	RequestID   string          `json:"request_id"`
	// Where a sent message went out, when the network tells: the chat GUID
	// and service it finally used, and whether it fell back to SMS.
	ChatGUID    *string `json:"chat_guid"`
	Service     *string `json:"service"`
	SMSFallback bool    `json:"sms_fallback"`
	// ChatID is the chat the item acts in: for a new group
	// (POST /v1/groups), null until the group is created.
	ChatID *string `json:"chat_id"`
	// SendAt is when a scheduled item falls due (Unix ms); null for at once.
	SendAt *int64 `json:"send_at"`
	// Approval is where the owner's approval of an agent key's draft
	// stands (an Approval… constant); absent when none was needed. A
	// waiting item is pending until approved (then sent as any other),
	// declined (failed, error "declined") or expired (failed, error
	// "approval_expired") at ApprovalExpiresAt (Unix ms). ApprovalBy says
	// who answered: a key ID, "console" or "host".
	Approval          *string `json:"approval,omitempty"`
	ApprovalExpiresAt *int64  `json:"approval_expires_at,omitempty"`
	ApprovalBy        *string `json:"approval_by,omitempty"`
}

// Where the owner's approval of a draft stands (OutboxItem.Approval).
const (
	ApprovalWaiting  = "waiting"
	ApprovalApproved = "approved"
	ApprovalDeclined = "declined"
	ApprovalExpired  = "expired"
)

// Whether an agent key's messages need approval (KeyInfo.Approval,
// CreateKeyRequest.Approval).
const (
	ApprovalRequired = "required"
	ApprovalNone     = "none"
)

// ApproveRequest is the body of POST /v1/outbox/approve: Text, when set,
// replaces the draft's text.
type ApproveRequest struct {
	ID   string  `json:"id"`
	Text *string `json:"text,omitempty"`
}

// Webhook is a registered receiver of a line's events; Secret is shown
// when it is created.
type Webhook struct {
	ID      string   `json:"id"`
	LineIDs []string `json:"line_ids"`
	URL     string   `json:"url"`
	Events  []string `json:"events"`
	// Arrival are the arrivals of the message events it receives
	// (ArrivalLive, ArrivalCatchUp); IncludeFiltered whether those of
	// chats Messages files under a filter (unknown senders) too.
	Arrival         []string `json:"arrival"`
	IncludeFiltered bool     `json:"include_filtered"`
	Secret          string   `json:"secret"`
	IsActive        bool     `json:"is_active"`
	CreatedAt       int64    `json:"created_at"`
	RequestID       string   `json:"request_id,omitempty"`
}

// Sandbox is a key owner's sandbox: its activation and today's quota.
type Sandbox struct {
	Status            string       `json:"status"`
	ActivationCode    *string      `json:"activation_code"`
	SandboxLineHandle string       `json:"sandbox_line_handle"`
	ContactIdentifier *string      `json:"contact_identifier"`
	ActivatedAt       *int64       `json:"activated_at"`
	Usage             SandboxUsage `json:"usage"`
	RequestID         string       `json:"request_id,omitempty"`
}

// SandboxUsage is a sandbox's sends of the UTC day.
type SandboxUsage struct {
	Used      int   `json:"used"`
	Limit     int   `json:"limit"`
	Remaining int   `json:"remaining"`
	ResetsAt  int64 `json:"resets_at"`
}

// List is the spec's list envelope.
type List[T any] struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
	RequestID  string  `json:"request_id"`
}

// ChatLease is a chat held by one API key (POST /v1/chats/lease): other
// agent keys may not write to it until it expires or is released.
type ChatLease struct {
	Object     string  `json:"object"` // "chat_lease"
	ChatID     string  `json:"chat_id"`
	LineHandle string  `json:"line_handle"`
	KeyID      string  `json:"key_id"`
	KeyLabel   string  `json:"key_label"`
	Label      *string `json:"label"`
	// Status is active, or released for the answer to a release.
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
	RequestID string `json:"request_id,omitempty"`
}

// ChatResume is the answer to POST /v1/chats/resume.
type ChatResume struct {
	Object     string `json:"object"` // "chat_resume"
	ChatID     string `json:"chat_id"`
	LineHandle string `json:"line_handle"`
	// WasHumanActive is whether the owner had the chat until now.
	WasHumanActive bool   `json:"was_human_active"`
	RequestID      string `json:"request_id,omitempty"`
}
