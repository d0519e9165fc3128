package client

import "context"

// MessageEditParams replaces the text of a message the line sent; the line
// needs the edit capability.
type MessageEditParams struct {
	From      string `json:"from"`       // the line (required)
	MessageID string `json:"message_id"` // a msg_ ID or GUID of a message the line sent (required)
	Text      string `json:"text"`       // the new text (required)

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Edit queues an edit; the answer is its outbox item, with the message's
// chat as ChatID. The message's Text and EditedAt change when the network
// records the edit (event message.edited). Messages' limits are checked
// when the edit is accepted: within 15 minutes of sending
// (edit_window_expired) and at most 5 edits (edit_limit_reached); a
// contact's message, an unsent one or one sent over SMS is
// invalid_parameter_value. All are 400s (ErrInvalidRequest) with Param
// "message_id".
func (s *MessageService) Edit(ctx context.Context, p MessageEditParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/edits", p, p.IdempotencyKey)
}

// MessageUnsendParams takes back a message the line sent; the line needs
// the unsend capability.
type MessageUnsendParams struct {
	From      string `json:"from"`       // the line (required)
	MessageID string `json:"message_id"` // a msg_ ID or GUID of a message the line sent (required)

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Unsend queues an unsend; the answer is its outbox item. The message's
// UnsentAt is set, its text and attachments removed, when the network
// records it (event message.unsent). An unsend must come within 2 minutes
// of sending (400 unsend_window_expired, Param "message_id").
func (s *MessageService) Unsend(ctx context.Context, p MessageUnsendParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/unsends", p, p.IdempotencyKey)
}
