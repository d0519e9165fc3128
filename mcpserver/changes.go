package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
)

// Tool inputs of the changes to a message on its way or sent.
type (
	EditMessageInput struct {
		Line           string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		MessageID      string `json:"message_id" jsonschema:"the line's own message to edit: its msg_ ID or GUID"`
		Text           string `json:"text" jsonschema:"the new text"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request does nothing twice (24 hours)"`
	}

	UnsendMessageInput struct {
		Line           string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		MessageID      string `json:"message_id" jsonschema:"the line's own message to take back: its msg_ ID or GUID"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request does nothing twice (24 hours)"`
	}

	CancelOutboxInput struct {
		ID string `json:"id" jsonschema:"the pending outbox item (obx_…) to cancel, e.g. a send scheduled with send_at"`
	}
)

func (t *tools) addChanges(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "edit_message", Annotations: writes(),
		Description: "Replace the text of a message the line sent (within 15 minutes of sending, at most 5 edits; iMessage only). " +
			"Needs the line's edit capability (see list_lines). The answer is the edit's outbox item; the message's text changes when the network records it."},
		t.editMessage)
	mcp.AddTool(s, &mcp.Tool{Name: "unsend_message", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)},
		Description: "Take back a message the line sent (within 2 minutes of sending; iMessage only): the contact's copy disappears. " +
			"Needs the line's unsend capability (see list_lines). The answer is the unsend's outbox item."},
		t.unsendMessage)
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_outbox_item", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)},
		Description: "Cancel a write still pending — a send scheduled with send_at, or one waiting for a retry or its line's pace: " +
			"it ends failed with error canceled and is never sent. An item no longer pending cannot be cancelled (outbox_item_not_pending)."},
		t.cancelOutbox)
}

func (t *tools) editMessage(ctx context.Context, req *mcp.CallToolRequest, in EditMessageInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Messages.Edit(ctx, client.MessageEditParams{From: in.Line, MessageID: in.MessageID, Text: in.Text, IdempotencyKey: in.IdempotencyKey})
	})
}

func (t *tools) unsendMessage(ctx context.Context, req *mcp.CallToolRequest, in UnsendMessageInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Messages.Unsend(ctx, client.MessageUnsendParams{From: in.Line, MessageID: in.MessageID, IdempotencyKey: in.IdempotencyKey})
	})
}

func (t *tools) cancelOutbox(ctx context.Context, req *mcp.CallToolRequest, in CancelOutboxInput) (*mcp.CallToolResult, Outbox, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, Outbox{}, err
	}
	item, err := c.Outbox.Cancel(ctx, in.ID)
	if err != nil {
		return nil, Outbox{}, apiError(err)
	}
	return nil, outboxOf(item, false), nil
}

// write makes one of the API's writes that answer an outbox item.
func (t *tools) write(req *mcp.CallToolRequest, do func(c *client.Client) (*client.Accepted, error)) (*mcp.CallToolResult, Outbox, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, Outbox{}, err
	}
	item, err := do(c)
	if err != nil {
		return nil, Outbox{}, apiError(err)
	}
	return nil, outboxOf(&item.OutboxItem, item.Replayed), nil
}

// sendAt is send_message's send_at, an RFC 3339 time (models write times,
// not Unix milliseconds), as the API takes it: Unix ms, 0 for at once.
func sendAt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("send_at must be an RFC 3339 time with its offset, e.g. 2026-05-01T09:30:00+02:00, not %q", s)
	}
	return at.UnixMilli(), nil
}
