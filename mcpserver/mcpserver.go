// Package mcpserver is Blueline's MCP server (Model Context Protocol, on
// the official Go SDK): the tools an AI agent needs to hold a conversation
// on a line — list lines and chats, read a chat, send (text, an attachment,
// a reply, later), react, show typing, mark read, edit and unsend, groups,
// availability, check or cancel an outbox item, wait for the contact's next
// message, find the chats needing a reply, search, diagnose — and, as a
// resource (blueline://lines) and a prompt (lines), the lines the key may
// use and which tools work on each, so that an agent knows before it
// tries. What contacts wrote reaches the model marked untrusted
// (untrusted.go); over stdio a host may subscribe to a line's chats
// needing a reply (push.go).
//
// Every tool acts through Blueline's HTTP API with the typed client
// (package client), so an agent is held to exactly what its key may do:
// scopes, line restrictions, the sandbox, contact-first, rate limits and
// quotas. New builds the server for one client (the stdio command,
// `blueline mcp`); NewHandler serves it over streamable HTTP at /mcp on the
// API's own listener, each call acting as the bearer key of its request and
// reaching the API in process (InProcess).
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// Options configure the MCP server.
type Options struct {
	// Client returns the API client a request (a tool call, a read of a
	// resource, a prompt) acts through, given its extra: the HTTP request's
	// header over /mcp (required).
	Client func(extra *mcp.RequestExtra) (*client.Client, error)
	// Check, when set, is asked before send_message fetches an
	// attachment's URL (or reads a local file) whether the call's key may
	// make requests that need scopes now: its refusal (an API error, as
	// the client returns them) ends the call before anything is fetched.
	// The HTTP endpoint sets it, so that a key that could not send
	// cannot make the daemon fetch URLs; nil checks nothing first (the
	// stdio server fetches on the agent's own machine).
	Check func(ctx context.Context, req *mcp.CallToolRequest, scopes ...string) error
	// AttachDir, when set, lets send_message attach files under this
	// folder of the machine the server runs on, by path. Empty refuses
	// every local path: a contact could otherwise talk an agent into
	// sending them any file the process can read.
	AttachDir string
	// AllowPrivateURLs lets send_message fetch attachments from URLs whose
	// host is not a public address (loopback, private networks, cloud
	// metadata). Off, those URLs are refused (SSRF).
	AllowPrivateURLs bool
	// RequestsPerHour and SandboxQuota are the limits the tool
	// descriptions state; 0 states the defaults.
	RequestsPerHour int
	SandboxQuota    int
	// Version is the server's version, as MCP clients see it.
	Version string
	// Done, when closed, ends the waits in progress (the daemon is
	// shutting down); nil never does.
	Done <-chan struct{}
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// CursorFile, when set, offers resource subscriptions: a host that
	// subscribes to a line's blueline://lines/{line}/needing-reply is told
	// when a contact writes on the line, the server following the event
	// stream from the position it keeps in this file. Empty offers none
	// (the stateless HTTP endpoint cannot push).
	CursorFile string
	// Channel, when set, declares a Claude Code channel
	// (experimental claude/channel) and pushes it each live message of a
	// known contact on the key's lines; run the server on its Transport.
	Channel *Channel
}

// Limits on the wait tool's timeout, in seconds: 0 does not wait.
const (
	DefaultWaitSeconds = 30
	MaxWaitSeconds     = 300
)

// Limits on a page of list_chats and read_messages: the API's.
const (
	defaultLimit = 20
	maxLimit     = 100
)

