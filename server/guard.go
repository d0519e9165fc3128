package server

import (
	"context"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// GuardPolicy is a line's Apple ID guard: pacing in the delivery worker,
// caps when a message is accepted.
type GuardPolicy struct {
	Enabled         bool
	Pace            time.Duration // at most one message per pace
	MaxUnanswered   int           // messages to a chat since its contact last wrote; 0: no cap
	MaxRatio        int           // the day's messages per message received (at least one); 0: no cap
	MaxColdContacts int           // cold chats messaged in a UTC day; 0: no cap
	ColdAfter       time.Duration // silence after which a contact is cold
	// MaxAvailabilityLookups caps the availability lookups that reach the
	// line's network in an hour (answers kept from the last hour are
	// free); 0: no cap.
	MaxAvailabilityLookups int
}

// guard is a line's policy.
func (s *Server) guard(l storage.Line) GuardPolicy {
	if s.opts.Guard == nil {
		return GuardPolicy{}
	}
	return s.opts.Guard(l)
}

// guardLimits are what storage checks a message of line against.
func (s *Server) guardLimits(l storage.Line) *storage.GuardLimits {
	g := s.guard(l)
	return &storage.GuardLimits{Enforce: g.Enabled, MaxUnanswered: g.MaxUnanswered, MaxRatio: g.MaxRatio,
		MaxColdContacts: g.MaxColdContacts, ColdAfter: g.ColdAfter.Milliseconds()}
}

// guardError is the answer to a message the guard refused: 429 with the
// limit's own code, and Retry-After when a time is known.
func guardError(e *storage.GuardError, line storage.Line, g GuardPolicy, now time.Time) *httpapi.Error {
	now = now.UTC()
	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	var err *httpapi.Error
	switch e.Limit {
	case storage.GuardUnanswered:
		err = httpapi.TooManyRequests("guard_unanswered_limit", 0,
			"Line %s has sent %d messages to this chat since the contact last wrote (the guard allows %d): "+
				"sending to it may resume when the contact answers; no time is known.", line.Handle, e.Count, e.Max)
		err.Param = "to"
	case storage.GuardRatio:
		err = httpapi.TooManyRequests("guard_ratio_limit", httpapi.RetrySeconds(midnight.Sub(now)),
			"Line %s has sent %d messages today (UTC), the most the guard allows for the messages it received "+
				"(%d to 1): sending may resume when more messages arrive, or at midnight UTC.", line.Handle, e.Count, g.MaxRatio)
	case storage.GuardColdContacts:
		err = httpapi.TooManyRequests("guard_cold_contacts_limit", httpapi.RetrySeconds(midnight.Sub(now)),
			"Line %s has messaged %d contacts silent for a while today (UTC), the guard's limit: "+
				"sending to another one may resume at midnight UTC; contacts who wrote recently can still be messaged.", line.Handle, e.Count)
		err.Param = "to"
	default:
		err = httpapi.TooManyRequests("rate_limit_exceeded", 0, "%s", e.Error())
	}
	return err
}

// guardStanding is a line's guard as GET /v1/lines shows it.
func (s *Server) guardStanding(ctx context.Context, l storage.Line, now time.Time) (api.LineGuard, error) {
	g := s.guard(l)
	today, err := s.db.GuardToday(ctx, l.ID, now.UnixMilli())
	if err != nil {
		return api.LineGuard{}, err
	}
	now = now.UTC()
	return api.LineGuard{
		Enabled: g.Enabled, PaceMS: g.Pace.Milliseconds(),
		Today: api.GuardToday{Sent: today.Sent, Received: today.Received, ColdContacts: today.ColdContacts,
			ResetsAt: now.Truncate(24 * time.Hour).Add(24 * time.Hour).UnixMilli()},
		Limits: api.GuardLimits{MaxUnanswered: g.MaxUnanswered, MaxRatio: g.MaxRatio, MaxColdContacts: g.MaxColdContacts,
			ColdAfterMS: g.ColdAfter.Milliseconds(), MaxAvailabilityLookups: g.MaxAvailabilityLookups},
	}, nil
}
