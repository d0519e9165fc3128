package goclient_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

func TestBlockedContacts(t *testing.T) {
	td := startDaemon(t, "")
	ctx := t.Context()
	c := td.client(td.key("", ""))
	td.Inbound(mainLine, alice, "hello")

	b, err := c.Blocked.Block(ctx, mainLine, "+1 555 111 0001")
	if err != nil || b.Handle != alice || b.CreatedAt == 0 || b.RequestID == "" {
		t.Fatalf("block: %+v, %v", b, err)
	}
	_, err = c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "hi"})
	apiErr(t, err, client.ErrPermission, 403, "contact_blocked")

	imp, err := c.Blocked.Import(ctx, mainLine, strings.NewReader("handle\n"+carol+"\nnot a handle\n"))
	if err != nil || imp.Added != 1 || imp.Blocked != 1 || len(imp.Rejected) != 1 || imp.Rejected[0].Row != 3 {
		t.Fatalf("import: %+v, %v", imp, err)
	}
	var handles []string
	for bc, err := range c.Blocked.List(ctx, client.BlockedListParams{From: mainLine, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, bc.Handle)
	}
	if !slices.Equal(handles, []string{alice, carol}) {
		t.Errorf("list: %q", handles)
	}
	csv, err := c.Blocked.Export(ctx, mainLine)
	if err != nil || string(csv) != "handle\n"+alice+"\n"+carol+"\n" {
		t.Errorf("export: %q, %v", csv, err)
	}
	un, err := c.Blocked.Unblock(ctx, mainLine, alice)
	if err != nil || !un.Deleted || un.Handle != alice {
		t.Fatalf("unblock: %+v, %v", un, err)
	}
	_, err = c.Blocked.Unblock(ctx, mainLine, alice)
	apiErr(t, err, client.ErrNotFound, 404, "contact_not_blocked")
	_, err = c.Blocked.Export(ctx, "+15559999999")
	apiErr(t, err, client.ErrNotFound, 404, "line_not_found")

	// An opt-out, and its event on the stream of a key that asks for it.
	td.Inbound(mainLine, alice, "STOP")
	_, err = c.Messages.Send(ctx, client.MessageSendParams{From: mainLine, To: alice, Text: "hi"})
	apiErr(t, err, client.ErrPermission, 403, "contact_opted_out")
	var opted []api.OptedOutContact
	for o, err := range c.OptedOut.List(ctx, client.BlockedListParams{From: mainLine}) {
		if err != nil {
			t.Fatal(err)
		}
		opted = append(opted, o)
	}
	if len(opted) != 1 || opted[0].Handle != alice || opted[0].Word == nil || *opted[0].Word != "STOP" || opted[0].OptedOutAt == 0 {
		t.Errorf("opted-out list: %+v", opted)
	}
	streamCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for ev, err := range c.Events.Stream(streamCtx, client.EventStreamParams{Events: []string{api.EventContactOptedOut}}) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := ev.Contact()
		if err != nil || d.Handle != alice || d.LineHandle != mainLine || !strings.HasPrefix(d.ChatID, "cht_") || d.At == 0 {
			t.Fatalf("contact.opted_out: %+v, %v", d, err)
		}
		break
	}
}