// New returns the MCP server with Blueline's tools.
func New(opts Options) *mcp.Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	t := &tools{opts: opts}
	so := &mcp.ServerOptions{Instructions: instructions(opts), Capabilities: &mcp.ServerCapabilities{}}
	var push *pusher
	if opts.CursorFile != "" {
		push = &pusher{t: t, file: opts.CursorFile, since: opts.Now(), subscribed: make(chan struct{})}
		so.SubscribeHandler, so.UnsubscribeHandler = push.subscribe, push.unsubscribe
		so.Capabilities.Resources = &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true}
	}
	if ch := opts.Channel; ch != nil {
		since := opts.Now()
		ch.t = t
		so.Capabilities.Experimental = map[string]any{"claude/channel": map[string]any{}}
		if ch.PermissionLine != "" {
			so.Capabilities.Experimental["claude/channel/permission"] = map[string]any{}
		}
		// Nothing is written before the host says it is ready: Claude
		// Code initializes its sessions (initialize, then initialized).
		so.InitializedHandler = func(_ context.Context, req *mcp.InitializedRequest) {
			go t.followChannel(req.Session, since)
			if ch.PermissionLine != "" {
				go ch.followAnswers(req.Session, since)
			}
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "blueline", Title: "Blueline", Version: opts.Version}, so)
	if push != nil {
		push.srv = s
		s.AddReceivingMiddleware(push.recorded)
		s.AddSendingMiddleware(push.acknowledged)
	}
	s.AddReceivingMiddleware(checkBounds)
	t.add(s)
	t.addLines(s)
	t.addApprovals(s)
	t.addChanges(s)
	t.addGroups(s)
	t.addAvailability(s)
	t.addNeedReply(s)
	t.addDiagnose(s)
	t.addSearch(s)
	t.addPush(s)
	t.addBlocked(s)
	return s
}

// instructions is what an MCP client may show its model about the server
// as a whole: the rules every tool is held to.
func instructions(opts Options) string {
	return "Blueline sends and receives iMessage/SMS texts through lines (phone numbers or account handles). " +
		"Typical loop: list_lines, list_chats, read_messages, then send_message and wait_for_message (pass its cursor along). " +
		untrustedNote + " " + rules(opts)
}

// rules states the contact-first rule and the pace an agent must keep.
func rules(opts Options) string {
	perHour := "1000 requests an hour by default"
	if opts.RequestsPerHour > 0 {
		perHour = fmt.Sprintf("%d requests an hour", opts.RequestsPerHour)
	}
	quota := "50 by default"
	if opts.SandboxQuota > 0 {
		quota = fmt.Sprintf("%d", opts.SandboxQuota)
	}
	return "Contact-first: a line may only message a contact (or a group) that has written to it first; " +
		"otherwise the send is refused with contact_has_not_messaged. The sandbox line is the exception once paired: " +
		"it may message only its owner's paired phone. " +
		"Pace: every tool call is an API request, limited per key (" + perHour + ", then rate_limit_exceeded with a wait); " +
		"the sandbox line accepts at most " + quota + " messages per owner per UTC day (sandbox_quota_exceeded). " +
		"A chat's messages go out one at a time, in order. Write like a person: one message per turn, answer what the contact wrote, " +
		"never repeat a message or send unprompted bursts."
}

type tools struct{ opts Options }

// client is the API client of a request, given its extra.
func (t *tools) client(extra *mcp.RequestExtra) (*client.Client, error) {
	if t.opts.Client == nil {
		return nil, errors.New("no Blueline API client configured")
	}
	return t.opts.Client(extra)
}

// apiError is an error as the tool's result says it: the API's code and
// message, and what to do about a limit.
func apiError(err error) error {
	e, ok := errors.AsType[*client.Error](err)
	if !ok {
		return err
	}
	var b strings.Builder
	if e.Code != "" {
		fmt.Fprintf(&b, "%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	} else {
		fmt.Fprintf(&b, "HTTP %d: %s", e.Status, e.Message)
	}
	if e.Param != "" {
		fmt.Fprintf(&b, " (parameter %s)", e.Param)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " Wait %s before trying again; do not retry sooner.", e.RetryAfter.Round(time.Second))
	}
	return errors.New(b.String())
}

// Line is a line as the tools show it.
type Line = api.Line

// Chat is a chat as the tools show it.
type Chat = api.Chat

