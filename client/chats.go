package client

import (
	"context"
	"net/http"

	"github.com/blueline-app/blueline/client/api"
)

// LeaseParams asks for a chat's lease (POST /v1/chats/lease).
type LeaseParams struct {
	From string `json:"from"` // the line: handle or ln_ ID
	To   string `json:"to"`   // the chat: cht_ ID, a group's identifier, or a contact's handle
	// TTLSeconds is how long the lease holds from now: 10 to 86400.
	TTLSeconds int    `json:"ttl_seconds"`
	Label      string `json:"label,omitempty"` // what the lease is for
}

// Lease leases a chat to this client's key, or renews the key's lease:
// other agent keys' writes to it are refused 409 chat_leased until it
// expires or is released. Another agent key's lease is a 409 chat_leased
// (ErrInvalidRequest) naming its holder; a key that is not an agent's
// takes it over.
func (s *ChatService) Lease(ctx context.Context, p LeaseParams) (*api.ChatLease, error) {
	var out api.ChatLease
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/chats/lease", json: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release ends a chat's lease: the holder's, or any when this client's key
// is not an agent's. A chat with no live lease is a 404 lease_not_found
// (ErrNotFound).
func (s *ChatService) Release(ctx context.Context, from, to string) (*api.ChatLease, error) {
	var out api.ChatLease
	if _, err := s.c.do(ctx, request{method: http.MethodDelete, path: "/v1/chats/lease", query: query("from", from, "to", to)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Resume gives a chat the line's owner took over (by writing in it from
// their own devices) back to the agents at once. Agent keys may not: 403
// agent_key_forbidden.
func (s *ChatService) Resume(ctx context.Context, from, to string) (*api.ChatResume, error) {
	var out api.ChatResume
	if _, err := s.c.do(ctx, request{method: http.MethodPost, path: "/v1/chats/resume", json: map[string]string{"from": from, "to": to}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
