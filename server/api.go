package server

import (
	"encoding/json"

	"github.com/blueline-app/blueline/storage"
)

// The API's resource shapes. Storage types carry more (indexes, delivery
// bookkeeping); these are exactly what clients see.

type apiLine struct {
	ID       string  `json:"id"`
	Handle   string  `json:"handle"`
	Label    *string `json:"label"`
	Service  string  `json:"service"`
	IsActive bool    `json:"is_active"`
	// Not in the reference shape; tells a client which calls the line takes.
	AdvancedFeatures bool `json:"advanced_features"`
	IsSandbox        bool `json:"is_sandbox"`
}

func (s *Server) toAPILine(l storage.Line) apiLine {
	return apiLine{ID: l.ID, Handle: l.Handle, Label: nonEmpty(l.Label), Service: l.Service, IsActive: true,
		AdvancedFeatures: s.opts.Advanced(l), IsSandbox: l.IsSandbox}
}

type apiChat struct {
	ID                 string   `json:"id"`
	LineID             string   `json:"line_id"`
	Identifier         string   `json:"identifier"`
	Service            string   `json:"service"`
	Name               *string  `json:"name"`
	IsGroup            bool     `json:"is_group"`
	Participants       []string `json:"participants"`
	HasReceivedInbound bool     `json:"has_received_inbound"`
	LastMessageAt      *int64   `json:"last_message_at"`
}

func toAPIChat(c storage.Chat) apiChat {
	out := apiChat{ID: c.ID, LineID: c.LineID, Identifier: c.Identifier, Service: c.Service, Name: nonEmpty(c.Name),
		IsGroup: c.IsGroup, Participants: c.Participants, HasReceivedInbound: c.HasReceivedInbound}
	if out.Participants == nil {
		out.Participants = []string{}
	}
	if c.LastMessageAt != 0 {
		out.LastMessageAt = &c.LastMessageAt
	}
	return out
}

type apiMessage struct {
	ID             string          `json:"id"`
	LineID         string          `json:"line_id"`
	ChatID         string          `json:"chat_id"`
	GUID           string          `json:"guid"`
	Sender         string          `json:"sender"`
	Text           *string         `json:"text"`
	Attachments    []apiAttachment `json:"attachments"`
	Service        *string         `json:"service"`
	IsFromMe       bool            `json:"is_from_me"`
	IsAudioMessage bool            `json:"is_audio_message"`
	SentAt         int64           `json:"sent_at"`
	SyncedAt       int64           `json:"synced_at"`
	OutboxID       *string         `json:"outbox_id"`
	ReplyToGUID    *string         `json:"reply_to_guid"`
	// FailedAt and Error report a message of ours the network failed
	// after it was sent (a late "Not Delivered").
	FailedAt *int64  `json:"failed_at"`
	Error    *string `json:"error"`
	// What Messages recorded later (Unix ms, null for not (yet)): the last
	// edit (text is then the latest version), the unsend (text null, no
	// attachments), and for the line's own messages delivery and reading.
	EditedAt    *int64 `json:"edited_at"`
	UnsentAt    *int64 `json:"unsent_at"`
	DeliveredAt *int64 `json:"delivered_at"`
	ReadAt      *int64 `json:"read_at"`
}

type apiAttachment struct {
	Filename      *string `json:"filename"`
	MimeType      *string `json:"mime_type"`
	Size          *int64  `json:"size"`
	URL           *string `json:"url"`
	Transcription *string `json:"transcription"`
}

