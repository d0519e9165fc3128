package goclient_test

import (
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/testkit"
)

// TestSearch: the client's full-text search finds what the line stores
// as it is now (an edit replaces the words a message is found by), on the
// sandbox line only the owner's own chat, and refuses a query without
// words.
func TestSearch(t *testing.T) {
	td := startDaemon(t, "")
	c := td.client(td.key("", ""))
	ctx := t.Context()
	td.Inbound(mainLine, alice, "hi")
	m := sentMessage(t, c, alice, "the parcel left the depot")
	search := func(from, q string) []string {
		page, err := c.Messages.Search(ctx, client.MessageSearchParams{From: from, Query: q})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	testkit.Eventually(t, 10*time.Second, func() bool { ids := search(mainLine, "parcel depot"); return len(ids) == 1 && ids[0] == m.ID })
	edit, err := c.Messages.Edit(ctx, client.MessageEditParams{From: mainLine, MessageID: m.ID, Text: "the parcel reached the warehouse"})
	if err != nil {
		t.Fatal(err)
	}
	waitSent(t, c, edit.ID)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(search(mainLine, "depot")) == 0 && len(search(mainLine, "warehouse")) == 1 })

	// Another owner's sandbox chat is not searched by an owner without
	// one. The index applies what is stored in order: once a later
	// message is found, the sandbox's is indexed.
	td.Inbound(sandboxLine, alice, "sandbox parcel")
	td.Inbound(mainLine, alice, "a later parcel")
	testkit.Eventually(t, 10*time.Second, func() bool { return len(search(mainLine, "later")) == 1 })
	owner := td.client(td.key("", "someone"))
	if page, err := owner.Messages.Search(ctx, client.MessageSearchParams{From: sandboxLine, Query: "sandbox"}); err != nil || len(page.Data) != 0 {
		t.Errorf("an owner without a sandbox chat: %+v %v", page, err)
	}

	_, err = c.Messages.Search(ctx, client.MessageSearchParams{From: mainLine, Query: `" - "`})
	apiErr(t, err, client.ErrInvalidRequest, 400, "invalid_parameter_value")
	_, err = c.Messages.Search(ctx, client.MessageSearchParams{From: mainLine})
	apiErr(t, err, client.ErrInvalidRequest, 400, "missing_required_parameter")
}
