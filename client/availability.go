package client

import (
	"context"

	"github.com/blueline-app/blueline/client/api"
)

// AvailabilityService answers whether a handle is reachable on iMessage
// (GET /v1/availability), so that a sender can choose SMS up front; the
// line needs the availability capability.
type AvailabilityService struct{ c *Client }

// AvailabilityParams names the line that asks and the handle asked about.
type AvailabilityParams struct {
	From   string // the line: its handle or ln_ ID (required)
	Handle string // a phone number or account-ID (e-mail) handle (required)
}

// Get returns whether the handle is reachable on iMessage, as the line's
// network answered at CheckedAt (the server keeps answers for an hour). A
// network that does not answer is a 503 network_unavailable.
func (s *AvailabilityService) Get(ctx context.Context, p AvailabilityParams) (*api.Availability, error) {
	var out api.Availability
	if err := s.c.get(ctx, "/v1/availability", query("from", p.From, "handle", p.Handle), &out); err != nil {
		return nil, err
	}
	return &out, nil
}
