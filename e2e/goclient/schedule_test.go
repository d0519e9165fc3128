package goclient_test

import (
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
)

func TestScheduledSendAndCancel(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	td.Inbound(mainLine, alice, "hi")

	at := time.Now().Add(time.Hour).UnixMilli()
	sent, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "later", SendAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Status != client.StatusPending || sent.SendAt == nil || *sent.SendAt != at {
		t.Fatalf("scheduled send: %+v", sent)
	}
	item, err := c.Outbox.Cancel(ctx, sent.ID)
	if err != nil || item.Status != client.StatusFailed || item.Error == nil || *item.Error != "canceled" || item.CompletedAt == nil {
		t.Fatalf("cancel: %+v %v", item, err)
	}
	_, err = c.Outbox.Cancel(ctx, sent.ID)
	if e := apiErr(t, err, client.ErrInvalidRequest, 409, "outbox_item_not_pending"); e.Param != "id" {
		t.Errorf("param %q", e.Param)
	}
	_, err = c.Outbox.Cancel(ctx, "obx_nothing")
	apiErr(t, err, client.ErrNotFound, 404, "outbox_item_not_found")

	now, err := c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "now"})
	if err != nil || now.SendAt != nil {
		t.Fatalf("unscheduled send: %+v %v", now, err)
	}
	waitSent(t, c, now.ID)
}
