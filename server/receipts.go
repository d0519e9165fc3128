package server

import (
	"net/http"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// receiptPayload is POST /v1/receipts as the outbox keeps it.
type receiptPayload struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// sendReceipt marks a chat read.
func (s *Server) sendReceipt(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p receiptPayload
	if p.From, p.To, err = b.fromTo(); err != nil {
		return err
	}
	line, tgt, err := s.conversation(r, p.From, p.To, true)
	if err != nil {
		return err
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{Kind: storage.KindRead, ChatID: tgt.chat.ID})
}

// listReceipts lists a chat's read receipts: how far each member (the line
// included) has read it.
func (s *Server) listReceipts(w http.ResponseWriter, r *http.Request) error {
	tgt, err := s.chatQuery(r)
	if err != nil {
		return err
	}
	out := []api.Receipt{}
	if tgt.found {
		recs, err := s.db.Receipts(r.Context(), tgt.chat.ID)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			out = append(out, api.Receipt(rec))
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}
