package server

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// The bounds of a chat lease's time to live (ttl_seconds).
const (
	MinLeaseTTL = 10
	MaxLeaseTTL = 86400
	// maxLeaseLabel is the longest label of a lease, in characters.
	maxLeaseLabel = 100
)

// agentCheck is what storage checks an agent key's write to chat chatID
// ("" for a new group) against (rules 10 and 11); nil for other keys,
// which neither takeovers, leases nor sender gating hold back.
func agentCheck(key storage.Key, chatID string, now time.Time) *storage.AgentCheck {
	if !key.Agent {
		return nil
	}
	return &storage.AgentCheck{KeyID: key.ID, ChatID: chatID, Now: now.UnixMilli(), Gate: key.Gate}
}

// humanActive is the answer to an agent's write to a chat the owner took
// over.
func humanActive(e *storage.ErrHumanActive, chatID string, now time.Time) *httpapi.Error {
	until := time.UnixMilli(e.Until)
	err := httpapi.Conflict("human_active", "to",
		"The line's owner is writing in chat %s from their own devices: agent keys may write to it again at %s "+
			"(when the owner has been quiet for the line's takeover_quiet), or when the owner resumes the agents in the console.",
		chatID, until.UTC().Format(time.RFC3339))
	err.RetryAfter = httpapi.RetrySeconds(until.Sub(now))
	return err
}

// chatLeased is the answer to an agent's write to, or lease of, a chat
// another key leases.
func chatLeased(e *storage.ErrChatLeased, now time.Time) *httpapi.Error {
	l := e.Lease
	until := time.UnixMilli(l.ExpiresAt)
	err := httpapi.Conflict("chat_leased", "to",
		"Chat %s is leased to key %q (%s) until %s: other agent keys may not write to it until that key releases it or the lease expires.",
		l.ChatID, l.KeyLabel, l.KeyID, until.UTC().Format(time.RFC3339))
	err.RetryAfter = httpapi.RetrySeconds(until.Sub(now))
	return err
}

// agentRefusal maps storage's refusals of an agent's write to the API's
// answers; other errors pass unchanged.
func agentRefusal(err error, chatID string, now time.Time) error {
	if e, ok := errors.AsType[*storage.ErrHumanActive](err); ok {
		return humanActive(e, chatID, now)
	}
	if e, ok := errors.AsType[*storage.ErrChatLeased](err); ok {
		return chatLeased(e, now)
	}
	return err
}

// leaseChat leases a chat to the calling key: POST /v1/chats/lease. The
// holder calling again renews it; a key that is not an agent's takes it
// over from another holder.
func (s *Server) leaseChat(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	from, to, err := b.fromTo()
	if err != nil {
		return err
	}
	ttl, err := b.integer("ttl_seconds", "a number of seconds")
	switch {
	case err != nil:
		return err
	case ttl == nil:
		return httpapi.Missing("ttl_seconds")
	case *ttl < MinLeaseTTL || *ttl > MaxLeaseTTL:
		return httpapi.Invalid("ttl_seconds", "ttl_seconds must be from %d to %d, got %d.", MinLeaseTTL, MaxLeaseTTL, *ttl)
	}
	label, err := b.str("label")
	if err != nil {
		return err
	}
	label = strings.TrimSpace(label)
	switch {
	case utf8.RuneCountInString(label) > maxLeaseLabel:
		return httpapi.Invalid("label", "label must be at most %d characters.", maxLeaseLabel)
	case strings.ContainsFunc(label, unicode.IsControl):
		return httpapi.Invalid("label", "label may not contain tabs, newlines or other control characters.")
	}
	line, c, err := s.leaseTarget(r, from, to)
	if err != nil {
		return err
	}
	key, now := apiKey(r.Context()), s.now()
	l, err := s.db.AcquireLease(r.Context(), storage.Lease{ChatID: c.ID, LineID: line.ID, KeyID: key.ID, KeyLabel: key.Label, Label: label,
		ExpiresAt: now.Add(time.Duration(*ttl) * time.Second).UnixMilli()}, !key.Agent, now.UnixMilli())
	if err != nil {
		return agentRefusal(err, c.ID, now)
	}
	httpapi.WriteJSON(w, http.StatusOK, toAPILease(l, line.Handle, "active", httpapi.RequestID(r.Context())))
	return nil
}

// releaseChat ends a chat's lease: DELETE /v1/chats/lease?from=&to=. Its
// holder may, and so may a key that is not an agent's.
func (s *Server) releaseChat(w http.ResponseWriter, r *http.Request) error {
	from, err := queryRequired(r, "from")
	if err != nil {
		return err
	}
	to, err := queryRequired(r, "to")
	if err != nil {
		return err
	}
	line, c, err := s.leaseTarget(r, from, to)
	if err != nil {
		return err
	}
	key, now := apiKey(r.Context()), s.now()
	l, err := s.db.ReleaseLease(r.Context(), c.ID, key.ID, !key.Agent, now.UnixMilli())
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("lease_not_found", "to", "Chat %s is not leased.", c.ID)
	}
	if err != nil {
		return agentRefusal(err, c.ID, now)
	}
	httpapi.WriteJSON(w, http.StatusOK, toAPILease(l, line.Handle, "released", httpapi.RequestID(r.Context())))
	return nil
}

// resumeAgents gives a chat the owner took over back to the agents at
// once: POST /v1/chats/resume. It is the owner's word, so agent keys may
// not say it.
func (s *Server) resumeAgents(w http.ResponseWriter, r *http.Request) error {
	if apiKey(r.Context()).Agent {
		return httpapi.Forbidden("agent_key_forbidden", "An agent key cannot resume agents in a chat the owner took over: the owner does (the console, or a key that is not an agent's).")
	}
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	from, to, err := b.fromTo()
	if err != nil {
		return err
	}
	line, c, err := s.leaseTarget(r, from, to)
	if err != nil {
		return err
	}
	was, err := s.db.ResumeAgents(r.Context(), c.ID, s.now().UnixMilli())
	if err != nil {
		return err
	}
	if was {
		s.log.Info("agents resumed in a chat the owner took over", "chat_id", c.ID, "key_id", apiKey(r.Context()).ID)
	}
	httpapi.WriteJSON(w, http.StatusOK, api.ChatResume{Object: "chat_resume", ChatID: c.ID, LineHandle: line.Handle,
		WasHumanActive: was, RequestID: httpapi.RequestID(r.Context())})
	return nil
}

// leaseTarget is the existing chat that from and to name (rules 3 and 5).
func (s *Server) leaseTarget(r *http.Request, from, to string) (storage.Line, storage.Chat, error) {
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return line, storage.Chat{}, err
	}
	tgt, err := s.resolveTo(r, line, to)
	if err == nil && !tgt.found {
		err = httpapi.NotFound("chat_not_found", "to", "Line %s has no chat with %s yet.", line.Handle, tgt.contact)
	}
	return line, tgt.chat, err
}

func toAPILease(l storage.Lease, lineHandle, status, requestID string) api.ChatLease {
	return api.ChatLease{Object: "chat_lease", ChatID: l.ChatID, LineHandle: lineHandle, KeyID: l.KeyID, KeyLabel: l.KeyLabel,
		Label: nonEmpty(l.Label), Status: status, CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt, RequestID: requestID}
}
