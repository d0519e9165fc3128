package server

import (
	"net/http"

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
	chats, next, err := s.db.ListChats(r.Context(), line.ID, after, limit)
	if err != nil {
		return err
	}
	out := make([]apiChat, len(chats))
	for i, c := range chats {
		out[i] = toAPIChat(c)
	}
	writeJSON(w, http.StatusOK, newList(r.Context(), out, encodeCursor('c', next)))
	return nil
}