// Outbox is a write on its way out: an outbox item without its payload.
type Outbox struct {
	ID          string  `json:"id" jsonschema:"the outbox item ID (obx_…): pass it to get_outbox_item"`
	LineID      string  `json:"line_id"`
	Status      string  `json:"status" jsonschema:"pending, claimed, sent or failed"`
	Error       *string `json:"error" jsonschema:"why it failed, or the last error of a retried attempt"`
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	CreatedAt   int64   `json:"created_at" jsonschema:"Unix milliseconds"`
	CompletedAt *int64  `json:"completed_at" jsonschema:"Unix milliseconds, when it was sent or failed"`
	Replayed    bool    `json:"replayed,omitempty" jsonschema:"true when an earlier call with the same idempotency_key was answered and nothing was sent again"`
	ChatID      *string `json:"chat_id,omitempty" jsonschema:"the chat it acts in; for create_group, the new group's once the network has created it"`
	SendAt      *int64  `json:"send_at,omitempty" jsonschema:"Unix milliseconds: when a scheduled send falls due"`
	// Approval and ApprovalExpiresAt are a draft's (approvals.go).
	Approval          string `json:"approval,omitempty" jsonschema:"waiting: a draft the line's owner must approve before it is sent (wait_for_outbox_item tells the outcome); approved, declined or expired once answered; absent when no approval was needed"`
	ApprovalExpiresAt int64  `json:"approval_expires_at,omitempty" jsonschema:"Unix milliseconds, when a waiting draft expires"`
}

func outboxOf(item *api.OutboxItem, replayed bool) Outbox {
	out := Outbox{ID: item.ID, LineID: item.LineID, Status: item.Status, Error: item.Error, Attempts: item.Attempts,
		MaxAttempts: item.MaxAttempts, CreatedAt: item.CreatedAt, CompletedAt: item.CompletedAt, Replayed: replayed,
		ChatID: item.ChatID, SendAt: item.SendAt}
	if item.Approval != nil {
		out.Approval = *item.Approval
	}
	if item.ApprovalExpiresAt != nil {
		out.ApprovalExpiresAt = *item.ApprovalExpiresAt
	}
	return out
}

