package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
)

type (
	SearchMessagesInput struct {
		Line   string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Query  string `json:"query" jsonschema:"the words to find, every one of them, case and accents aside; word* matches the words it begins"`
		Chat   string `json:"chat,omitempty" jsonschema:"one chat: the contact's handle or a cht_ chat ID; omitted searches every chat of the line"`
		Limit  int    `json:"limit,omitempty" jsonschema:"how many messages"`
		Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous call, for older matches"`
	}
	SearchMessagesOutput struct {
		Messages   []Message `json:"messages" jsonschema:"most recent first"`
		NextCursor string    `json:"next_cursor,omitempty" jsonschema:"pass as cursor for older matches; absent when there are none"`
	}
)

func (t *tools) addSearch(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "search_messages", Annotations: readOnly(),
		InputSchema: inputSchema[SearchMessagesInput]("search_messages", nil),
		Description: "Search a line's messages (or one chat's) by their words: those holding every word of query, most recent first. " +
			"Only letters and digits count (quotes and operators are not syntax); word* matches the words it begins. " +
			"read_messages with the chat_id shows a message in its conversation. " + untrustedNote}, t.searchMessages)
}

func (t *tools) searchMessages(ctx context.Context, req *mcp.CallToolRequest, in SearchMessagesInput) (*mcp.CallToolResult, SearchMessagesOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, SearchMessagesOutput{}, err
	}
	page, err := c.Messages.Search(ctx, client.MessageSearchParams{From: in.Line, Query: in.Query, To: in.Chat, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, SearchMessagesOutput{}, apiError(err)
	}
	out := SearchMessagesOutput{Messages: each(page.Data, messageOf), NextCursor: client.NextCursor(page)}
	return untrusted(out), out, nil
}

func (o SearchMessagesOutput) marked(b boundary) any {
	o.Messages = each(o.Messages, b.message)
	return o
}
