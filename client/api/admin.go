package api

// The admin socket's shapes: what the command line and the console send to
// and receive from the running daemon on this host (package admin), beside
// the API's own.

// KeyRequest asks for a new API key.
type KeyRequest struct {
	Label  string   `json:"label"`
	Scopes string   `json:"scopes"` // "all" or comma-separated
	Lines  []string `json:"lines"`  // handles or line IDs; empty: every line
	Owner  string   `json:"owner"`
	// Agent makes the key an agent's: its writes yield to the line's
	// owner and to other keys' chat leases.
	Agent bool `json:"agent,omitempty"`
	// Approval is ApprovalRequired when the agent's messages wait for the
	// owner's approval, except to chats whose every contact is in
	// ApprovalExcept; "" or ApprovalNone for none.
	Approval       string   `json:"approval,omitempty"`
	ApprovalExcept []string `json:"approval_except,omitempty"`
	// AllowFrom and GroupMention are an agent key's sender gating: the
	// contacts (handles) it hears from and writes to, and the Go regexp
	// a contact's group message must match to reach it.
	AllowFrom    []string `json:"allow_from,omitempty"`
	GroupMention string   `json:"group_mention,omitempty"`
}

// KeyInfo describes a key; Secret is set only when the key is created.
type KeyInfo struct {
	ID     string   `json:"id"`
	Secret string   `json:"key,omitempty"`
	Hint   string   `json:"hint"` // sk_live_…wXyZ; "" for keys made before hints
	Label  string   `json:"label"`
	Scopes []string `json:"scopes"`
	Lines  []string `json:"lines"` // handles
	Owner  string   `json:"owner"`
	Agent  bool     `json:"agent"`
	// Approval is ApprovalRequired or ApprovalNone; ApprovalExcept the
	// contacts exempt from it.
	Approval       string   `json:"approval"`
	ApprovalExcept []string `json:"approval_except"`
	// AllowFrom and GroupMention are the key's sender gating ([] and ""
	// for none).
	AllowFrom    []string `json:"allow_from"`
	GroupMention string   `json:"group_mention"`
	CreatedAt    int64    `json:"created_at"`
	// LastUsedAt is when the key last made a request, to the minute; 0
	// for never.
	LastUsedAt int64 `json:"last_used_at"`
}

// SimOwnerSend is a message the line's owner sends from another device
// (their iPhone or Mac), not through Blueline.
type SimOwnerSend struct {
	Line string `json:"line"`
	// To is a contact's handle, a chat ID (cht_…), one of the line's
	// self_handles or SimToSelf: the owner's chat with themselves.
	To   string `json:"to"`
	Text string `json:"text"`
	// ReplyTo is the message (msg_… or GUID) this one replies to inline.
	ReplyTo string `json:"reply_to,omitempty"`
}

// SimToSelf is SimOwnerSend's To for the owner's chat with themselves,
// under the first of the line's self_handles.
const SimToSelf = "self"

// SimInbound is a message a simulated contact sends to a line.
type SimInbound struct {
	Line         string   `json:"line"`
	From         string   `json:"from"`
	Text         string   `json:"text"`
	Chat         string   `json:"chat"`         // an existing chat (cht_…)
	Group        string   `json:"group"`        // name of a new group chat
	Participants []string `json:"participants"` // members of the new group
	// Attach is the absolute path of a file to attach (a picture, a .vcf
	// contact card…); Audio, of a voice memo, with its Transcription.
	Attach        string  `json:"attach"`
	Audio         string  `json:"audio"`
	Transcription *string `json:"transcription"`
	// Late is how long before it is recorded the message was sent (a Go
	// duration, "2h"): news caught up late, as after the daemon was down.
	Late string `json:"late,omitempty"`
	// UnknownSender files the contact's new chat under Unknown Senders,
	// as Messages does for a sender not in the owner's contacts.
	UnknownSender bool `json:"unknown_sender,omitempty"`
}

// SimReaction is a tapback a simulated contact adds or removes.
type SimReaction struct {
	Line    string `json:"line"`
	From    string `json:"from"`
	Message string `json:"message"` // msg_ ID or GUID
	Type    string `json:"type"`
	// Emoji is the tapback's emoji, with Type bridge.ReactionEmoji.
	Emoji  string `json:"emoji"`
	Remove bool   `json:"remove"`
}

// SimTyping is a simulated contact starting or stopping typing.
type SimTyping struct {
	Line  string `json:"line"`
	From  string `json:"from"`
	Chat  string `json:"chat"`  // a group chat (cht_…); default the one-to-one chat
	State string `json:"state"` // "on" or "off"
}

// SimEdit is a simulated contact editing the text of a message it sent.
type SimEdit struct {
	Line    string `json:"line"`
	From    string `json:"from"`
	Message string `json:"message"` // msg_ ID or GUID
	Text    string `json:"text"`
}

// SimUnsend is a simulated contact taking back a message it sent.
type SimUnsend struct {
	Line    string `json:"line"`
	From    string `json:"from"`
	Message string `json:"message"` // msg_ ID or GUID
}

