package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/blueline-app/blueline/client/api"
)

// FileService uploads files and hands out their download URLs (/v1/files).
type FileService struct{ c *Client }

// Upload stores body as a file named name (it may be "") of media type
// mimeType ("" is application/octet-stream; text/vcard makes a contact card,
// audio/… an audio message). The body is streamed, not held in memory. The
// answer carries the file_ ID to pass in MessageSendParams.Attachments or
// AudioMessageSendParams.AudioMessage.
func (s *FileService) Upload(ctx context.Context, name string, body io.Reader, mimeType string) (*api.File, error) {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	h := http.Header{"Content-Type": {mimeType}}
	if name != "" {
		h.Set("X-Filename", filenameHeader(name))
	}
	var out api.File
	_, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/files", body: body, header: h}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// filenameHeader writes a name as X-Filename takes it: as is when a header
// carries it intact, else UTF-8” and the percent-encoded name (RFC 8187).
func filenameHeader(name string) string {
	plain := !strings.HasPrefix(name, "UTF-8''")
	for i := 0; plain && i < len(name); i++ {
		if b := name[i]; b < 0x20 || b >= 0x7f {
			plain = false
		}
	}
	if plain && strings.TrimSpace(name) == name {
		return name
	}
	return "UTF-8''" + url.PathEscape(name)
}

// FileURL is where a file can be downloaded: a signed URL that needs no API
// key and works until it expires (an hour by default).
type FileURL struct {
	ID        string
	URL       string
	RequestID string
}

// Get returns a fresh download URL of a file (file_…). The server answers
// GET /v1/files with a redirect to it, which the client reports rather than
// follows, as the reference SDK's getFileUrl does.
func (s *FileService) Get(ctx context.Context, id string) (*FileURL, error) {
	req, err := s.c.newRequest(ctx, request{method: http.MethodGet, path: "/v1/files", query: query("id", id)})
	if err != nil {
		return nil, err
	}
	resp, err := s.c.noRedirect.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode/100 != 3 || loc == "" {
		if resp.StatusCode/100 == 2 {
			return nil, fmt.Errorf("blueline: GET /v1/files answered %d without a redirect", resp.StatusCode)
		}
		return nil, ResponseError(resp)
	}
	u, err := req.URL.Parse(loc) // a relative Location is relative to the request
	if err != nil {
		return nil, fmt.Errorf("blueline: GET /v1/files redirected to %q: %w", loc, err)
	}
	return &FileURL{ID: id, URL: u.String(), RequestID: resp.Header.Get("X-Request-Id")}, nil
}

// Download opens a file's content: Get, then the signed URL, fetched
// without the API key. The caller closes the reader.
func (s *FileService) Download(ctx context.Context, id string) (io.ReadCloser, error) {
	link, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("blueline: %w", err)
	}
	if s.c.userAgent != "" {
		req.Header.Set("User-Agent", s.c.userAgent)
	}
	resp, err := s.c.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, ResponseError(resp)
	}
	return resp.Body, nil
}

// ReactionService sends and lists tapbacks (/v1/reactions).
type ReactionService struct{ c *Client }

// The reaction types a line can send.
const (
	ReactionLove      = "love"
	ReactionLike      = "like"
	ReactionDislike   = "dislike"
	ReactionLaugh     = "laugh"
	ReactionEmphasize = "emphasize"
	ReactionQuestion  = "question"
	// ReactionEmoji is a tapback with any one emoji (ReactionSendParams.Emoji);
	// the line needs the emoji_reactions capability.
	ReactionEmoji = "emoji"
)

