package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/storage"
)

func (s *Server) getOutboxItem(w http.ResponseWriter, r *http.Request) error {
	id, err := queryRequired(r, "id")
	if err != nil {
		return err
	}
	if !storage.IDShaped(id, "obx_") {
		return httpapi.Invalid("id", "id must be an outbox item ID (obx_…).")
	}
	item, err := s.visibleOutboxItem(r.Context(), id)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, toAPIOutboxItem(item, httpapi.RequestID(r.Context())))
	return nil
}

// visibleOutboxItem is outbox item id, or 404 outbox_item_not_found when
// there is none the request's key may see.
func (s *Server) visibleOutboxItem(ctx context.Context, id string) (storage.OutboxItem, error) {
	item, err := s.db.OutboxItemByID(ctx, id)
	if err == nil {
		err = s.hideOutboxItem(ctx, item)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return item, httpapi.NotFound("outbox_item_not_found", "id", "No outbox item %s.", id)
	}
	return item, err
}

// hideOutboxItem is storage.ErrNotFound for an item the request's key may
// not see: of a line it cannot use or that is no longer configured, or on
// the sandbox line of another owner's sandbox.
func (s *Server) hideOutboxItem(ctx context.Context, item storage.OutboxItem) error {
	line, ok := s.db.LineByID(item.LineID)
	if !ok || checkLineAccess(apiKey(ctx), line) != nil {
		return storage.ErrNotFound
	}
	if !line.IsSandbox {
		return nil
	}
	if item.ChatID == "" {
		return storage.ErrNotFound
	}
	c, err := s.db.ChatByID(ctx, item.ChatID)
	if err == nil {
		err = s.hideSandboxChat(ctx, line, c)
	}
	return err
}
