package server

import (
	"net/http"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// typingPayload is POST /v1/typing as the outbox keeps it.
type typingPayload struct {
	From  string `json:"from"`
	To    string `json:"to"`
	State string `json:"state"`
}

// sendTyping shows (state "on", the default) or stops the line's typing
// indicator in a chat. A late indicator is worse than none, so it is tried
// once.
func (s *Server) sendTyping(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p typingPayload
	if p.From, p.To, err = b.fromTo(); err != nil {
		return err
	}
	if p.State, err = b.str("state"); err != nil {
		return err
	}
	switch p.State {
	case "":
		p.State = "on"
	case "on", "off":
	default:
		return httpapi.Invalid("state", "state must be \"on\" or \"off\".")
	}
	line, tgt, err := s.conversation(r, p.From, p.To, true)
	if err != nil {
		return err
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindTyping, ChatID: tgt.chat.ID, TypingOn: p.State == "on", MaxAttempts: 1,
	})
}

// listTyping lists a chat's current typing indicators.
func (s *Server) listTyping(w http.ResponseWriter, r *http.Request) error {
	tgt, err := s.chatQuery(r)
	if err != nil {
		return err
	}
	out := []api.Indicator{}
	if tgt.found {
		for _, ind := range s.db.TypingIndicators(tgt.chat.ID, s.now()) {
			out = append(out, api.Indicator(ind))
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}

// chatQuery resolves the from and to query parameters of a read.
func (s *Server) chatQuery(r *http.Request) (target, error) {
	from, err := queryHandle(r, "from")
	if err != nil {
		return target{}, err
	}
	to, err := queryHandle(r, "to")
	if err != nil {
		return target{}, err
	}
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return target{}, err
	}
	return s.resolveTo(r, line, to)
}