// ReactionSendParams is a tapback to add, or to remove; the line needs
// advanced features.
type ReactionSendParams struct {
	From      string `json:"from"`       // the line (required)
	To        string `json:"to"`         // the chat: a contact's handle or a cht_ ID (required)
	MessageID string `json:"message_id"` // a msg_ ID or message GUID in that chat (required)
	Type      string `json:"type"`       // one of the Reaction… constants (required)
	// Emoji is the one emoji of a ReactionEmoji tapback (required with
	// it, refused with the other types).
	Emoji string `json:"emoji,omitempty"`
	// Remove takes the line's reaction of that type back.
	Remove bool `json:"remove,omitempty"`

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Send queues a reaction; the answer is its outbox item.
func (s *ReactionService) Send(ctx context.Context, p ReactionSendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/reactions", p, p.IdempotencyKey)
}

// List returns every reaction record of a message (a msg_ ID or GUID),
// removed ones included (Added false), oldest change first. The server
// never pages reactions.
func (s *ReactionService) List(ctx context.Context, messageID string) ([]api.Reaction, error) {
	var page api.List[api.Reaction]
	if err := s.c.get(ctx, "/v1/reactions", query("message_id", messageID), &page); err != nil {
		return nil, err
	}
	return page.Data, nil
}

// TypingService sends and lists typing indicators (/v1/typing).
type TypingService struct{ c *Client }

// Typing states.
const (
	TypingOn  = "on"
	TypingOff = "off"
)

// TypingSendParams shows or hides the line's typing indicator in a chat;
// the line needs advanced features.
type TypingSendParams struct {
	From  string `json:"from"`            // the line (required)
	To    string `json:"to"`              // the chat: a contact's handle or a cht_ ID (required)
	State string `json:"state,omitempty"` // TypingOn (the default when "") or TypingOff

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Send queues a typing indicator; the answer is its outbox item, which is
// tried once.
func (s *TypingService) Send(ctx context.Context, p TypingSendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/typing", p, p.IdempotencyKey)
}

// ChatRef names a chat of a line, for the lists of a chat's typing
// indicators and receipts.
type ChatRef struct {
	From string // the line: its handle or ln_ ID
	To   string // the chat: a contact's handle, a cht_ ID or a group's identifier
}

// List returns the chat's current typing indicators, the line's own and its
// contacts'. The server never pages them.
func (s *TypingService) List(ctx context.Context, chat ChatRef) ([]api.Indicator, error) {
	var page api.List[api.Indicator]
	if err := s.c.get(ctx, "/v1/typing", query("from", chat.From, "to", chat.To), &page); err != nil {
		return nil, err
	}
	return page.Data, nil
}

// ReceiptService marks chats read and lists how far each member has read
// (/v1/receipts).
type ReceiptService struct{ c *Client }

// ReceiptSendParams marks a chat read; the line needs advanced features.
type ReceiptSendParams struct {
	From string `json:"from"` // the line (required)
	To   string `json:"to"`   // the chat: a contact's handle or a cht_ ID (required)

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Send queues a read receipt; the answer is its outbox item.
func (s *ReceiptService) Send(ctx context.Context, p ReceiptSendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/receipts", p, p.IdempotencyKey)
}

// List returns, per member of the chat, how far they have read, most
// recent first. The server never pages receipts.
func (s *ReceiptService) List(ctx context.Context, chat ChatRef) ([]api.Receipt, error) {
	var page api.List[api.Receipt]
	if err := s.c.get(ctx, "/v1/receipts", query("from", chat.From, "to", chat.To), &page); err != nil {
		return nil, err
	}
	return page.Data, nil
}

// WebhookService registers receivers of a line's events (/v1/webhooks).
type WebhookService struct{ c *Client }

// WebhookCreateParams is a webhook to register.
type WebhookCreateParams struct {
	From   string   `json:"from"`   // the line (required)
	URL    string   `json:"url"`    // an https:// URL (required)
	Events []string `json:"events"` // api.Event… constants, at least one (required)
	// Arrival and IncludeFiltered choose the message events it receives,
	// as EventStreamParams' do; unset means the key's default.
	Arrival         []string `json:"arrival,omitempty"`
	IncludeFiltered *bool    `json:"include_filtered,omitempty"`
}

// Create registers a webhook; the answer carries its Secret, which
// VerifyWebhook needs.
func (s *WebhookService) Create(ctx context.Context, p WebhookCreateParams) (*api.Webhook, error) {
	var out api.Webhook
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/webhooks", json: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns the line's active webhooks, secrets included. The server
// never pages them.
func (s *WebhookService) List(ctx context.Context, from string) ([]api.Webhook, error) {
	var page api.List[api.Webhook]
	if err := s.c.get(ctx, "/v1/webhooks", query("from", from), &page); err != nil {
		return nil, err
	}
	return page.Data, nil
}

// WebhookDeleted is the answer to Webhooks.Delete.
type WebhookDeleted struct {
	ID        string `json:"id"`
	Deleted   bool   `json:"deleted"`
	RequestID string `json:"request_id"`
}

// Delete removes a webhook (wh_…); its pending deliveries are dropped.
func (s *WebhookService) Delete(ctx context.Context, id string) (*WebhookDeleted, error) {
	var out WebhookDeleted
	body := struct {
		ID string `json:"id"`
	}{id}
	if _, err := s.c.do(ctx, request{method: http.MethodDelete, path: "/v1/webhooks", json: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SandboxService is the key owner's sandbox on the shared sandbox line
// (/v1/sandbox); it needs a key with an owner, whatever its scopes.
type SandboxService struct{ c *Client }

// Sandbox statuses.
const (
	SandboxMissing = "missing" // never started
	SandboxPending = "pending" // started: text ActivationCode to the sandbox line
	SandboxActive  = "active"  // paired with ContactIdentifier
)

// Get returns the sandbox's state and today's quota.
func (s *SandboxService) Get(ctx context.Context) (*api.Sandbox, error) {
	var out api.Sandbox
	if err := s.c.get(ctx, "/v1/sandbox", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Start starts the sandbox, giving it an activation code; a sandbox already
// started is answered as it is.
func (s *SandboxService) Start(ctx context.Context) (*api.Sandbox, error) {
	var out api.Sandbox
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/sandbox"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
