package client

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/url"

	"github.com/blueline-app/blueline/client/api"
)

// BlockedService manages a line's blocked contacts (/v1/contacts/blocked):
// their messages are stored without events, and the line sends them
// nothing (403 contact_blocked). Reading needs chats:read, changing
// messages:write.
type BlockedService struct{ c *Client }

// BlockedListParams selects a line's blocked contacts, or its opted-out
// ones (OptedOut.List).
type BlockedListParams struct {
	From   string // the line: its handle or ln_ ID (required)
	Limit  int    // page size, 1–100; 0 is the server's default (50)
	Cursor string // where to start: a page's next cursor; "" for the first page
}

// List iterates over the line's blocked contacts in handle order,
// fetching pages as it goes. An error ends the iteration.
func (s *BlockedService) List(ctx context.Context, p BlockedListParams) iter.Seq2[api.BlockedContact, error] {
	return paginate(p.Cursor, func(cursor string) (*api.List[api.BlockedContact], error) {
		p.Cursor = cursor
		return s.ListPage(ctx, p)
	})
}

// ListPage returns one page of the line's blocked contacts;
// NextCursor(page) is where the next one starts.
func (s *BlockedService) ListPage(ctx context.Context, p BlockedListParams) (*api.List[api.BlockedContact], error) {
	var page api.List[api.BlockedContact]
	q := query("from", p.From, "limit", limitString(p.Limit), "cursor", p.Cursor)
	if err := s.c.get(ctx, "/v1/contacts/blocked", q, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Block adds handle (any common format; stored normalised) to the line's
// blocked list; blocking a contact blocked already answers its entry as
// it was.
func (s *BlockedService) Block(ctx context.Context, from, handle string) (*api.BlockedContact, error) {
	var out api.BlockedContact
	body := struct {
		From   string `json:"from"`
		Handle string `json:"handle"`
	}{from, handle}
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/contacts/blocked", json: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Unblock removes handle from the line's blocked list; a contact not on it
// is a 404 contact_not_blocked (ErrNotFound).
func (s *BlockedService) Unblock(ctx context.Context, from, handle string) (*api.UnblockedContact, error) {
	var out api.UnblockedContact
	r := request{method: http.MethodDelete, path: "/v1/contacts/blocked/" + url.PathEscape(handle), query: query("from", from)}
	if _, err := s.c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Export returns the line's whole blocked list as CSV: a header row
// `handle`, then one handle per row, as Import reads it.
func (s *BlockedService) Export(ctx context.Context, from string) ([]byte, error) {
	req, err := s.c.newRequest(ctx, request{method: http.MethodGet, path: "/v1/contacts/blocked.csv", query: query("from", from)})
	if err != nil {
		return nil, err
	}
	resp, err := s.c.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, ResponseError(resp)
	}
	return io.ReadAll(resp.Body)
}

// Import adds the handles of a CSV file (the column named `handle` of its
// header row, else its first column) to the line's blocked list, in one
// transaction; the rows without a valid handle are reported in Rejected.
func (s *BlockedService) Import(ctx context.Context, from string, csv io.Reader) (*api.BlockedImport, error) {
	var out api.BlockedImport
	r := request{method: http.MethodPost, path: "/v1/contacts/blocked.csv", query: query("from", from), body: csv,
		header: http.Header{"Content-Type": {"text/csv"}}}
	if _, err := s.c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OptedOutService lists the contacts opted out of a line's messages
// (/v1/contacts/opted-out): they texted an opt-out keyword, and the line
// sends them nothing (403 contact_opted_out) until they text an opt-in
// keyword. Reading needs chats:read.
type OptedOutService struct{ c *Client }

// List iterates over the line's opted-out contacts in handle order,
// fetching pages as it goes. An error ends the iteration.
func (s *OptedOutService) List(ctx context.Context, p BlockedListParams) iter.Seq2[api.OptedOutContact, error] {
	return paginate(p.Cursor, func(cursor string) (*api.List[api.OptedOutContact], error) {
		p.Cursor = cursor
		return s.ListPage(ctx, p)
	})
}

// ListPage returns one page of the line's opted-out contacts;
// NextCursor(page) is where the next one starts.
func (s *OptedOutService) ListPage(ctx context.Context, p BlockedListParams) (*api.List[api.OptedOutContact], error) {
	var page api.List[api.OptedOutContact]
	q := query("from", p.From, "limit", limitString(p.Limit), "cursor", p.Cursor)
	if err := s.c.get(ctx, "/v1/contacts/opted-out", q, &page); err != nil {
		return nil, err
	}
	return &page, nil
}