// SimRead is a simulated contact reading what the line sent in their
// one-to-one chat.
type SimRead struct {
	Line string `json:"line"`
	From string `json:"from"`
	// Message is the line's message read (msg_ ID or GUID); by default the
	// line's latest message in the chat.
	Message string `json:"message"`
	// DeliveredOnly has the message reach the contact's device, unread.
	DeliveredOnly bool `json:"delivered_only"`
}

// SimGroup is a change to a group chat, made by a member or by the line's
// owner.
type SimGroup struct {
	Line string `json:"line"`
	Chat string `json:"chat"` // a group chat (cht_…)
	// By is the member who makes the change, or the line's own handle for
	// the line's owner.
	By string `json:"by"`
	// Action is one of the bridge's Chat… changes. Participant is the
	// member added or removed (the one who leaves is By); Name is a renamed
	// chat's new name, "" to clear it.
	Action      string `json:"action"`
	Participant string `json:"participant"`
	Name        string `json:"name"`
}

// WebhookInfo is a webhook as `blueline webhooks list` shows it.
type WebhookInfo struct {
	ID string `json:"id"`
	// Line is its line's handle; the handles, comma-separated, of a
	// webhook of several lines.
	Line string `json:"line"`
	// Owner is the owner of the key that created it; "" for the host's
	// operator.
	Owner        string   `json:"owner"`
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	IsActive     bool     `json:"is_active"`
	FailingSince int64    `json:"failing_since"`
	CreatedAt    int64    `json:"created_at"`
}

// WebhookTestRequest asks for a test event; Event "" is the webhook's first.
type WebhookTestRequest struct {
	ID    string `json:"id"`
	Event string `json:"event"`
}

// SessionInfo describes a signed-in dashboard browser.
type SessionInfo struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	Via       string `json:"via"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
}

// SandboxOwnerInfo is one owner's sandbox in `blueline sandbox`.
type SandboxOwnerInfo struct {
	Owner string `json:"owner"`
	Sandbox
}

// SandboxInfo is what `blueline sandbox` prints: every owner's sandbox, the
// owners of keys that have not started one included.
type SandboxInfo struct {
	Handle string             `json:"handle"`
	LineID string             `json:"line_id"`
	Owners []SandboxOwnerInfo `json:"owners"`
}

// SimAvailability is whether a handle is reachable on iMessage on the
// simulated network, as `blueline sim availability` sets it.
type SimAvailability struct {
	Handle   string `json:"handle"`
	IMessage bool   `json:"imessage"`
}

// Scopes are the permissions an API key can hold; each endpoint needs one.
var Scopes = []string{
	"messages:read", "messages:write", "chats:read", "lines:read",
	"reactions:read", "reactions:write", "typing:read", "typing:write",
	"receipts:read", "receipts:write", "webhooks:read", "webhooks:write",
	"outbox:read", "files:read", "files:write",
}

// OwnerHeader, on the admin socket's API, makes a request act as that
// owner's key rather than as the host's operator.
const OwnerHeader = "Blueline-Owner"

// Check is one input of the daemon's readiness (GET /readyz, the console):
// the storage, a worker, a line's bridge.
type Check struct {
	Name string
	OK   bool
	// Reason says briefly why the check fails (shown only then).
	Reason string
	// Info is a note that does not affect readiness, such as whether a
	// Messages line's helper is connected.
	Info string
}

// FleetStatus is what `blueline fleet status` prints: the fleet's nodes,
// its lines and where they are, and JetStream's state, as the node asked
// sees them.
type FleetStatus struct {
	Node      string          `json:"node"` // the node that answered
	Nodes     []FleetNode     `json:"nodes"`
	Lines     []FleetLine     `json:"lines"`
	Stream    FleetAsset      `json:"stream"`
	Buckets   []FleetAsset    `json:"buckets"`
	Consumers []FleetConsumer `json:"consumers"`
}

// FleetNode is a node as its heartbeat last described it.
type FleetNode struct {
	Node    string   `json:"node"`
	Up      bool     `json:"up"`
	Version string   `json:"version"`
	BaseURL string   `json:"base_url"`
	Lines   []string `json:"lines"`
	// StartedAt and LastSeen are Unix ms, by the node's own clock.
	StartedAt int64 `json:"started_at"`
	LastSeen  int64 `json:"last_seen"`
}

// FleetLine is a line of the line directory: the node serving it.
type FleetLine struct {
	Handle string `json:"handle"`
	LineID string `json:"line_id"`
	Node   string `json:"node"`
	Health string `json:"health"`
	Up     bool   `json:"up"`
}

// FleetAsset is a JetStream asset (the events stream, a bucket).
type FleetAsset struct {
	Name     string `json:"name"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	Replicas int    `json:"replicas"`
	Leader   string `json:"leader"`
	Current  int    `json:"current"` // replicas up to date, the leader included
}

// FleetConsumer is a webhook's durable consumer of the events stream.
type FleetConsumer struct {
	Name        string `json:"name"`
	Pending     uint64 `json:"pending"`     // events not yet handed out
	AckPending  int    `json:"ack_pending"` // handed out, not yet acknowledged
	Redelivered int    `json:"redelivered"`
}