// toAPIMessage gives each attachment a fresh signed download URL.
func (s *Server) toAPIMessage(m storage.Message) apiMessage {
	now := s.now()
	out := apiMessage{ID: m.ID, LineID: m.LineID, ChatID: m.ChatID, GUID: m.GUID, Sender: m.Sender, Text: m.Text,
		Attachments: make([]apiAttachment, 0, len(m.Attachments)), Service: nonEmpty(m.Service), IsFromMe: m.IsFromMe,
		IsAudioMessage: m.IsAudioMessage, SentAt: m.SentAt, SyncedAt: m.SyncedAt,
		OutboxID: nonEmpty(m.OutboxID), ReplyToGUID: nonEmpty(m.ReplyToGUID), Error: nonEmpty(m.Error),
		FailedAt: nonZero(m.FailedAt), EditedAt: nonZero(m.EditedAt), UnsentAt: nonZero(m.UnsentAt),
		DeliveredAt: nonZero(m.DeliveredAt), ReadAt: nonZero(m.ReadAt)}
	for _, a := range m.Attachments {
		size := a.Size
		item := apiAttachment{Filename: nonEmpty(a.Filename), MimeType: nonEmpty(a.MimeType), Size: &size, Transcription: a.Transcription}
		if a.FileID != "" {
			url := s.files.URL(a.FileID, now)
			item.URL = &url
		}
		out.Attachments = append(out.Attachments, item)
	}
	return out
}

type apiFile struct {
	ID        string  `json:"id"`
	URL       string  `json:"url"`
	Filename  *string `json:"filename"`
	MimeType  string  `json:"mime_type"`
	Size      int64   `json:"size"`
	RequestID string  `json:"request_id"`
}

type apiReaction struct {
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	// Type is one of the six classic tapbacks, or "emoji" (see Emoji) or
	// "sticker" for the tapbacks of recent Apple systems.
	Type     string  `json:"type"`
	Emoji    *string `json:"emoji"`
	Sender   string  `json:"sender"`
	IsFromMe bool    `json:"is_from_me"`
	Added    bool    `json:"added"`
	SentAt   int64   `json:"sent_at"`
	SyncedAt int64   `json:"synced_at"`
}

func toAPIReaction(r storage.Reaction) apiReaction {
	return apiReaction{ID: r.ID, MessageID: r.MessageID, ChatID: r.ChatID, Type: r.Type, Emoji: nonEmpty(r.Emoji), Sender: r.Sender, IsFromMe: r.IsFromMe,
		Added: r.Added, SentAt: r.SentAt, SyncedAt: r.SyncedAt}
}

type apiIndicator struct {
	ID        string `json:"id"`
	ChatID    string `json:"chat_id"`
	Handle    string `json:"handle"`
	IsTyping  bool   `json:"is_typing"`
	UpdatedAt int64  `json:"updated_at"`
}

type apiReceipt struct {
	ID         string `json:"id"`
	ChatID     string `json:"chat_id"`
	Handle     string `json:"handle"`
	LastReadAt int64  `json:"last_read_at"`
	SyncedAt   int64  `json:"synced_at"`
}

type apiOutboxItem struct {
	ID          string          `json:"id"`
	LineID      string          `json:"line_id"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
	CompletedAt *int64          `json:"completed_at"`
	Error       *string         `json:"error"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	CreatedAt   int64           `json:"created_at"`
	RequestID   string          `json:"request_id"`
	// Where a sent message went out, when the network tells: the chat GUID
	// and service it finally used, and whether it fell back to SMS.
	ChatGUID    *string `json:"chat_guid"`
	Service     *string `json:"service"`
	SMSFallback bool    `json:"sms_fallback"`
}

func toAPIOutboxItem(o storage.OutboxItem, requestID string) apiOutboxItem {
	out := apiOutboxItem{ID: o.ID, LineID: o.LineID, Status: o.Status, Payload: o.Payload, Error: nonEmpty(o.Error),
		Attempts: o.Attempts, MaxAttempts: o.MaxAttempts, CreatedAt: o.CreatedAt, RequestID: requestID,
		ChatGUID: nonEmpty(o.SentChatGUID), Service: nonEmpty(o.SentService), SMSFallback: o.SMSFallback}
	if o.CompletedAt != 0 {
		out.CompletedAt = &o.CompletedAt
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nonZero is a time in Unix ms, nil for 0 (not (yet)).
func nonZero(ms int64) *int64 {
	if ms == 0 {
		return nil
	}
	return &ms
}
