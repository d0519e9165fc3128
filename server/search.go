package server

import (
	"context"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/search"
	"github.com/blueline-app/blueline/storage"
)

// Searcher finds a line's messages by their words (package search).
type Searcher interface {
	Search(ctx context.Context, q search.Query) (hits []search.Hit, more bool, err error)
}

// maxQueryChars bounds a search's words.
const maxQueryChars = 1000

// searchMessages is GET /v1/messages/search: a line's messages (or a
// chat's) that hold every word of q, most recent first.
func (s *Server) searchMessages(w http.ResponseWriter, r *http.Request) error {
	from, err := queryHandle(r, "from")
	if err != nil {
		return err
	}
	text, err := queryRequired(r, "q")
	if err != nil {
		return err
	}
	if utf8.RuneCountInString(text) > maxQueryChars {
		return httpapi.Invalid("q", "q must be at most %d characters.", maxQueryChars)
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	before, err := parseCursor(r, 's', -1)
	if err != nil {
		return err
	}
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return err
	}
	if s.opts.Search == nil {
		return errors.New("server: no search index (Options.Search)")
	}
	q := search.Query{LineID: line.ID, Text: text, Limit: limit, Before: string(before)}
	empty := func() error {
		httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), []api.Message{}, nil))
		return nil
	}
	if to := r.URL.Query().Get("to"); to != "" {
		if to, err = queryHandle(r, "to"); err != nil {
			return err
		}
		tgt, err := s.resolveTo(r, line, to)
		if err != nil {
			return err
		}
		if !tgt.found {
			return empty() // a contact with no chat yet has no messages
		}
		q.ChatID = tgt.chat.ID
	} else if line.IsSandbox {
		// An owner's sandbox holds one chat: the one with its phone.
		chats, err := s.sandboxChats(r, line)
		if err != nil {
			return err
		}
		if len(chats) == 0 {
			return empty()
		}
		q.ChatID = chats[0].ID
	}
	hits, more, err := s.opts.Search.Search(r.Context(), q)
	switch {
	case errors.Is(err, search.ErrNoWords):
		return httpapi.Invalid("q", "q has no words to search for: give letters or digits.")
	case errors.Is(err, search.ErrBadCursor):
		return httpapi.Invalid("cursor", "cursor is not one this endpoint returned.")
	case err != nil:
		return err
	}
	out := make([]api.Message, 0, len(hits))
	for _, h := range hits {
		m, err := s.db.MessageByID(r.Context(), h.MessageID)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		out = append(out, s.toAPIMessage(m))
	}
	var next []byte
	if more {
		next = []byte(hits[len(hits)-1].Cursor)
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, encodeCursor('s', next)))
	return nil
}
