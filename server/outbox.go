package server

import (
	"errors"
	"net/http"

	"github.com/blueline-app/blueline/storage"
)

func (s *Server) getOutboxItem(w http.ResponseWriter, r *http.Request) error {
	id, err := queryRequired(r, "id")
	if err != nil {
		return err
	}
	if !storage.ValidID(id, "obx_") {
		return errInvalid("id", "id must be an outbox item ID (obx_…).")
	}
	item, err := s.db.OutboxItemByID(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return errNotFound("outbox_item_not_found", "id", "No outbox item %s.", id)
	}
	if err != nil {
		return err
	}
	if line, ok := s.db.LineByID(item.LineID); ok {
		if err := checkLineAccess(apiKey(r.Context()), line); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, toAPIOutboxItem(item, requestID(r.Context())))
	return nil
}