// Tool inputs and outputs.
type (
	ListLinesInput  struct{}
	ListLinesOutput struct {
		Lines []Line `json:"lines"`
	}

	ListChatsInput struct {
		Line   string `json:"line" jsonschema:"the line: its handle or ln_ ID, as list_lines shows it"`
		Limit  int    `json:"limit,omitempty" jsonschema:"how many chats"`
		Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous call, for the next page"`
	}
	ListChatsOutput struct {
		Chats      []Chat `json:"chats" jsonschema:"most recent message first"`
		NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass as cursor for more; absent on the last page"`
	}

	ReadMessagesInput struct {
		Line   string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat   string `json:"chat" jsonschema:"the chat: the contact's handle (e.g. +15551230001) or a cht_ chat ID from list_chats"`
		Limit  int    `json:"limit,omitempty" jsonschema:"how many of the most recent messages"`
		Before string `json:"before,omitempty" jsonschema:"older_cursor of the previous call, for older messages"`
	}
	ReadMessagesOutput struct {
		Messages    []Message `json:"messages" jsonschema:"oldest first; is_from_me is true for the line's own messages"`
		OlderCursor string    `json:"older_cursor,omitempty" jsonschema:"pass as before for older messages; absent when there are none"`
		WaitCursor  string    `json:"wait_cursor" jsonschema:"pass as cursor to wait_for_message so that nothing arriving after this read is missed"`
	}

	SendMessageInput struct {
		Line           string `json:"line" jsonschema:"the sending line: its handle or ln_ ID"`
		To             string `json:"to" jsonschema:"the contact's handle or a cht_ chat ID (groups)"`
		Text           string `json:"text,omitempty" jsonschema:"the text; required unless attachment is given"`
		Attachment     string `json:"attachment,omitempty" jsonschema:"one file to attach: a file_ ID already uploaded, an http(s) URL the server fetches, or (only when the server allows it) a local file path"`
		ReplyTo        string `json:"reply_to,omitempty" jsonschema:"answer a message of the same chat: its msg_ ID or GUID"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request sends nothing twice (24 hours)"`
		SendAt         string `json:"send_at,omitempty" jsonschema:"schedule the send: an RFC 3339 time with its offset (e.g. 2026-05-01T09:30:00+02:00), up to 30 days ahead; omitted sends at once. cancel_outbox_item cancels it until then"`
	}

	ReactInput struct {
		Line      string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat      string `json:"chat" jsonschema:"the chat: the contact's handle or a cht_ chat ID"`
		MessageID string `json:"message_id" jsonschema:"the message to react to: its msg_ ID or GUID"`
		Type      string `json:"type,omitempty" jsonschema:"the tapback: one of the six classic ones, emoji (with emoji), or one emoji itself (e.g. 🎉), which is the emoji tapback of that emoji"`
		Emoji     string `json:"emoji,omitempty" jsonschema:"an emoji tapback: exactly one emoji (e.g. 🎉 or 👍🏽); type may then be omitted. Needs the line's emoji_reactions capability (see list_lines) and an iMessage chat"`
		Remove    bool   `json:"remove,omitempty" jsonschema:"take the line's tapback of this type back"`
	}

	TypingInput struct {
		Line  string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat  string `json:"chat" jsonschema:"the chat: the contact's handle or a cht_ chat ID"`
		State string `json:"state,omitempty" jsonschema:"on (default) shows the typing indicator, off hides it"`
	}

	MarkReadInput struct {
		Line string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat string `json:"chat" jsonschema:"the chat: the contact's handle or a cht_ chat ID"`
	}

	GetOutboxInput struct {
		ID string `json:"id" jsonschema:"the outbox item ID (obx_…) a send, react, set_typing or mark_read returned"`
	}

	WaitInput struct {
		Line            string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat            string `json:"chat,omitempty" jsonschema:"the chat: the contact's handle or a cht_ chat ID; omitted waits for any chat of the line"`
		TimeoutSeconds  *int   `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for a message, in seconds; 0 does not wait: it answers at once with a message already there after the cursor, or timed_out"`
		Cursor          string `json:"cursor,omitempty" jsonschema:"the cursor of the previous wait_for_message, or the wait_cursor of read_messages: the wait then starts where that call left off, so no message is missed in between; omitted starts now"`
		IncludeCatchUp  bool   `json:"include_catch_up,omitempty" jsonschema:"also return messages Blueline read late (the daemon was down, the Mac offline); by default only live ones"`
		IncludeFiltered bool   `json:"include_filtered,omitempty" jsonschema:"also return messages of chats Messages files under a filter (unknown senders); by default only known senders'"`
	}
	WaitOutput struct {
		Message  *Message `json:"message,omitempty" jsonschema:"the contact's new message; absent when the wait timed out"`
		Arrival  string   `json:"arrival,omitempty" jsonschema:"live, or catch_up for a message read or handed over late"`
		TimedOut bool     `json:"timed_out" jsonschema:"true when no message came in time"`
		Cursor   string   `json:"cursor" jsonschema:"pass to the next wait_for_message"`
	}
)

// intRange is an integer argument's bounds and default.
type intRange struct{ min, max, def int }

// bounded are the tools' integer arguments that have bounds, by tool and
// argument: the API's for a page, the wait's own for a timeout.
var bounded = map[string]map[string]intRange{
	"list_chats":            {"limit": {1, maxLimit, defaultLimit}},
	"list_blocked":          {"limit": {1, maxLimit, defaultLimit}},
	"chats_needing_reply":   {"limit": {1, maxLimit, defaultLimit}},
	"search_messages":       {"limit": {1, maxLimit, defaultLimit}},
	"read_messages":         {"limit": {1, maxLimit, defaultLimit}},
	"wait_for_message":      {"timeout_seconds": {0, MaxWaitSeconds, DefaultWaitSeconds}},
	"wait_for_outbox_item":  {"timeout_seconds": {0, MaxWaitSeconds, DefaultWaitSeconds}},
	"wait_for_self_message": {"timeout_seconds": {0, MaxWaitSeconds, DefaultWaitSeconds}},
}

