package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/blueline-app/blueline/client/api"
)

// LineService reads the lines (GET /v1/lines).
type LineService struct{ c *Client }

// List returns every line the key may use, the sandbox line included. The
// server never pages lines.
func (s *LineService) List(ctx context.Context) ([]api.Line, error) {
	var page api.List[api.Line]
	if err := s.c.get(ctx, "/v1/lines", nil, &page); err != nil {
		return nil, err
	}
	return page.Data, nil
}

// ChatService reads a line's chats (GET /v1/chats) and leases them.
type ChatService struct{ c *Client }

// ChatListParams selects a line's chats.
type ChatListParams struct {
	From   string // the line: its handle or ln_ ID (required)
	Limit  int    // page size, 1–100; 0 is the server's default (50)
	Cursor string // where to start: a page's next cursor; "" for the first page
}

func (p ChatListParams) query() url.Values {
	return query("from", p.From, "limit", limitString(p.Limit), "cursor", p.Cursor)
}

// List iterates over the line's chats, most recent message first, fetching
// pages as it goes. An error ends the iteration.
func (s *ChatService) List(ctx context.Context, p ChatListParams) iter.Seq2[api.Chat, error] {
	return paginate(p.Cursor, func(cursor string) (*api.List[api.Chat], error) {
		p.Cursor = cursor
		return s.ListPage(ctx, p)
	})
}

