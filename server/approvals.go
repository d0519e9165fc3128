package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// approvalCheck is when an agent key's write waits for the owner's
// approval (rule 11): nil for other keys and writes.
func (s *Server) approvalCheck(ctx context.Context, key storage.Key, line storage.Line, item storage.OutboxItem, now time.Time) (*storage.ApprovalCheck, error) {
	if !key.Agent || !item.Draftable() || !key.ApprovalRequired && !line.ApprovalRequired && !line.TakeoverHold {
		return nil, nil
	}
	contacts := item.Participants
	if item.ChatID != "" {
		c, err := s.db.ChatByID(ctx, item.ChatID)
		if err != nil {
			return nil, err
		}
		contacts = []string{c.Identifier}
		if c.IsGroup {
			contacts = c.Participants
		}
	}
	required := func(on bool, except []string) bool {
		return on && (len(contacts) == 0 || !allIn(contacts, except))
	}
	return &storage.ApprovalCheck{
		Required:        required(key.ApprovalRequired, key.ApprovalExcept) || required(line.ApprovalRequired, line.ApprovalExcept),
		HoldHumanActive: line.TakeoverHold,
		ExpiresAt:       now.UnixMilli() + line.ApprovalTTL,
	}, nil
}

// allIn reports whether every one of handles is in list.
func allIn(handles, list []string) bool {
	for _, h := range handles {
		if !slices.Contains(list, h) {
			return false
		}
	}
	return true
}

// listWaiting lists the drafts waiting for the owner's approval, the
// soonest to expire first: GET /v1/outbox/waiting[?from=LINE].
func (s *Server) listWaiting(w http.ResponseWriter, r *http.Request) error {
	var lineID string
	if from := r.URL.Query().Get("from"); from != "" {
		line, err := s.lineFor(r, from, "from")
		if err != nil {
			return err
		}
		lineID = line.ID
	}
	items, err := s.db.WaitingApprovals(r.Context(), lineID)
	if err != nil {
		return err
	}
	out := []api.OutboxItem{}
	for _, it := range items {
		switch err := s.hideOutboxItem(r.Context(), it); {
		case errors.Is(err, storage.ErrNotFound):
			continue
		case err != nil:
			return err
		}
		out = append(out, toAPIOutboxItem(it, httpapi.RequestID(r.Context())))
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}

// approveOutboxItem sends a draft waiting for approval: POST
// /v1/outbox/approve {id, text?}; text replaces the draft's.
func (s *Server) approveOutboxItem(w http.ResponseWriter, r *http.Request) error {
	return s.answerDraft(w, r, true)
}

// declineOutboxItem declines a draft waiting for approval: POST
// /v1/outbox/decline {id}. It becomes failed with error "declined".
func (s *Server) declineOutboxItem(w http.ResponseWriter, r *http.Request) error {
	return s.answerDraft(w, r, false)
}

func (s *Server) answerDraft(w http.ResponseWriter, r *http.Request, approve bool) error {
	key := apiKey(r.Context())
	if key.Agent {
		return httpapi.Forbidden("agent_key_forbidden", "An agent key cannot approve or decline drafts: the owner does (the console, the host's command line, or a key that is not an agent's).")
	}
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	id, err := b.requiredID("id", "obx_", "an outbox item ID")
	if err != nil {
		return err
	}
	var text *string
	if approve {
		if text, err = b.optStr("text"); err != nil {
			return err
		}
		if text != nil && *text == "" {
			return httpapi.Invalid("text", "text replaces the draft's text: it may not be empty (leave it out to send the draft as it is).")
		}
	}
	ctx := r.Context()
	item, err := s.visibleOutboxItem(ctx, id)
	if err != nil {
		return err
	}
	if text != nil && (item.IsAudioMessage || item.Kind == storage.KindMessage && item.Text == nil) {
		return httpapi.Invalid("text", "Outbox item %s carries no text to replace (an audio message or a file alone): approve it without text.", id)
	}
	by := callerName(ctx, key)
	if approve {
		item, err = s.db.ApproveOutbox(ctx, id, by, text, s.now().UnixMilli())
	} else {
		item, err = s.db.DeclineOutbox(ctx, id, by, s.now().UnixMilli())
	}
	if err := draftAnswerError(err, item); err != nil {
		return err
	}
	s.log.Info("draft answered", "outbox_id", id, "approval", item.Approval, "by", by, "text_replaced", text != nil)
	httpapi.WriteJSON(w, http.StatusOK, toAPIOutboxItem(item, httpapi.RequestID(ctx)))
	return nil
}

// draftAnswerError maps the refusals of an approval or decline to the
// API's 409s; other errors pass unchanged.
func draftAnswerError(err error, item storage.OutboxItem) error {
	switch {
	case errors.Is(err, storage.ErrNoApproval):
		return httpapi.Conflict("outbox_item_not_waiting", "id", "Outbox item %s did not wait for approval: only an agent key's draft does.", item.ID)
	case errors.Is(err, storage.ErrApprovalExpired):
		return httpapi.Conflict("approval_expired", "id", "Outbox item %s waited for approval until %s and expired: it will not be sent (status failed, error approval_expired).",
			item.ID, time.UnixMilli(item.ApprovalExpiresAt).UTC().Format(time.RFC3339))
	case errors.Is(err, storage.ErrApprovalAnswered):
		state := map[string]string{api.ApprovalApproved: "was approved already", api.ApprovalDeclined: "was declined already"}[item.Approval]
		if item.Error == storage.Canceled {
			state = "was cancelled"
		}
		return httpapi.Conflict("approval_answered", "id", "Outbox item %s %s: a draft is approved or declined once.", item.ID, state)
	}
	return err
}

// callerName is who answered a draft, as approval_by says: the host's
// command line (the admin socket), the console, or the key's ID.
func callerName(ctx context.Context, key storage.Key) string {
	switch _, inProcess := inProcessCaller(ctx); {
	case inProcess && key.ID == hostKeyID:
		return "host"
	case inProcess:
		return "console"
	}
	return key.ID
}
