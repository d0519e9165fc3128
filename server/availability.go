package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"golang.org/x/time/rate"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/storage"
)

// getAvailability answers whether a handle is reachable on iMessage, as the
// line's network says (on a Mac, Apple's directory through the private-API
// helper), so that a client can choose SMS up front. Answers are kept in
// memory for AvailabilityTTL (1 hour): asking Apple's directory about many
// handles is what a spammer does, and an answer rarely changes within the
// hour. A restart forgets them. For the same reason a guarded line's
// lookups that reach the network have an hourly budget (lookupBudget), so
// that no key, a read-only one included, can have the line enumerate
// handles; kept answers cost nothing.
func (s *Server) getAvailability(w http.ResponseWriter, r *http.Request) error {
	from, err := queryHandle(r, "from")
	if err != nil {
		return err
	}
	value, err := queryRequired(r, "handle")
	if err != nil {
		return err
	}
	h, err := handle.Normalize(value)
	if err != nil {
		return httpapi.BadHandle("handle", value, err)
	}
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return err
	}
	if err := s.capable(line, "availability"); err != nil {
		return err
	}
	if err := s.checkContacts(r.Context(), line, "handle", h); err != nil {
		return err
	}
	if h == line.Handle {
		return httpapi.Invalid("handle", "handle is the line's own handle.")
	}
	imessage, at, err := s.availability.get(r.Context(), line, h, s.now(), func(ctx context.Context) (bool, error) {
		if s.opts.Availability == nil {
			return true, nil
		}
		if err := s.lookups.take(line, s.guard(line), s.now()); err != nil {
			return false, err
		}
		ctx, cancel := context.WithTimeout(ctx, availabilityTimeout)
		defer cancel()
		return s.opts.Availability(ctx, line, h)
	})
	if err != nil {
		if e, ok := errors.AsType[*httpapi.Error](err); ok {
			return e // the guard's budget is spent
		}
		if r.Context().Err() != nil {
			return err
		}
		s.log.Warn("availability check failed", "line", line.Handle, "err", err)
		return httpapi.Unavailable("network_unavailable", "Line %s's network did not answer the availability check; try again later.", line.Handle)
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Availability{Handle: h, IMessage: imessage, CheckedAt: at.UnixMilli(), RequestID: httpapi.RequestID(r.Context())})
	return nil
}

// availabilityCache keeps availability answers by line and handle.
type availabilityCache struct {
	ttl time.Duration

	mu      sync.Mutex
	answers map[string]availabilityAnswer
}

type availabilityAnswer struct {
	imessage bool
	at       time.Time
}

func newAvailabilityCache(ttl time.Duration) *availabilityCache {
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &availabilityCache{ttl: ttl, answers: map[string]availabilityAnswer{}}
}

// get returns the kept answer for h on line, or asks and keeps it. Expired
// answers are dropped as they are met, and all of them when the cache grows
// large, so it stays bounded by the handles asked about within the TTL.
func (c *availabilityCache) get(ctx context.Context, line storage.Line, h string, now time.Time, ask func(context.Context) (bool, error)) (bool, time.Time, error) {
	key := line.ID + "\x00" + h
	c.mu.Lock()
	a, ok := c.answers[key]
	c.mu.Unlock()
	if ok && now.Sub(a.at) < c.ttl {
		return a.imessage, a.at, nil
	}
	imessage, err := ask(ctx)
	if err != nil {
		return false, time.Time{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.answers) >= maxAvailabilityAnswers {
		for k, a := range c.answers {
			if now.Sub(a.at) >= c.ttl {
				delete(c.answers, k)
			}
		}
	}
	c.answers[key] = availabilityAnswer{imessage: imessage, at: now}
	return imessage, now, nil
}

// forget drops the answers about h on every line.
func (c *availabilityCache) forget(h string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.answers {
		if _, kh, _ := strings.Cut(k, "\x00"); kh == h {
			delete(c.answers, k)
		}
	}
}

const maxAvailabilityAnswers = 10000

// lookupBudget is each guarded line's budget of availability lookups that
// reach its network: the guard's MaxAvailabilityLookups an hour, refilled
// continuously. It lives in memory, as the answers do: a restart forgets
// both.
type lookupBudget struct {
	mu    sync.Mutex
	lines map[string]*rate.Limiter // by line ID
}

// take spends one lookup of line's budget, or answers 429
// guard_availability_limit when it is spent.
func (b *lookupBudget) take(line storage.Line, g GuardPolicy, now time.Time) error {
	if !g.Enabled || g.MaxAvailabilityLookups <= 0 {
		return nil
	}
	b.mu.Lock()
	l := b.lines[line.ID]
	if l == nil {
		if b.lines == nil {
			b.lines = map[string]*rate.Limiter{}
		}
		l = rate.NewLimiter(rate.Limit(float64(g.MaxAvailabilityLookups)/3600), g.MaxAvailabilityLookups)
		b.lines[line.ID] = l
	}
	b.mu.Unlock()
	ok, wait := take(l, now)
	if ok {
		return nil
	}
	return httpapi.TooManyRequests("guard_availability_limit", httpapi.RetrySeconds(wait),
		"Line %s has used its Apple ID guard's budget of %d availability lookups an hour ([guard] max_availability_lookups): "+
			"another handle may be looked up in %d s. Handles looked up within the last hour are still answered, from memory.",
		line.Handle, g.MaxAvailabilityLookups, httpapi.RetrySeconds(wait))
}

// availabilityTimeout bounds one question to the network.
const availabilityTimeout = 15 * time.Second
