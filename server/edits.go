package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/storage"
)

// Messages' own limits on changing a sent message: edits within 15 minutes
// of sending, at most 5 of them; an unsend within 2 minutes.
const (
	editWindow   = 15 * time.Minute
	maxEdits     = 5
	unsendWindow = 2 * time.Minute
)

// editPayload is POST /v1/edits as the outbox keeps it.
type editPayload struct {
	From      string `json:"from"`
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// unsendPayload is POST /v1/unsends as the outbox keeps it.
type unsendPayload struct {
	From      string `json:"from"`
	MessageID string `json:"message_id"`
}

// sendEdit replaces the text of a message the line sent. The message's
// text and edited_at change, with a message.edited event, when the network
// records the edit.
func (s *Server) sendEdit(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p editPayload
	if p.From, err = b.required("from"); err != nil {
		return err
	}
	if p.MessageID, err = b.required("message_id"); err != nil {
		return err
	}
	if p.Text, err = b.required("text"); err != nil {
		return err
	}
	line, m, err := s.ownMessage(r, p.From, p.MessageID, "edit")
	if err != nil {
		return err
	}
	if m.Text == nil {
		return httpapi.Invalid("message_id", "Message %s has no text to edit.", p.MessageID)
	}
	if s.now().Sub(time.UnixMilli(m.SentAt)) > editWindow {
		return httpapi.InvalidRequest("edit_window_expired", "message_id",
			"Message %s was sent more than %d minutes ago: Messages no longer lets it be edited.", p.MessageID, int(editWindow.Minutes()))
	}
	if m.EditRequests >= maxEdits {
		return errEditLimit() // checked again when the edit is stored
	}
	text := p.Text
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindEdit, ChatID: m.ChatID, TargetMessageID: m.ID, TargetGUID: m.GUID, Text: &text,
	})
}

func errEditLimit() error {
	return httpapi.InvalidRequest("edit_limit_reached", "message_id", "This message was edited %d times: Messages allows no more.", maxEdits)
}

// sendUnsend takes back a message the line sent. The message's unsent_at is
// set (and its text and attachments go), with a message.unsent event, when
// the network records it.
func (s *Server) sendUnsend(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p unsendPayload
	if p.From, err = b.required("from"); err != nil {
		return err
	}
	if p.MessageID, err = b.required("message_id"); err != nil {
		return err
	}
	line, m, err := s.ownMessage(r, p.From, p.MessageID, "unsend")
	if err != nil {
		return err
	}
	if s.now().Sub(time.UnixMilli(m.SentAt)) > unsendWindow {
		return httpapi.InvalidRequest("unsend_window_expired", "message_id",
			"Message %s was sent more than %d minutes ago: Messages no longer lets it be unsent.", p.MessageID, int(unsendWindow.Minutes()))
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindUnsend, ChatID: m.ChatID, TargetMessageID: m.ID, TargetGUID: m.GUID,
	})
}

// ownMessage resolves the line and the message of an edit or unsend: a
// message the line sent (from this daemon or another of its owner's
// devices), on the network, not unsent, and not over SMS.
func (s *Server) ownMessage(r *http.Request, from, messageID, feature string) (storage.Line, storage.Message, error) {
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return line, storage.Message{}, err
	}
	if err := s.capable(line, feature); err != nil {
		return line, storage.Message{}, err
	}
	m, err := s.findMessage(r, line, messageID, "message_id")
	switch {
	case err != nil:
		return line, m, err
	case !m.IsFromMe:
		return line, m, httpapi.Invalid("message_id", "Message %s was sent by %s: a line changes only the messages it sent.", messageID, m.Sender)
	case m.GUID == "":
		return line, m, httpapi.Invalid("message_id", "Message %s is not on the network.", messageID)
	case m.UnsentAt != 0:
		return line, m, httpapi.Invalid("message_id", "Message %s was unsent: it can no longer change.", messageID)
	case m.Service == "sms" || m.Service == "rcs":
		return line, m, httpapi.Invalid("message_id", "Message %s went out as %s: only iMessages can be edited or unsent.", messageID, strings.ToUpper(m.Service))
	}
	return line, m, nil
}
