package server

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// reactionPayload is POST /v1/reactions as the outbox keeps it.
type reactionPayload struct {
	From      string `json:"from"`
	To        string `json:"to"`
	MessageID string `json:"message_id"`
	Type      string `json:"type"`
	Emoji     string `json:"emoji,omitempty"`
	Remove    bool   `json:"remove,omitempty"`
}

// sendReaction adds a tapback to a message, or removes it with remove: true.
func (s *Server) sendReaction(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p reactionPayload
	if p.From, p.To, err = b.fromTo(); err != nil {
		return err
	}
	if p.MessageID, err = b.required("message_id"); err != nil {
		return err
	}
	if p.Type, err = b.required("type"); err != nil {
		return err
	}
	if p.Emoji, err = b.str("emoji"); err != nil {
		return err
	}
	switch {
	case isOneEmoji(p.Type) && (p.Emoji == "" || p.Emoji == p.Type):
		// The reference CLI's `react MSG 🎉` sends the emoji as the type.
		p.Type, p.Emoji = bridge.ReactionEmoji, p.Type
	case isOneEmoji(p.Type):
		return httpapi.Invalid("emoji", "type %q is already an emoji tapback; emoji must be empty or the same emoji.", p.Type)
	case p.Type != bridge.ReactionEmoji && !slices.Contains(bridge.ReactionTypes, p.Type):
		return httpapi.Invalid("type", "type must be one of %s, %s with an emoji, or one emoji.", strings.Join(bridge.ReactionTypes, ", "), bridge.ReactionEmoji)
	}
	switch {
	case p.Type == bridge.ReactionEmoji && p.Emoji == "":
		return httpapi.Missing("emoji")
	case p.Type == bridge.ReactionEmoji && !isOneEmoji(p.Emoji):
		return httpapi.Invalid("emoji", "emoji must be exactly one emoji.")
	case p.Type != bridge.ReactionEmoji && p.Emoji != "":
		return httpapi.Invalid("emoji", "emoji goes with type %q.", bridge.ReactionEmoji)
	}
	if p.Remove, err = b.bool("remove"); err != nil {
		return err
	}
	if p.Type == bridge.ReactionEmoji {
		// Checked before the rest of the conversation's rules, as the
		// advanced features are.
		line, err := s.lineFor(r, p.From, "from")
		if err != nil {
			return err
		}
		if err := s.capable(line, "emoji_reactions"); err != nil {
			return err
		}
	}
	line, tgt, err := s.conversation(r, p.From, p.To, true)
	if err != nil {
		return err
	}
	if p.Type == bridge.ReactionEmoji && (tgt.chat.Service == "sms" || tgt.chat.Service == "rcs") {
		return httpapi.Invalid("type", "Emoji tapbacks are sent over iMessage only, not %s.", strings.ToUpper(tgt.chat.Service))
	}
	m, err := s.findMessage(r, line, p.MessageID, "message_id")
	if err != nil {
		return err
	}
	if m.ChatID != tgt.chat.ID {
		return httpapi.Invalid("message_id", "Message %s is not in the chat with %s.", p.MessageID, p.To)
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindReaction, ChatID: tgt.chat.ID, TargetMessageID: m.ID, TargetGUID: m.GUID, ReactionType: p.Type,
		ReactionEmoji: p.Emoji, Remove: p.Remove,
	})
}

// listReactions lists the reaction records of one message, all of them:
// the SDK pages this list by asking again without a cursor.
func (s *Server) listReactions(w http.ResponseWriter, r *http.Request) error {
	value, err := queryRequired(r, "message_id")
	if err != nil {
		return err
	}
	var m storage.Message
	if strings.HasPrefix(value, "msg_") {
		if !storage.IDShaped(value, "msg_") {
			return httpapi.Invalid("message_id", "message_id must be a message ID (msg_…) or GUID.")
		}
		m, err = s.db.MessageByID(r.Context(), value)
	} else {
		m, err = s.db.MessageByGUID(r.Context(), value)
	}
	if err == nil {
		line, ok := s.db.LineByID(m.LineID)
		if !ok || checkLineAccess(apiKey(r.Context()), line) != nil {
			err = storage.ErrNotFound
		} else {
			err = s.hideSandboxMessage(r.Context(), line, m)
		}
	}
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("message_not_found", "message_id", "No message %s.", value)
	}
	if err != nil {
		return err
	}
	recs, err := s.db.ReactionsByMessage(r.Context(), m.ID)
	if err != nil {
		return err
	}
	out := make([]api.Reaction, len(recs))
	for i, rec := range recs {
		out[i] = toAPIReaction(rec)
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}
