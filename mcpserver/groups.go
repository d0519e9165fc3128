package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
)

// Tool inputs of group chats.
type (
	CreateGroupInput struct {
		Line           string   `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Participants   []string `json:"participants" jsonschema:"the other members' handles, 2 to 31, each a contact who has written to the line"`
		Name           string   `json:"name,omitempty" jsonschema:"the group's name; omitted leaves it unnamed"`
		Text           string   `json:"text" jsonschema:"the first message"`
		IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request creates nothing twice (24 hours)"`
	}

	RenameGroupInput struct {
		Line           string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat           string `json:"chat" jsonschema:"the group: its cht_ chat ID or chat… identifier"`
		Name           string `json:"name" jsonschema:"the new name; empty clears it"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request does nothing twice (24 hours)"`
	}

	GroupParticipantInput struct {
		Line           string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat           string `json:"chat" jsonschema:"the group: its cht_ chat ID or chat… identifier"`
		Handle         string `json:"handle" jsonschema:"the member's handle"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request does nothing twice (24 hours)"`
	}

	LeaveGroupInput struct {
		Line           string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Chat           string `json:"chat" jsonschema:"the group: its cht_ chat ID or chat… identifier"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"any unique string; calling again with the same key and request does nothing twice (24 hours)"`
	}
)

func (t *tools) addGroups(s *mcp.Server) {
	const needs = " Needs the line's groups capability (see list_lines); the answer is an outbox item, and the chat changes when the network records it."
	mcp.AddTool(s, &mcp.Tool{Name: "create_group", Annotations: writes(),
		Description: "Create a group chat with its first message. Every participant must have written to the line first (contact_has_not_messaged). " +
			"The outbox item's chat_id is the new group's once the network has created it (get_outbox_item)." + needs}, t.createGroup)
	mcp.AddTool(s, &mcp.Tool{Name: "rename_group", Annotations: writes(),
		Description: "Name (or, with an empty name, unname) a group chat the line is in." + needs}, t.renameGroup)
	mcp.AddTool(s, &mcp.Tool{Name: "add_group_participant", Annotations: writes(),
		Description: "Add a member, who must have written to the line, to a group chat the line is in." + needs}, t.addParticipant)
	mcp.AddTool(s, &mcp.Tool{Name: "remove_group_participant", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)},
		Description: "Remove a member from a group chat the line is in." + needs}, t.removeParticipant)
	mcp.AddTool(s, &mcp.Tool{Name: "leave_group", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)},
		Description: "Have the line leave a group chat: it can no longer send to it." + needs}, t.leaveGroup)
}

func (t *tools) createGroup(ctx context.Context, req *mcp.CallToolRequest, in CreateGroupInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Groups.Create(ctx, client.GroupCreateParams{From: in.Line, Participants: in.Participants, Name: in.Name, Text: in.Text, IdempotencyKey: in.IdempotencyKey})
	})
}

func (t *tools) renameGroup(ctx context.Context, req *mcp.CallToolRequest, in RenameGroupInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Groups.Rename(ctx, client.GroupRenameParams{From: in.Line, To: in.Chat, Name: in.Name, IdempotencyKey: in.IdempotencyKey})
	})
}

func (t *tools) addParticipant(ctx context.Context, req *mcp.CallToolRequest, in GroupParticipantInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Groups.AddParticipant(ctx, client.GroupParticipantParams{From: in.Line, To: in.Chat, Handle: in.Handle, IdempotencyKey: in.IdempotencyKey})
	})
}

func (t *tools) removeParticipant(ctx context.Context, req *mcp.CallToolRequest, in GroupParticipantInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Groups.RemoveParticipant(ctx, client.GroupParticipantParams{From: in.Line, To: in.Chat, Handle: in.Handle, IdempotencyKey: in.IdempotencyKey})
	})
}

func (t *tools) leaveGroup(ctx context.Context, req *mcp.CallToolRequest, in LeaveGroupInput) (*mcp.CallToolResult, Outbox, error) {
	return t.write(req, func(c *client.Client) (*client.Accepted, error) {
		return c.Groups.Leave(ctx, client.GroupLeaveParams{From: in.Line, To: in.Chat, IdempotencyKey: in.IdempotencyKey})
	})
}