// ListPage returns one page of the line's chats; NextCursor(page) is where
// the next one starts.
func (s *ChatService) ListPage(ctx context.Context, p ChatListParams) (*api.List[api.Chat], error) {
	var page api.List[api.Chat]
	if err := s.c.get(ctx, "/v1/chats", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// MessageService reads and sends messages (GET and POST /v1/messages).
type MessageService struct{ c *Client }

// MessageListParams selects a chat's messages.
type MessageListParams struct {
	From   string // the line: its handle or ln_ ID (required)
	To     string // the chat: a contact's handle, a cht_ ID or a group's identifier (required)
	Limit  int    // page size, 1–100; 0 is the server's default (50)
	Cursor string // where to start: a page's next cursor; "" for the first page
}

func (p MessageListParams) query() url.Values {
	return query("from", p.From, "to", p.To, "limit", limitString(p.Limit), "cursor", p.Cursor)
}

// List iterates over the chat's messages, most recent first, fetching pages
// as it goes. An error ends the iteration.
func (s *MessageService) List(ctx context.Context, p MessageListParams) iter.Seq2[api.Message, error] {
	return paginate(p.Cursor, func(cursor string) (*api.List[api.Message], error) {
		p.Cursor = cursor
		return s.ListPage(ctx, p)
	})
}

// ListPage returns one page of the chat's messages; NextCursor(page) is
// where the next one starts.
func (s *MessageService) ListPage(ctx context.Context, p MessageListParams) (*api.List[api.Message], error) {
	var page api.List[api.Message]
	if err := s.c.get(ctx, "/v1/messages", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// MessageSendParams is a message to send: text, one attachment, or both.
type MessageSendParams struct {
	From        string   `json:"from"`                  // the line (required)
	To          string   `json:"to"`                    // a contact's handle or a cht_ chat ID (required)
	Text        string   `json:"text,omitempty"`        // required unless Attachments is set
	Attachments []string `json:"attachments,omitempty"` // at most one file_ ID (Files.Upload)
	ReplyTo     string   `json:"reply_to,omitempty"`    // a msg_ ID or message GUID of the same chat
	// SendAt schedules the send (Unix ms, up to 30 days ahead); 0 sends
	// at once. The item stays pending until then (Outbox.Cancel).
	SendAt int64 `json:"send_at,omitempty"`

	// IdempotencyKey, when set, makes a retry with the same key and the
	// same request answer the first outbox item instead of sending again
	// (for 24 hours).
	IdempotencyKey string `json:"-"`
}

// Send queues a message; the answer is its outbox item, pending (see
// Outbox.Get).
func (s *MessageService) Send(ctx context.Context, p MessageSendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/messages", p, p.IdempotencyKey)
}

// Accepted is the answer to a write: the outbox item that carries it.
type Accepted struct {
	api.OutboxItem
	// Replayed is true when the server answered an earlier request with
	// the same IdempotencyKey (Idempotent-Replayed: true) and sent nothing
	// again.
	Replayed bool `json:"-"`
}

// write posts one of the writes that answer an outbox item.
func (c *Client) write(ctx context.Context, path string, body any, idem string) (*Accepted, error) {
	var out Accepted
	h, err := c.do(ctx, request{method: http.MethodPost, path: path, json: body, idem: idem}, &out)
	if err != nil {
		return nil, err
	}
	out.Replayed = h.Get("Idempotent-Replayed") == "true"
	return &out, nil
}

// AudioMessageService sends native audio messages (POST /v1/audio-messages).
type AudioMessageService struct{ c *Client }

// AudioMessageSendParams is an audio message to send; the line needs
// advanced features.
type AudioMessageSendParams struct {
	From         string `json:"from"`               // the line (required)
	To           string `json:"to"`                 // a contact's handle or a cht_ chat ID (required)
	AudioMessage string `json:"audio_message"`      // file_ ID of an uploaded audio file (required)
	ReplyTo      string `json:"reply_to,omitempty"` // a msg_ ID or message GUID of the same chat
	SendAt       int64  `json:"send_at,omitempty"`  // see MessageSendParams

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Send queues an audio message; the answer is its outbox item.
func (s *AudioMessageService) Send(ctx context.Context, p AudioMessageSendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/audio-messages", p, p.IdempotencyKey)
}

// VoiceNoteService sends native audio messages under the reference
// service's other name for them (POST /v1/voice-notes).
type VoiceNoteService struct{ c *Client }

// VoiceNoteSendParams is AudioMessageSendParams with the audio field named
// voice_note.
type VoiceNoteSendParams struct {
	From      string `json:"from"`
	To        string `json:"to"`
	VoiceNote string `json:"voice_note"` // file_ ID of an uploaded audio file (required)
	ReplyTo   string `json:"reply_to,omitempty"`
	SendAt    int64  `json:"send_at,omitempty"` // see MessageSendParams

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Send queues a voice note; the answer is its outbox item.
func (s *VoiceNoteService) Send(ctx context.Context, p VoiceNoteSendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/voice-notes", p, p.IdempotencyKey)
}

// OutboxService reads the writes on their way out (GET /v1/outbox).
type OutboxService struct{ c *Client }

// Outbox item statuses.
const (
	StatusPending = "pending"
	StatusClaimed = "claimed"
	StatusSent    = "sent"
	StatusFailed  = "failed"
)

// Get returns an outbox item (obx_…) in its current state.
func (s *OutboxService) Get(ctx context.Context, id string) (*api.OutboxItem, error) {
	var out api.OutboxItem
	if err := s.c.get(ctx, "/v1/outbox", query("id", id), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel cancels a pending outbox item (scheduled, or waiting for a retry
// or its line's pace): it ends failed with error "canceled" and is never
// sent. An item no longer pending is a 409 outbox_item_not_pending
// (ErrInvalidRequest).
func (s *OutboxService) Cancel(ctx context.Context, id string) (*api.OutboxItem, error) {
	var out api.OutboxItem
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/outbox/cancel", json: map[string]string{"id": id}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Waiting lists the drafts of agent keys waiting for the owner's approval
// (approval "waiting"), the soonest to expire first: on line (a handle or
// ln_ ID), or on every line the key can use when line is "".
func (s *OutboxService) Waiting(ctx context.Context, line string) ([]api.OutboxItem, error) {
	var page api.List[api.OutboxItem]
	if err := s.c.get(ctx, "/v1/outbox/waiting", query("from", line), &page); err != nil {
		return nil, err
	}
	return page.Data, nil
}

// Approve sends a draft waiting for approval, with text instead of its own
// when text is not nil. A draft answered already, expired or that never
// waited is a 409 (approval_answered, approval_expired,
// outbox_item_not_waiting); an agent key's call a 403
// agent_key_forbidden.
func (s *OutboxService) Approve(ctx context.Context, id string, text *string) (*api.OutboxItem, error) {
	var out api.OutboxItem
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/outbox/approve", json: api.ApproveRequest{ID: id, Text: text}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Decline declines a draft waiting for approval: it ends failed with
// error "declined". Its errors are Approve's.
func (s *OutboxService) Decline(ctx context.Context, id string) (*api.OutboxItem, error) {
	var out api.OutboxItem
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/outbox/decline", json: map[string]string{"id": id}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func limitString(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
