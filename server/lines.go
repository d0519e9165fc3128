package server

import (
	"net/http"
	"slices"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
)

// listLines returns every line the key may use. The list is short and
// complete (has_more false): the SDK pages lines by asking again without a
// cursor.
func (s *Server) listLines(w http.ResponseWriter, r *http.Request) error {
	key := apiKey(r.Context())
	var out []api.Line
	now := s.now()
	for _, l := range s.db.Lines() {
		if l.IsSandbox || len(key.LineIDs) == 0 || slices.Contains(key.LineIDs, l.ID) {
			line := s.toAPILine(l)
			guard, err := s.guardStanding(r.Context(), l, now)
			if err != nil {
				return err
			}
			line.Guard = guard
			out = append(out, line)
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}
