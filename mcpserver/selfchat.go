package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client/api"
)

// SelfWaitInput is wait_for_self_message's input: a line, and the wait's
// bounds and cursor.
type SelfWaitInput struct {
	Line           string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
	TimeoutSeconds *int   `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for a message, in seconds; 0 does not wait: it answers at once with a message already there after the cursor, or timed_out"`
	Cursor         string `json:"cursor,omitempty" jsonschema:"the cursor of the previous wait_for_self_message: the wait then starts where that call left off, so no message is missed in between; omitted starts now"`
}

// addSelfChat adds the tool of the owner's chat with themselves, the
// channel through which the owner gives an agent instructions.
func (t *tools) addSelfChat(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "wait_for_self_message", Annotations: readOnly(),
		InputSchema: inputSchema[SelfWaitInput]("wait_for_self_message", nil),
		Description: "Wait for the next message the line's owner writes in their chat with themselves (the Messages chat with their own " +
			"phone number or e-mail address), up to timeout_seconds (0: do not wait, only check). That chat is the owner's channel to you: " +
			"unlike contacts' messages, these come from the owner (untrusted: false). Your own sends into that chat (send_message to the owner's handle) " +
			"are never returned here, so answering does not make you answer yourself. Pass the cursor of the previous call so nothing " +
			"is missed between calls. Needs a key with the webhooks:read and messages:read scopes."}, t.waitSelf)
}

func (t *tools) waitSelf(ctx context.Context, req *mcp.CallToolRequest, in SelfWaitInput) (*mcp.CallToolResult, WaitOutput, error) {
	return t.waitFor(ctx, req, WaitInput{Line: in.Line, TimeoutSeconds: in.TimeoutSeconds, Cursor: in.Cursor},
		waitKind{tool: "wait_for_self_message", event: api.EventMessageSelf})
}