// check refuses a value out of r, in words an agent can act on.
func (r intRange) check(name string, raw json.RawMessage) error {
	var n float64
	if json.Unmarshal(raw, &n) != nil || n != math.Trunc(n) || n < float64(r.min) || n > float64(r.max) {
		return fmt.Errorf("%s must be an integer from %d to %d (default %d), not %s", name, r.min, r.max, r.def, raw)
	}
	return nil
}

// checkBounds answers a tool call with an argument out of its bounds with
// a plain tool error ("limit must be an integer from 1 to 100 …"), before
// the SDK's schema validation would in its own words.
func checkBounds(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		var args map[string]json.RawMessage
		if ok && json.Unmarshal(p.Arguments, &args) == nil {
			for _, name := range slices.Sorted(maps.Keys(bounded[p.Name])) {
				if raw, ok := args[name]; ok && string(raw) != "null" {
					if err := bounded[p.Name][name].check(name, raw); err != nil {
						var res mcp.CallToolResult
						res.SetError(err)
						return &res, nil
					}
				}
			}
		}
		return next(ctx, method, req)
	}
}

// inputSchema infers the schema of tool's input T, states its bounds, and
// lets adjust state what else inference cannot (values), so that a client
// sees the checks the tool makes before it calls.
func inputSchema[T any](tool string, adjust func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err) // the tool types are fixed: a failure is a bug
	}
	for name, r := range bounded[tool] {
		p := s.Properties[name]
		p.Minimum, p.Maximum = new(float64(r.min)), new(float64(r.max))
		p.Default = json.RawMessage(strconv.Itoa(r.def))
		p.Description += fmt.Sprintf(", %d to %d (default %d)", r.min, r.max, r.def)
	}
	if adjust != nil {
		adjust(s.Properties)
	}
	return s
}

// oneEmojiPattern admits what may be one emoji, as the API's own check
// (exactly one emoji) refines: a keycap, or characters outside printable
// ASCII, so that a word such as "wow" is refused by the schema already.
const oneEmojiPattern = "^([0-9#*]\uFE0F?\u20E3|[^ -~]+)$"

func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
}

func writes() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(true)}
}

