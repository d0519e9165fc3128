package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

type (
	AvailabilityInput struct {
		Line   string `json:"line" jsonschema:"the line that asks: its handle or ln_ ID"`
		Handle string `json:"handle" jsonschema:"the phone number or e-mail handle asked about"`
	}
	// AvailabilityOutput is whether the handle is on iMessage.
	AvailabilityOutput = api.Availability
)

func (t *tools) addAvailability(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "check_availability", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(true)},
		Description: "Ask whether a handle is reachable on iMessage (imessage true) or only by SMS, as the line's network answers (answers are kept an hour). " +
			"Needs the line's availability capability (see list_lines); a network that does not answer is network_unavailable."}, t.availability)
}

func (t *tools) availability(ctx context.Context, req *mcp.CallToolRequest, in AvailabilityInput) (*mcp.CallToolResult, AvailabilityOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, AvailabilityOutput{}, err
	}
	a, err := c.Availability.Get(ctx, client.AvailabilityParams{From: in.Line, Handle: in.Handle})
	if err != nil {
		return nil, AvailabilityOutput{}, apiError(err)
	}
	return nil, *a, nil
}
