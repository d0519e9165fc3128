package client

import (
	"context"
	"net/url"

	"github.com/blueline-app/blueline/client/api"
)

// MessageSearchParams is a full-text search of a line's messages.
type MessageSearchParams struct {
	From   string // the line: its handle or ln_ ID (required)
	Query  string // the words to find, every one of them; "word*" matches the words it begins (required)
	To     string // one chat: a contact's handle, a cht_ ID or a group's identifier; "" searches the line's every chat
	Limit  int    // page size, 1–100; 0 is the server's default (50)
	Cursor string // where to start: a page's next cursor; "" for the first page
}

func (p MessageSearchParams) query() url.Values {
	return query("from", p.From, "q", p.Query, "to", p.To, "limit", limitString(p.Limit), "cursor", p.Cursor)
}

// Search returns one page of the messages that hold every word of
// p.Query, case and accents aside, most recent first (GET
// /v1/messages/search); NextCursor(page) is where the next one starts.
func (s *MessageService) Search(ctx context.Context, p MessageSearchParams) (*api.List[api.Message], error) {
	var page api.List[api.Message]
	if err := s.c.get(ctx, "/v1/messages/search", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}
