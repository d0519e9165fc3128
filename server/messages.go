package server

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/blueline-app/blueline/storage"
)

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	from, err := queryHandle(r, "from")
	if err != nil {
		return err
	}
	to, err := queryHandle(r, "to")
	if err != nil {
		return err
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	after, err := parseCursor(r, 'm', storage.MessageCursorLen)
	if err != nil {
		return err
	}
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return err
	}
	tgt, err := s.resolveTo(r, line, to)
	if err != nil {
		return err
	}
	var msgs []storage.Message
	var next []byte
	if tgt.found { // a contact with no chat yet simply has no history
		msgs, next, err = s.db.ListMessages(r.Context(), tgt.chat.ID, after, limit)
		if err != nil {
			return err
		}
	}
	out := make([]apiMessage, len(msgs))
	for i, m := range msgs {
		out[i] = toAPIMessage(m)
	}
	writeJSON(w, http.StatusOK, newList(r.Context(), out, encodeCursor('m', next)))
	return nil
}

// sendPayload is the request as the outbox keeps it: the fields the client
// sent that the API knows, unchanged.
type sendPayload struct {
	From        string   `json:"from"`
	To          string   `json:"to"`
	Text        *string  `json:"text,omitempty"`
	Attachments []string `json:"attachments,omitempty"`
	ReplyTo     string   `json:"reply_to,omitempty"`
}

const maxIdempotencyKey = 255

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	var p sendPayload
	if p.From, err = b.required("from"); err != nil {
		return err
	}
	if p.To, err = b.required("to"); err != nil {
		return err
	}
	if p.Text, err = b.optStr("text"); err != nil {
		return err
	}
	if p.Attachments, err = b.strings("attachments"); err != nil {
		return err
	}
	if p.ReplyTo, err = b.str("reply_to"); err != nil {
		return err
	}
	text := p.Text
	if text != nil && *text == "" {
		text = nil
	}
	if text == nil && len(p.Attachments) == 0 {
		e := errMissing("text")
		e.Message = "Missing required parameter: text (or attachments)."
		return e
	}
	if len(p.Attachments) > 1 {
		return errInvalid("attachments", "A message carries at most 1 attachment.")
	}
	for _, id := range p.Attachments {
		if !storage.ValidID(id, "file_") {
			return errInvalid("attachments", "attachments must hold file IDs (file_…) from POST /v1/files.")
		}
	}
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdempotencyKey {
		return errInvalid("Idempotency-Key", "Idempotency-Key is longer than %d characters.", maxIdempotencyKey)
	}

	line, err := s.lineFor(r, p.From, "from")
	if err != nil {
		return err
	}
	tgt, err := s.resolveTo(r, line, p.To)
	if err != nil {
		return err
	}
	if err := s.checkRecipient(r, line, tgt); err != nil {
		return err
	}
	for _, id := range p.Attachments {
		if _, err := s.db.FileByID(ctx, id); errors.Is(err, storage.ErrNotFound) {
			return errNotFound("file_not_found", "attachments", "No file %s.", id)
		} else if err != nil {
			return err
		}
	}
	var replyGUID string
	if p.ReplyTo != "" {
		m, err := s.findMessage(r, line, p.ReplyTo, "reply_to")
		if err != nil {
			return err
		}
		if m.ChatID != tgt.chat.ID {
			return errInvalid("reply_to", "reply_to must be a message in the chat being sent to.")
		}
		replyGUID = m.GUID
	}

	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req := storage.EnqueueRequest{Item: storage.OutboxItem{
		ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, Payload: payload,
		MaxAttempts: s.opts.MaxAttempts, ChatID: tgt.chat.ID, Text: text, FileIDs: p.Attachments, ReplyToGUID: replyGUID,
	}}
	if idem != "" {
		key := apiKey(ctx)
		sum := sha256.Sum256(append([]byte(r.URL.Path+"\x00"), payload...))
		req.IdempotencyKey, req.RequestHash = key.ID+"\x00"+idem, sum[:]
	}
	now := s.now().UTC()
	if line.IsSandbox {
		req.SandboxDay, req.SandboxQuota = now.Format(time.DateOnly), s.opts.SandboxQuota
	}
	item, replayed, err := s.db.Enqueue(ctx, req)
	switch {
	case errors.Is(err, storage.ErrIdempotencyMismatch):
		return errInvalid("Idempotency-Key", "This Idempotency-Key was used in the last 24 hours with a different request.")
	case errors.Is(err, storage.ErrSandboxQuota):
		midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
		return &Error{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "sandbox_quota_exceeded",
			Message:    fmt.Sprintf("The sandbox line sent its %d messages for today; the quota resets at midnight UTC.", s.opts.SandboxQuota),
			RetryAfter: retrySeconds(midnight.Sub(now))}
	case err != nil:
		return err
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, toAPIOutboxItem(item, requestID(ctx)))
	return nil
}

// checkRecipient applies the sandbox rules and the contact-first rule.
func (s *Server) checkRecipient(r *http.Request, line storage.Line, tgt target) error {
	if line.IsSandbox {
		st, err := s.db.Sandbox(r.Context())
		if err != nil {
			return err
		}
		if !st.Activated {
			return errForbidden("sandbox_not_activated",
				"The sandbox line %s is not activated: text it the activation code (see `blueline sandbox`) from your phone.", line.Handle)
		}
		if tgt.chat.IsGroup || tgt.contact != st.PairedHandle {
			return &Error{Status: 400, Type: typeInvalidRequest, Code: "sandbox_contact_mismatch", Param: "to",
				Message: fmt.Sprintf("The sandbox line only sends to its paired number %s.", st.PairedHandle)}
		}
	}
	if !tgt.found || !tgt.chat.HasReceivedInbound {
		return &Error{Status: 403, Type: typeInvalidRequest, Code: "contact_has_not_messaged", Param: "to",
			Message: fmt.Sprintf("%s has not messaged line %s yet; a line may only message contacts who wrote to it first.", tgt.contact, line.Handle)}
	}
	return nil
}

// findMessage resolves a msg_ ID or a network GUID to a message on line.
func (s *Server) findMessage(r *http.Request, line storage.Line, value, param string) (storage.Message, error) {
	var m storage.Message
	var err error
	if strings.HasPrefix(value, "msg_") {
		if !storage.ValidID(value, "msg_") {
			return m, errInvalid(param, "%s must be a message ID (msg_…) or GUID.", param)
		}
		m, err = s.db.MessageByID(r.Context(), value)
	} else {
		m, err = s.db.MessageByGUID(r.Context(), value)
	}
	if errors.Is(err, storage.ErrNotFound) || err == nil && m.LineID != line.ID {
		return m, errNotFound("message_not_found", param, "No message %s on line %s.", value, line.Handle)
	}
	return m, err
}
