package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// An agent key made with --approval required has its messages wait as
// drafts: keys list says so, outbox waiting lists them, outbox approve
// (with --text) sends one in the owner's words, outbox decline fails
// another, and answering twice is refused.
func TestOutboxApproveDecline(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	key := strings.TrimSpace(mustCLI(t, d, "keys", "create", "--label", "drafter", "--agent", "--approval", "required",
		"--approval-except", daemontest.Bob))
	if out := mustCLI(t, d, "keys", "list"); !strings.Contains(out, "drafter") || !strings.Contains(out, "required except "+daemontest.Bob) {
		t.Errorf("keys list:\n%s", out)
	}
	if _, errOut, code := cliOn(d, "keys", "create", "--label", "x", "--approval", "required"); code == 0 || !strings.Contains(errOut, "agent") {
		t.Errorf("approval for a key that is not an agent's: exit %d, %s", code, errOut)
	}
	d.Inbound(daemontest.MainLine, daemontest.Alice, "hi")
	agent := client.New(d.URL(), client.WithAPIKey(key))
	ctx := context.Background()
	send := func(text string) string {
		t.Helper()
		item, err := agent.Messages.Send(ctx, client.MessageSendParams{From: daemontest.MainLine, To: daemontest.Alice, Text: text})
		if err != nil || item.Approval == nil || *item.Approval != api.ApprovalWaiting {
			t.Fatalf("agent send: %+v, %v", item, err)
		}
		return item.ID
	}
	approved, declined := send("draft one"), send("draft two")
	out := mustCLI(t, d, "outbox", "waiting")
	if !strings.Contains(out, approved) || !strings.Contains(out, declined) || !strings.Contains(out, "draft one") {
		t.Fatalf("outbox waiting:\n%s", out)
	}
	var item api.OutboxItem
	decodeJSON(t, "outbox approve", mustCLI(t, d, "outbox", "approve", approved, "--text", "the owner's words", "--json"), &item)
	if item.Approval == nil || *item.Approval != api.ApprovalApproved || item.ApprovalBy == nil || *item.ApprovalBy != "host" {
		t.Fatalf("outbox approve: %+v", item)
	}
	decodeJSON(t, "outbox decline", mustCLI(t, d, "outbox", "decline", declined, "--json"), &item)
	if item.Status != "failed" || item.Error == nil || *item.Error != "declined" {
		t.Fatalf("outbox decline: %+v", item)
	}
	if _, errOut, code := cliOn(d, "outbox", "approve", declined); code != 1 || !strings.Contains(errOut, "approval_answered") {
		t.Errorf("approving a declined draft: exit %d, %s", code, errOut)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		got, err := agent.Outbox.Get(ctx, approved)
		return err == nil && got.Status == "sent"
	})
	msgs, err := agent.Messages.ListPage(ctx, client.MessageListParams{From: daemontest.MainLine, To: daemontest.Alice})
	if err != nil || len(msgs.Data) == 0 || msgs.Data[0].Text == nil || *msgs.Data[0].Text != "the owner's words" {
		t.Fatalf("the chat's latest message: %+v, %v", msgs, err)
	}
}