func (t *tools) add(s *mcp.Server) {
	r := rules(t.opts)
	mcp.AddTool(s, &mcp.Tool{Name: "list_lines", Annotations: readOnly(),
		Description: "List the lines this key may use (the sandbox line included): each line's handle is what the other tools take as line. " +
			"capabilities tells, per feature (reactions, emoji_reactions, typing, receipts, …), whether it works now and if not why; " +
			"the " + linesURI + " resource says the same as which tools work on which line."}, t.listLines)
	mcp.AddTool(s, &mcp.Tool{Name: "list_chats", Annotations: readOnly(), InputSchema: inputSchema[ListChatsInput]("list_chats", nil),
		Description: "List a line's chats, most recent first. has_received_inbound tells whether the contact has written first, " +
			"which a send needs (contact-first rule). " + untrustedNote}, t.listChats)
	mcp.AddTool(s, &mcp.Tool{Name: "read_messages", Annotations: readOnly(), InputSchema: inputSchema[ReadMessagesInput]("read_messages", nil),
		Description: "Read a chat's most recent messages, oldest first. is_from_me is true for the line's own. " +
			"Pass wait_cursor to wait_for_message to be told of anything arriving after this read. " + untrustedNote}, t.readMessages)
	mcp.AddTool(s, &mcp.Tool{Name: "send_message", Annotations: writes(),
		Description: "Send a text message (optionally one attachment, optionally as a reply) from a line. " +
			"The answer is an outbox item, pending: delivery is asynchronous (get_outbox_item tells when it is sent). " +
			"On a line or key that requires the owner's approval, the answer says approval: waiting: a draft, not sent until the owner approves it " +
			"(wait_for_outbox_item tells the outcome). " + r}, t.sendMessage)
	mcp.AddTool(s, &mcp.Tool{Name: "react", Annotations: writes(),
		InputSchema: inputSchema[ReactInput]("react", func(p map[string]*jsonschema.Schema) {
			p["type"].AnyOf = []*jsonschema.Schema{
				{Enum: []any{"love", "like", "dislike", "laugh", "emphasize", "question", "emoji"}}, {Pattern: oneEmojiPattern}}
			p["emoji"].Pattern = oneEmojiPattern
		}),
		Description: "Add (or remove) a tapback on a message of a chat: a classic one (type), or an emoji tapback (emoji, e.g. 🎉). " +
			"Needs a line with advanced features (emoji tapbacks: the emoji_reactions capability). " +
			"Follows the same contact-first rule and limits as send_message, but does not count against the sandbox quota."}, t.react)
	mcp.AddTool(s, &mcp.Tool{Name: "set_typing", Annotations: writes(),
		InputSchema: inputSchema[TypingInput]("set_typing", func(p map[string]*jsonschema.Schema) { p["state"].Enum = []any{"on", "off"} }),
		Description: "Show or hide the line's typing indicator in a chat, e.g. while composing a long answer. " +
			"Needs a line with advanced features; contact-first applies."}, t.setTyping)
	mcp.AddTool(s, &mcp.Tool{Name: "mark_read", Annotations: writes(),
		Description: "Mark a chat read (the contact sees a read receipt). Needs a line with advanced features; contact-first applies."}, t.markRead)
	mcp.AddTool(s, &mcp.Tool{Name: "get_outbox_item", Annotations: readOnly(),
		Description: "Check a send (or reaction, typing, read receipt) on its way out: pending, claimed, sent or failed (with the error). " +
			"Do not poll it in a tight loop: every call counts against the key's request limit."}, t.getOutbox)
	mcp.AddTool(s, &mcp.Tool{Name: "wait_for_message", Annotations: readOnly(),
		InputSchema: inputSchema[WaitInput]("wait_for_message", nil),
		Description: "Wait for the next message a contact writes in a chat (or in any chat of the line), up to timeout_seconds (0: do not wait, only check). " +
			"Only messages contacts wrote are returned, never the line's own; by default only live ones of known senders " +
			"(include_catch_up, include_filtered for more). Pass the cursor of the previous call " +
			"(or read_messages' wait_cursor) so nothing that arrived between calls is missed. On timed_out, wait again or stop; " +
			"answering is up to you, once per message. Needs a key with the webhooks:read and messages:read scopes (it follows the API's event stream, one of the key's few streams while it waits). " + untrustedNote}, t.wait)
	t.addSelfChat(s)
}

func (t *tools) listLines(ctx context.Context, req *mcp.CallToolRequest, _ ListLinesInput) (*mcp.CallToolResult, ListLinesOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, ListLinesOutput{}, err
	}
	lines, err := c.Lines.List(ctx)
	if err != nil {
		return nil, ListLinesOutput{}, apiError(err)
	}
	if lines == nil {
		lines = []Line{}
	}
	return nil, ListLinesOutput{Lines: lines}, nil
}

// listChats and readMessages take in.Limit as it comes: in its bounds
// (checkBounds), or absent and then the schema's default, which the SDK
// fills in.
func (t *tools) listChats(ctx context.Context, req *mcp.CallToolRequest, in ListChatsInput) (*mcp.CallToolResult, ListChatsOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, ListChatsOutput{}, err
	}
	page, err := c.Chats.ListPage(ctx, client.ChatListParams{From: in.Line, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, ListChatsOutput{}, apiError(err)
	}
	out := ListChatsOutput{Chats: page.Data, NextCursor: client.NextCursor(page)}
	if out.Chats == nil {
		out.Chats = []Chat{}
	}
	return untrusted(out), out, nil
}

