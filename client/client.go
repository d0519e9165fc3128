// Package client is a typed Go client of Blueline's HTTP API (/v1), the
// same API the reference service's official SDK speaks: lines, chats,
// messages, audio messages, files, reactions, typing indicators, read
// receipts, the outbox, webhooks and the sandbox; and Blueline's own
// additions: edits and unsends, group chats, iMessage availability and
// blocked contacts. It
// also verifies and signs webhook deliveries (VerifyWebhook, SignWebhook).
//
//	c := client.New("https://blueline.example.com", client.WithAPIKey(key))
//	item, err := c.Messages.Send(ctx, client.MessageSendParams{From: line, To: "+15551230001", Text: "hi"})
//	for msg, err := range c.Messages.List(ctx, client.MessageListParams{From: line, To: "+15551230001"}) {
//		...
//	}
//
// Errors from the API are *Error, which errors.Is matches against
// ErrNotFound, ErrAuthentication, ErrPermission, ErrRateLimit and
// ErrInvalidRequest. The client never retries by itself: a write may be
// retried safely with the same IdempotencyKey.
//
// Optional fields of what the API answers are pointers: a message's Text
// is nil when it has no text (a file, a voice memo), as the API's null.
//
// Events.Stream follows the event stream without a webhook (scope
// webhooks:read, and messages:read for the message events). It yields a
// network error without ending: the loop goes on and the stream resumes
// from the last event it yielded; an API error is the last thing it
// yields (see the Stream example).
//
// The JSON shapes are package api's (github.com/blueline-app/blueline/client/api).
// This module imports nothing of the daemon, and needs only the Go its
// go.mod names (1.23), older than the daemon's.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client is a client of one Blueline server. It is safe for concurrent use.
type Client struct {
	Lines         *LineService
	Chats         *ChatService
	Messages      *MessageService
	AudioMessages *AudioMessageService
	VoiceNotes    *VoiceNoteService
	Files         *FileService
	Reactions     *ReactionService
	Typing        *TypingService
	Receipts      *ReceiptService
	Outbox        *OutboxService
	Webhooks      *WebhookService
	Sandbox       *SandboxService
	Events        *EventService
	Groups        *GroupService
	Availability  *AvailabilityService
	Blocked       *BlockedService
	OptedOut      *OptedOutService

	base       string
	apiKey     string
	userAgent  string
	httpc      *http.Client
	noRedirect *http.Client
}

// DefaultUserAgent is the User-Agent sent unless WithUserAgent sets another.
const DefaultUserAgent = "blueline-go-client/1"

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as the bearer token of every request. Without it no
// Authorization header is sent (as over the daemon's local socket).
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient makes requests through hc (its transport, timeout, proxy),
// for example one that dials a Unix socket. The client is not modified.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.httpc = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the server at baseURL (scheme, host and any path
// prefix, without /v1). Requests are made with http.DefaultClient unless
// WithHTTPClient says otherwise; bound them with the context of each call.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), userAgent: DefaultUserAgent, httpc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	// GET /v1/files answers a redirect that the client reports rather
	// than follows: a copy of the HTTP client that stops at it.
	nr := *c.httpc
	nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.noRedirect = &nr
	c.Lines = &LineService{c}
	c.Chats = &ChatService{c}
	c.Messages = &MessageService{c}
	c.AudioMessages = &AudioMessageService{c}
	c.VoiceNotes = &VoiceNoteService{c}
	c.Files = &FileService{c}
	c.Reactions = &ReactionService{c}
	c.Typing = &TypingService{c}
	c.Receipts = &ReceiptService{c}
	c.Outbox = &OutboxService{c}
	c.Webhooks = &WebhookService{c}
	c.Sandbox = &SandboxService{c}
	c.Events = &EventService{c}
	c.Groups = &GroupService{c}
	c.Availability = &AvailabilityService{c}
	c.Blocked = &BlockedService{c}
	c.OptedOut = &OptedOutService{c}
	return c
}

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	json   any       // encoded as the JSON body when non-nil
	body   io.Reader // a raw body, when json is nil
	header http.Header
	idem   string // Idempotency-Key
}

// newRequest builds the HTTP request of r.
func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	body := r.body
	if r.json != nil {
		data, err := json.Marshal(r.json)
		if err != nil {
			return nil, fmt.Errorf("blueline: encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("blueline: %w", err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.json != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if r.idem != "" {
		req.Header.Set("Idempotency-Key", r.idem)
	}
	return req, nil
}

// do makes an API call and decodes a 2xx answer's JSON into out (unless
// nil); any other answer is an *Error. It returns the answer's header.
func (c *Client) do(ctx context.Context, r request, out any) (http.Header, error) {
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.Header, ResponseError(resp)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.Header, fmt.Errorf("blueline: decode %s %s answer: %w", r.method, r.path, err)
		}
	}
	return resp.Header, nil
}

// get is do for a GET with a query.
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
	return err
}

// query builds a url.Values from name, value pairs, leaving out empty values.
func query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}
