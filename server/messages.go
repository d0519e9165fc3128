package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/mediatype"
	"github.com/blueline-app/blueline/storage"
)

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	after, err := parseCursor(r, 'm', storage.MessageCursorLen)
	if err != nil {
		return err
	}
	tgt, err := s.chatQuery(r)
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
	out := make([]api.Message, len(msgs))
	for i, m := range msgs {
		out[i] = s.toAPIMessage(m)
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, encodeCursor('m', next)))
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
	SendAt      *int64   `json:"send_at,omitempty"`
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p sendPayload
	if p.From, p.To, err = b.fromTo(); err != nil {
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
	if p.SendAt, err = b.sendAt(s.now()); err != nil {
		return err
	}
	text := p.Text
	if text != nil && *text == "" {
		text = nil
	}
	if text == nil && len(p.Attachments) == 0 {
		e := httpapi.Missing("text")
		e.Message = "Missing required parameter: text (or attachments)."
		return e
	}
	if len(p.Attachments) > 1 {
		return httpapi.Invalid("attachments", "A message carries at most 1 attachment.")
	}
	for _, id := range p.Attachments {
		if !storage.IDShaped(id, "file_") {
			return httpapi.Invalid("attachments", "attachments must hold file IDs (file_…) from POST /v1/files.")
		}
	}
	line, tgt, err := s.conversation(r, p.From, p.To, false)
	if err != nil {
		return err
	}
	for _, id := range p.Attachments {
		if _, err := s.fileByID(r.Context(), id, "attachments"); err != nil {
			return err
		}
	}
	replyGUID, err := s.replyTo(r, line, tgt, p.ReplyTo)
	if err != nil {
		return err
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindMessage, ChatID: tgt.chat.ID, Text: text, FileIDs: p.Attachments, ReplyToGUID: replyGUID,
		SendAt: deref(p.SendAt),
	})
}

// audioPayload is POST /v1/audio-messages as the outbox keeps it; on
// /v1/voice-notes the file field is voice_note instead of audio_message.
type audioPayload struct {
	From         string `json:"from"`
	To           string `json:"to"`
	AudioMessage string `json:"audio_message,omitempty"`
	VoiceNote    string `json:"voice_note,omitempty"`
	ReplyTo      string `json:"reply_to,omitempty"`
	SendAt       *int64 `json:"send_at,omitempty"`
}

// sendAudio sends an uploaded audio file as a native voice memo. field is
// the name of the body field holding the file ID.
func (s *Server) sendAudio(field string) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		b, idem, err := s.readWrite(r)
		if err != nil {
			return err
		}
		var p audioPayload
		if p.From, p.To, err = b.fromTo(); err != nil {
			return err
		}
		fileID, err := b.required(field)
		if err != nil {
			return err
		}
		if field == "voice_note" {
			p.VoiceNote = fileID
		} else {
			p.AudioMessage = fileID
		}
		if p.ReplyTo, err = b.str("reply_to"); err != nil {
			return err
		}
		if p.SendAt, err = b.sendAt(s.now()); err != nil {
			return err
		}
		if !storage.IDShaped(fileID, "file_") {
			return httpapi.Invalid(field, "%s must be a file ID (file_…) from POST /v1/files.", field)
		}
		line, tgt, err := s.conversation(r, p.From, p.To, true)
		if err != nil {
			return err
		}
		f, err := s.fileByID(r.Context(), fileID, field)
		if err != nil {
			return err
		}
		if !mediatype.IsAudio(f.MimeType) {
			return httpapi.Invalid(field, "File %s is %s, not audio: upload the recording with an audio/… Content-Type.", f.ID, f.MimeType)
		}
		replyGUID, err := s.replyTo(r, line, tgt, p.ReplyTo)
		if err != nil {
			return err
		}
		return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
			Kind: storage.KindMessage, ChatID: tgt.chat.ID, FileIDs: []string{f.ID}, ReplyToGUID: replyGUID, IsAudioMessage: true,
			SendAt: deref(p.SendAt),
		})
	}
}

// replyTo resolves a reply_to value to the GUID of a message in the chat
// being sent to.
func (s *Server) replyTo(r *http.Request, line storage.Line, tgt target, value string) (string, error) {
	if value == "" {
		return "", nil
	}
	m, err := s.findMessage(r, line, value, "reply_to")
	if err != nil {
		return "", err
	}
	if m.ChatID != tgt.chat.ID {
		return "", httpapi.Invalid("reply_to", "reply_to must be a message in the chat being sent to.")
	}
	return m.GUID, nil
}

