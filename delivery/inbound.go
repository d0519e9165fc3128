package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/storage"
)

// Receiver records what the network delivers to the lines.
type Receiver struct {
	db *storage.DB
}

// NewReceiver returns a Receiver storing into db.
func NewReceiver(db *storage.DB) *Receiver { return &Receiver{db: db} }

// Receive implements bridge.Sink.
func (r *Receiver) Receive(ctx context.Context, in bridge.Inbound) error {
	_, err := r.Record(ctx, in)
	return err
}

// Record stores an inbound message and returns what was stored. A message
// whose GUID was stored before is returned as it was, not stored again.
func (r *Receiver) Record(ctx context.Context, in bridge.Inbound) (storage.InboundResult, error) {
	line, ok := r.db.LineByHandle(in.Line)
	if !ok {
		return storage.InboundResult{}, fmt.Errorf("inbound message for unknown line %s", in.Line)
	}
	now := time.Now()
	if in.SentAt.IsZero() {
		in.SentAt = now
	}
	service := in.Service
	if service == "" {
		service = line.Service
	}
	return r.db.RecordInbound(ctx, storage.Inbound{
		Chat: storage.Chat{
			ID:           storage.NewID("cht_"),
			LineID:       line.ID,
			GUID:         in.Chat.GUID,
			Identifier:   in.Chat.Identifier,
			Service:      service,
			Name:         in.Chat.Name,
			IsGroup:      in.Chat.IsGroup,
			Participants: in.Chat.Participants,
		},
		Message: storage.Message{
			ID:          storage.NewID("msg_"),
			GUID:        in.GUID,
			Sender:      in.Sender,
			Text:        in.Text,
			Service:     service,
			IsFromMe:    in.IsFromMe,
			SentAt:      in.SentAt.UnixMilli(),
			SyncedAt:    now.UnixMilli(),
			ReplyToGUID: in.ReplyToGUID,
		},
	})
}