func (t *tools) readMessages(ctx context.Context, req *mcp.CallToolRequest, in ReadMessagesInput) (*mcp.CallToolResult, ReadMessagesOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, ReadMessagesOutput{}, err
	}
	// The wait cursor starts before the read: what arrives during it is
	// either in the page (and skipped by the wait) or after it.
	start := t.opts.Now()
	page, err := c.Messages.ListPage(ctx, client.MessageListParams{From: in.Line, To: in.Chat, Limit: in.Limit, Cursor: in.Before})
	if err != nil {
		return nil, ReadMessagesOutput{}, apiError(err)
	}
	msgs := make([]Message, len(page.Data))
	for i, m := range page.Data {
		msgs[len(msgs)-1-i] = messageOf(m) // the API answers newest first
	}
	out := ReadMessagesOutput{Messages: msgs, OlderCursor: client.NextCursor(page), WaitCursor: readCursor(start, page.Data)}
	return untrusted(out), out, nil
}

func (t *tools) sendMessage(ctx context.Context, req *mcp.CallToolRequest, in SendMessageInput) (*mcp.CallToolResult, Outbox, error) {
	if strings.TrimSpace(in.Text) == "" && in.Attachment == "" {
		return nil, Outbox{}, errors.New("give text, an attachment, or both")
	}
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, Outbox{}, err
	}
	at, err := sendAt(in.SendAt)
	if err != nil {
		return nil, Outbox{}, err
	}
	p := client.MessageSendParams{From: in.Line, To: in.To, Text: in.Text, ReplyTo: in.ReplyTo, IdempotencyKey: in.IdempotencyKey, SendAt: at}
	if in.Attachment != "" {
		if !strings.HasPrefix(in.Attachment, "file_") && t.opts.Check != nil {
			// The upload and the send would need these.
			if err := t.opts.Check(ctx, req, "files:write", "messages:write"); err != nil {
				return nil, Outbox{}, apiError(err)
			}
		}
		id, err := t.attach(ctx, c, in.Attachment)
		if err != nil {
			return nil, Outbox{}, err
		}
		p.Attachments = []string{id}
	}
	item, err := c.Messages.Send(ctx, p)
	if err != nil {
		return nil, Outbox{}, apiError(err)
	}
	out := outboxOf(&item.OutboxItem, item.Replayed)
	res, err := waitingNote(out)
	return res, out, err
}

func (t *tools) react(ctx context.Context, req *mcp.CallToolRequest, in ReactInput) (*mcp.CallToolResult, Outbox, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, Outbox{}, err
	}
	if in.Type == "" && in.Emoji != "" {
		in.Type = client.ReactionEmoji
	}
	if in.Type == "" {
		return nil, Outbox{}, errors.New("give type (a tapback), or emoji for an emoji tapback")
	}
	item, err := c.Reactions.Send(ctx, client.ReactionSendParams{From: in.Line, To: in.Chat, MessageID: in.MessageID, Type: in.Type, Emoji: in.Emoji, Remove: in.Remove})
	if err != nil {
		return nil, Outbox{}, apiError(err)
	}
	return nil, outboxOf(&item.OutboxItem, item.Replayed), nil
}

func (t *tools) setTyping(ctx context.Context, req *mcp.CallToolRequest, in TypingInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Typing.Send(ctx, client.TypingSendParams{From: in.Line, To: in.Chat, State: in.State})
	})
}

func (t *tools) markRead(ctx context.Context, req *mcp.CallToolRequest, in MarkReadInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Receipts.Send(ctx, client.ReceiptSendParams{From: in.Line, To: in.Chat})
	})
}

func (t *tools) getOutbox(ctx context.Context, req *mcp.CallToolRequest, in GetOutboxInput) (*mcp.CallToolResult, Outbox, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, Outbox{}, err
	}
	item, err := c.Outbox.Get(ctx, in.ID)
	if err != nil {
		return nil, Outbox{}, apiError(err)
	}
	return nil, outboxOf(item, false), nil
}
