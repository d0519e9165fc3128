package server

import (
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// The toAPI… functions turn storage records into the API's shapes (package
// api). Storage types carry more (indexes, delivery bookkeeping); the shapes
// are exactly what clients see.

func (s *Server) toAPILine(l storage.Line) api.Line {
	out := api.Line{ID: l.ID, Handle: l.Handle, Label: nonEmpty(l.Label), Service: l.Service, IsActive: true,
		AdvancedFeatures: s.opts.Advanced(l), IsSandbox: l.IsSandbox, Capabilities: s.capabilities(l)}
	if s.opts.LineHealth != nil {
		out.Health = s.opts.LineHealth(l)
	}
	if s.opts.LineLatency != nil {
		out.Latency = s.opts.LineLatency(l)
	} else {
		out.Latency.Since = s.now().UnixMilli()
	}
	return out
}

func toAPIChat(c storage.Chat) api.Chat {
	out := api.Chat{ID: c.ID, LineID: c.LineID, Identifier: c.Identifier, Service: c.Service, Name: nonEmpty(c.Name),
		IsGroup: c.IsGroup, Participants: c.Participants, HasReceivedInbound: c.HasReceivedInbound,
		Filter: nonEmpty(c.Filter), UnreadCount: c.UnreadCount}
	if out.Participants == nil {
		out.Participants = []string{}
	}
	if c.LastMessageAt != 0 {
		out.LastMessageAt = &c.LastMessageAt
	}
	return out
}

// toAPIMessage gives each attachment a fresh signed download URL.
func (s *Server) toAPIMessage(m storage.Message) api.Message {
	now := s.now()
	out := api.Message{ID: m.ID, LineID: m.LineID, ChatID: m.ChatID, GUID: m.GUID, Sender: m.Sender, Text: m.Text,
		Attachments: make([]api.Attachment, 0, len(m.Attachments)), Service: nonEmpty(m.Service), IsFromMe: m.IsFromMe,
		IsAudioMessage: m.IsAudioMessage, SentAt: m.SentAt, SyncedAt: m.SyncedAt,
		OutboxID: nonEmpty(m.OutboxID), ReplyToGUID: nonEmpty(m.ReplyToGUID), Error: nonEmpty(m.Error),
		FailedAt: nonZero(m.FailedAt), EditedAt: nonZero(m.EditedAt), UnsentAt: nonZero(m.UnsentAt),
		DeliveredAt: nonZero(m.DeliveredAt), ReadAt: nonZero(m.ReadAt)}
	if p := m.UnsentParts; p != nil {
		out.UnsentParts = &api.UnsentParts{Text: p.Text, Attachments: append([]int{}, p.Attachments...)}
	}
	for _, a := range m.Attachments {
		size := a.Size
		item := api.Attachment{Filename: nonEmpty(a.Filename), MimeType: nonEmpty(a.MimeType), Size: &size, Transcription: a.Transcription, Inline: a.Inline}
		if a.FileID != "" {
			url := s.files.URL(a.FileID, now)
			item.URL = &url
		}
		out.Attachments = append(out.Attachments, item)
	}
	return out
}

func toAPIReaction(r storage.Reaction) api.Reaction {
	return api.Reaction{ID: r.ID, MessageID: r.MessageID, ChatID: r.ChatID, Type: r.Type, Emoji: nonEmpty(r.Emoji), Sender: r.Sender, IsFromMe: r.IsFromMe,
		Added: r.Added, SentAt: r.SentAt, SyncedAt: r.SyncedAt}
}

func toAPIOutboxItem(o storage.OutboxItem, requestID string) api.OutboxItem {
	out := api.OutboxItem{ID: o.ID, LineID: o.LineID, Status: o.Status, Payload: o.Payload, Error: nonEmpty(o.Error),
		Attempts: o.Attempts, MaxAttempts: o.MaxAttempts, CreatedAt: o.CreatedAt, RequestID: requestID,
		ChatGUID: nonEmpty(o.SentChatGUID), Service: nonEmpty(o.SentService), SMSFallback: o.SMSFallback, ChatID: nonEmpty(o.ChatID)}
	if o.CompletedAt != 0 {
		out.CompletedAt = &o.CompletedAt
	}
	out.SendAt = nonZero(o.SendAt)
	out.Approval, out.ApprovalExpiresAt, out.ApprovalBy = nonEmpty(o.Approval), nonZero(o.ApprovalExpiresAt), nonEmpty(o.ApprovalBy)
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
