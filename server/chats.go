package server

import (
	"errors"
	"net/http"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

func (s *Server) listChats(w http.ResponseWriter, r *http.Request) error {
	from, err := queryHandle(r, "from")
	if err != nil {
		return err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	after, err := parseCursor(r, 'c', storage.ChatCursorLen)
	if err != nil {
		return err
	}
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return err
	}
	var chats []storage.Chat
	var next []byte
	if line.IsSandbox {
		// An owner's sandbox holds one chat: the one with its phone.
		chats, err = s.sandboxChats(r, line)
	} else {
		chats, next, err = s.db.ListChats(r.Context(), line.ID, after, limit)
	}
	if err != nil {
		return err
	}
	out := make([]api.Chat, len(chats))
	for i, c := range chats {
		out[i] = toAPIChat(c)
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, encodeCursor('c', next)))
	return nil
}

// sandboxChats is the chat of the key owner's sandbox, if it has one yet.
func (s *Server) sandboxChats(r *http.Request, line storage.Line) ([]storage.Chat, error) {
	st, ok, err := s.db.Sandbox(r.Context(), apiKey(r.Context()).Owner)
	if err != nil || !ok || !st.Activated {
		return nil, err
	}
	c, err := s.db.ChatByIdentifier(r.Context(), line.ID, st.PairedHandle)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return []storage.Chat{c}, err
}