const maxIdempotencyKey = 255

// readWrite reads the JSON body of a write and its Idempotency-Key.
func (s *Server) readWrite(r *http.Request) (body, string, error) {
	b, err := s.readBody(r)
	if err != nil {
		return nil, "", err
	}
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdempotencyKey {
		return nil, "", httpapi.Invalid("Idempotency-Key", "Idempotency-Key is longer than %d characters.", maxIdempotencyKey)
	}
	return b, idem, nil
}

// enqueue puts an accepted write in the outbox and answers with the outbox
// item. payload is the request as the client sent it; item says what to do.
// Messages count against the sandbox's daily quota; other writes do not.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request, idem string, line storage.Line, payload any, item storage.OutboxItem) error {
	ctx := r.Context()
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	item.ID, item.LineID, item.Payload = storage.NewID("obx_"), line.ID, raw
	if item.MaxAttempts == 0 {
		item.MaxAttempts = s.opts.MaxAttempts
	}
	req := storage.EnqueueRequest{Item: item}
	if idem != "" {
		key := apiKey(ctx)
		sum := sha256.Sum256(append([]byte(r.URL.Path+"\x00"), raw...))
		req.IdempotencyKey, req.RequestHash = key.ID+"\x00"+idem, sum[:]
	}
	now := s.now().UTC()
	if line.IsSandbox && item.Kind == storage.KindMessage {
		req.SandboxDay, req.SandboxQuota, req.SandboxOwner = now.Format(time.DateOnly), s.opts.SandboxQuota, apiKey(ctx).Owner
	}
	if item.Kind == storage.KindMessage {
		req.Guard = s.guardLimits(line)
	}
	if item.Kind == storage.KindEdit {
		req.EditLimit = maxEdits
	}
	req.Agent = agentCheck(apiKey(ctx), item.ChatID, now)
	if req.Approval, err = s.approvalCheck(ctx, apiKey(ctx), line, item, now); err != nil {
		return err
	}
	stored, replayed, err := s.db.Enqueue(ctx, req)
	err = agentRefusal(err, item.ChatID, now)
	var guardErr *storage.GuardError
	var contactErr *storage.ContactError
	switch {
	case errors.Is(err, storage.ErrIdempotencyMismatch):
		return httpapi.Invalid("Idempotency-Key", "This Idempotency-Key was used in the last 24 hours with a different request.")
	case errors.Is(err, storage.ErrEditLimit):
		return errEditLimit()
	case errors.As(err, &contactErr):
		return refusedContact(contactErr, line)
	case errors.As(err, &guardErr):
		return guardError(guardErr, line, s.guard(line), now)
	case errors.Is(err, storage.ErrSandboxQuota):
		midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
		return httpapi.TooManyRequests("sandbox_quota_exceeded", httpapi.RetrySeconds(midnight.Sub(now)),
			"Your sandbox sent its %d messages for today; the quota resets at midnight UTC.", s.opts.SandboxQuota)
	case err != nil:
		return err
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	httpapi.WriteJSON(w, http.StatusCreated, toAPIOutboxItem(stored, httpapi.RequestID(ctx)))
	return nil
}

// findMessage resolves a msg_ ID or a network GUID to a message on line.
func (s *Server) findMessage(r *http.Request, line storage.Line, value, param string) (storage.Message, error) {
	var m storage.Message
	var err error
	if strings.HasPrefix(value, "msg_") {
		if !storage.IDShaped(value, "msg_") {
			return m, httpapi.Invalid(param, "%s must be a message ID (msg_…) or GUID.", param)
		}
		m, err = s.db.MessageByID(r.Context(), value)
	} else {
		m, err = s.db.MessageByGUID(r.Context(), value)
	}
	if err == nil && m.LineID != line.ID {
		err = storage.ErrNotFound
	}
	if err == nil {
		err = s.hideSandboxMessage(r.Context(), line, m)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return m, httpapi.NotFound("message_not_found", param, "No message %s on line %s.", value, line.Handle)
	}
	return m, err
}

// hideSandboxMessage is storage.ErrNotFound for a message of line in a
// chat the request's key may not see.
func (s *Server) hideSandboxMessage(ctx context.Context, line storage.Line, m storage.Message) error {
	if !line.IsSandbox {
		return nil
	}
	c, err := s.db.ChatByID(ctx, m.ChatID)
	if err == nil {
		err = s.hideSandboxChat(ctx, line, c)
	}
	return err
}

// deref is *p, or 0 for nil.
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
