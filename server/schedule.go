package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/storage"
)

// Scheduled sends: how far send_at may be from now.
const (
	// SendAtSkew is how far in the past a send_at may be: a client's clock
	// a little ahead of ours, or a request slow to arrive. Such a send goes
	// at once.
	SendAtSkew = 5 * time.Minute
	// SendAtHorizon is how far ahead a send_at may be. The outbox is not a
	// calendar: a month covers reminders and follow-ups, keeps what the
	// checks at acceptance said (contact-first, the guard) from going
	// stale, and catches a send_at in microseconds.
	SendAtHorizon = 30 * 24 * time.Hour
)

// sendAt reads the optional send_at field: an integer Unix time in
// milliseconds, from SendAtSkew ago to SendAtHorizon ahead. Absent or null
// is nil (send at once).
func (b body) sendAt(now time.Time) (*int64, error) {
	p, err := b.integer("send_at", "a Unix time in milliseconds")
	if p == nil || err != nil {
		return nil, err
	}
	v := *p
	switch {
	case v < now.Add(-SendAtSkew).UnixMilli():
		return nil, httpapi.Invalid("send_at", "send_at %d is in the past (%s): it must be a Unix time in milliseconds, now or later (at most %s early).",
			v, time.UnixMilli(v).UTC().Format(time.RFC3339), SendAtSkew)
	case v > now.Add(SendAtHorizon).UnixMilli():
		return nil, httpapi.Invalid("send_at", "send_at %d is more than %d days ahead: it must be a Unix time in milliseconds within %d days.",
			v, int(SendAtHorizon/(24*time.Hour)), int(SendAtHorizon/(24*time.Hour)))
	}
	return &v, nil
}

// cancelOutboxItem cancels a pending outbox item: POST /v1/outbox/cancel
// {id}. It answers the item, now failed with error "canceled".
func (s *Server) cancelOutboxItem(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	id, err := b.requiredID("id", "obx_", "an outbox item ID")
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := s.visibleOutboxItem(ctx, id); err != nil {
		return err
	}
	item, err := s.db.CancelOutbox(ctx, id)
	switch {
	case errors.Is(err, storage.ErrNotPending):
		state := map[string]string{storage.StatusClaimed: "claimed (being sent)", storage.StatusSent: "sent",
			storage.StatusFailed: "failed"}[item.Status]
		if item.Error == storage.Canceled {
			state = "cancelled already"
		}
		return httpapi.Conflict("outbox_item_not_pending", "id", "Outbox item %s is %s: only a pending item can be cancelled.", id, state)
	case err != nil:
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, toAPIOutboxItem(item, httpapi.RequestID(ctx)))
	return nil
}
