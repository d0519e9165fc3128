package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

type (
	ListBlockedInput struct {
		Line   string `json:"line" jsonschema:"the line: its handle or ln_ ID (not the sandbox line, which has no blocked list)"`
		Limit  int    `json:"limit,omitempty" jsonschema:"how many contacts"`
		Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous call, for the next page"`
	}
	ListBlockedOutput struct {
		Blocked    []api.BlockedContact `json:"blocked" jsonschema:"in handle order"`
		NextCursor string               `json:"next_cursor,omitempty" jsonschema:"pass as cursor for more; absent on the last page"`
	}
	BlockInput struct {
		Line   string `json:"line" jsonschema:"the line: its handle or ln_ ID (not the sandbox line)"`
		Handle string `json:"handle" jsonschema:"the contact's phone number or e-mail handle, in any common format"`
	}
	// BlockOutput is the contact's entry on the blocked list.
	BlockOutput = api.BlockedContact
	// UnblockOutput says which contact left the blocked list.
	UnblockOutput = api.UnblockedContact
)

// blockedTools work on every line but the sandbox line, which has no
// blocked list.
var blockedTools = []string{"list_blocked", "block_contact", "unblock_contact"}

func (t *tools) addBlocked(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "list_blocked", Annotations: readOnly(), InputSchema: inputSchema[ListBlockedInput]("list_blocked", nil),
		Description: "List a line's blocked contacts, in handle order. A blocked contact's messages are stored but make no event " +
			"(wait_for_message never returns them), and the line sends it nothing (contact_blocked). Needs the chats:read scope."}, t.listBlocked)
	mcp.AddTool(s, &mcp.Tool{Name: "block_contact", Annotations: writes(),
		Description: "Block a contact on a line: from then its messages, tapbacks and read receipts make no event, and every write to it " +
			"is refused (contact_blocked). Blocking a contact blocked already answers its entry as it was. Needs the messages:write scope."}, t.blockContact)
	mcp.AddTool(s, &mcp.Tool{Name: "unblock_contact", Annotations: writes(),
		Description: "Remove a contact from a line's blocked list (contact_not_blocked when it is not on it). What it sent while blocked " +
			"makes no event later. Needs the messages:write scope."}, t.unblockContact)
}

func (t *tools) listBlocked(ctx context.Context, req *mcp.CallToolRequest, in ListBlockedInput) (*mcp.CallToolResult, ListBlockedOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, ListBlockedOutput{}, err
	}
	page, err := c.Blocked.ListPage(ctx, client.BlockedListParams{From: in.Line, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, ListBlockedOutput{}, apiError(err)
	}
	out := ListBlockedOutput{Blocked: page.Data, NextCursor: client.NextCursor(page)}
	if out.Blocked == nil {
		out.Blocked = []api.BlockedContact{}
	}
	return nil, out, nil
}

func (t *tools) blockContact(ctx context.Context, req *mcp.CallToolRequest, in BlockInput) (*mcp.CallToolResult, BlockOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, BlockOutput{}, err
	}
	b, err := c.Blocked.Block(ctx, in.Line, in.Handle)
	if err != nil {
		return nil, BlockOutput{}, apiError(err)
	}
	return nil, *b, nil
}

func (t *tools) unblockContact(ctx context.Context, req *mcp.CallToolRequest, in BlockInput) (*mcp.CallToolResult, UnblockOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, UnblockOutput{}, err
	}
	u, err := c.Blocked.Unblock(ctx, in.Line, in.Handle)
	if err != nil {
		return nil, UnblockOutput{}, apiError(err)
	}
	return nil, *u, nil
}
