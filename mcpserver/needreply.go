package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
)

type (
	ChatsNeedingReplyInput struct {
		Line            string `json:"line" jsonschema:"the line: its handle or ln_ ID"`
		Limit           int    `json:"limit,omitempty" jsonschema:"how many of the line's most recent chats to look at"`
		Cursor          string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous call, to look at older chats"`
		IncludeFiltered bool   `json:"include_filtered,omitempty" jsonschema:"also chats the network files away from the inbox (unknown senders, junk, …); left out by default"`
	}
	// ChatNeedingReply is a chat whose last message a contact wrote.
	ChatNeedingReply struct {
		Chat        Chat    `json:"chat"`
		LastMessage Message `json:"last_message" jsonschema:"the contact's message the line has not answered"`
	}
	ChatsNeedingReplyOutput struct {
		Chats      []ChatNeedingReply `json:"chats" jsonschema:"most recent first"`
		NextCursor string             `json:"next_cursor,omitempty" jsonschema:"pass as cursor to look at older chats; absent when there are none"`
	}
)

func (t *tools) addNeedReply(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "chats_needing_reply", Annotations: readOnly(),
		InputSchema: inputSchema[ChatsNeedingReplyInput]("chats_needing_reply", nil),
		Description: "Among a line's most recent chats (limit of them), those whose last message a contact wrote and the line has not answered, " +
			"each with that message, most recent first; chats filed away from the inbox (unknown senders, junk, …) only with include_filtered. " +
			"Each chat looked at is one API request (read_messages' scopes). " + untrustedNote}, t.chatsNeedingReply)
}

func (t *tools) chatsNeedingReply(ctx context.Context, req *mcp.CallToolRequest, in ChatsNeedingReplyInput) (*mcp.CallToolResult, ChatsNeedingReplyOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, ChatsNeedingReplyOutput{}, err
	}
	out, err := needingReply(ctx, c, in)
	if err != nil {
		return nil, ChatsNeedingReplyOutput{}, err
	}
	return untrusted(out), out, nil
}

// needingReply looks at a page of the line's chats for those whose last
// message a contact wrote.
func needingReply(ctx context.Context, c *client.Client, in ChatsNeedingReplyInput) (ChatsNeedingReplyOutput, error) {
	page, err := c.Chats.ListPage(ctx, client.ChatListParams{From: in.Line, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return ChatsNeedingReplyOutput{}, apiError(err)
	}
	out := ChatsNeedingReplyOutput{Chats: []ChatNeedingReply{}, NextCursor: client.NextCursor(page)}
	for _, chat := range page.Data {
		if chat.LastMessageAt == nil || (chat.Filter != nil && !in.IncludeFiltered) {
			continue
		}
		last, err := c.Messages.ListPage(ctx, client.MessageListParams{From: in.Line, To: chat.ID, Limit: 1})
		if err != nil {
			return ChatsNeedingReplyOutput{}, apiError(err)
		}
		if len(last.Data) == 1 && !last.Data[0].IsFromMe {
			out.Chats = append(out.Chats, ChatNeedingReply{Chat: chat, LastMessage: messageOf(last.Data[0])})
		}
	}
	return out, nil
}

func (o ChatsNeedingReplyOutput) marked(b boundary) any {
	o.Chats = each(o.Chats, func(c ChatNeedingReply) ChatNeedingReply {
		return ChatNeedingReply{Chat: b.chat(c.Chat), LastMessage: b.message(c.LastMessage)}
	})
	return o
}
