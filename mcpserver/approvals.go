package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// Outcomes of wait_for_outbox_item.
const (
	outcomeSent     = "sent"
	outcomeFailed   = "failed"
	outcomeDeclined = "declined"
	outcomeExpired  = "expired"
	outcomeTimedOut = "timed_out"
)

// outboxPollEvery is how often wait_for_outbox_item reads the item: an
// item's outcome has no event of its own (a draft declined or expired
// never reaches the network), and a second is far below a human's answer
// or a send's time.
const outboxPollEvery = time.Second

type (
	WaitOutboxInput struct {
		ID             string `json:"id" jsonschema:"the outbox item ID (obx_…) send_message or another write returned"`
		TimeoutSeconds *int   `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the outcome, in seconds; 0 only checks"`
	}
	WaitOutboxOutput struct {
		Outcome string `json:"outcome" jsonschema:"sent; failed (see item.error); declined (the owner declined the draft); expired (no one approved the draft in time); timed_out (still pending or waiting for approval: wait again)"`
		Item    Outbox `json:"item"`
	}
)

func (t *tools) addApprovals(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "wait_for_outbox_item", Annotations: readOnly(),
		InputSchema: inputSchema[WaitOutboxInput]("wait_for_outbox_item", nil),
		Description: "Wait, up to timeout_seconds, for the outcome of a write: sent, failed, or, for a draft waiting for the owner's approval " +
			"(send_message answered approval: waiting), declined or expired. On timed_out, wait again or move on; do not send the text again: " +
			"a draft is sent once the owner approves it, in their words if they changed it."}, t.waitOutbox)
}

func (t *tools) waitOutbox(ctx context.Context, req *mcp.CallToolRequest, in WaitOutboxInput) (*mcp.CallToolResult, WaitOutboxOutput, error) {
	seconds := DefaultWaitSeconds
	if in.TimeoutSeconds != nil {
		seconds = *in.TimeoutSeconds // in its bounds (checkBounds)
	}
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, WaitOutboxOutput{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer cancel()
	tick := time.NewTicker(outboxPollEvery)
	defer tick.Stop()
	for {
		item, err := c.Outbox.Get(ctx, in.ID)
		if err != nil && ctx.Err() == nil {
			return nil, WaitOutboxOutput{}, apiError(err)
		}
		if err == nil {
			if o := outcomeOf(item); o != "" || seconds == 0 {
				return nil, WaitOutboxOutput{Outcome: cmp.Or(o, outcomeTimedOut), Item: outboxOf(item, false)}, nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			item, err := c.Outbox.Get(context.WithoutCancel(ctx), in.ID)
			if err != nil {
				return nil, WaitOutboxOutput{}, apiError(err)
			}
			return nil, WaitOutboxOutput{Outcome: cmp.Or(outcomeOf(item), outcomeTimedOut), Item: outboxOf(item, false)}, nil
		case <-t.opts.Done: // nil never is
			return nil, WaitOutboxOutput{}, ErrShuttingDown
		}
	}
}

// outcomeOf is an item's outcome, "" while it has none.
func outcomeOf(item *api.OutboxItem) string {
	switch {
	case item.Status == client.StatusSent:
		return outcomeSent
	case item.Status != client.StatusFailed:
		return ""
	case item.Approval != nil && *item.Approval == api.ApprovalExpired:
		return outcomeExpired
	case item.Approval != nil && *item.Approval == api.ApprovalDeclined:
		return outcomeDeclined
	}
	return outcomeFailed
}

// waitingNote is the answer to a write that became a draft: the model is
// told in words, beside the item, that it is not sent yet.
func waitingNote(out Outbox) (*mcp.CallToolResult, error) {
	if out.Approval != api.ApprovalWaiting {
		return nil, nil
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	until := time.UnixMilli(out.ApprovalExpiresAt).UTC().Format(time.RFC3339)
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: fmt.Sprintf("Waiting for approval: outbox item %s is a draft the line's owner must approve before it is sent (until %s). "+
			"Call wait_for_outbox_item with id %s to learn whether it was sent, declined or expired; do not send it again.", out.ID, until, out.ID)},
		&mcp.TextContent{Text: string(data)},
	}}, nil
}
