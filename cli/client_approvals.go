package cli

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client/api"
)

// outboxWaitingCommand lists agent keys' drafts waiting for approval.
func (a *app) outboxWaitingCommand() *cobra.Command {
	var f apiFlags
	var line string
	c := &cobra.Command{
		Use:   "waiting [--line HANDLE]",
		Short: "List agent keys' drafts waiting for your approval",
		Long: `List the drafts of agent keys waiting for the owner's approval (approval
"waiting"), the soonest to expire first: ID, chat, when it expires, and its
text. Approve one with outbox approve, decline it with outbox decline.`,
		Example: "  blueline outbox waiting\n  blueline outbox waiting --line +15550000001 --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			items, err := c.Outbox.Waiting(ctx, line)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(items))
			for _, it := range items {
				var p struct {
					Text *string `json:"text"`
				}
				_ = json.Unmarshal(it.Payload, &p) // a payload without text shows as -
				expires := "-"
				if it.ApprovalExpiresAt != nil {
					expires = time.UnixMilli(*it.ApprovalExpiresAt).UTC().Format(time.RFC3339)
				}
				rows = append(rows, []string{it.ID, orNil(it.ChatID), expires, truncate(orNil(p.Text), 60)})
			}
			return a.printList(f.json, listJSON(items), []string{"ID", "CHAT", "EXPIRES", "TEXT"}, rows, "")
		}),
	}
	f.add(c)
	c.Flags().StringVar(&line, "line", "", "only this line's drafts: its handle or ln_ ID (default every line)")
	return c
}

// outboxApproveCommand sends a draft waiting for approval.
func (a *app) outboxApproveCommand() *cobra.Command {
	var f apiFlags
	var text string
	c := &cobra.Command{
		Use:   "approve OUTBOX_ID [--text TEXT]",
		Short: "Approve an agent key's draft: it is sent",
		Long: `Approve a draft an agent key's send left waiting for the owner's approval
(approval "waiting"): it is sent, with --text instead of its own text when
given. A draft approved or declined already, or past its expiry, cannot be
(approval_answered, approval_expired).`,
		Example: "  blueline outbox approve obx_…\n  blueline outbox approve obx_… --text \"See you at 6\"",
		Args:    exactArgs(1, "OUTBOX_ID"),
	}
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		var replace *string
		if c.Flags().Changed("text") {
			replace = &text
		}
		item, err := conn.Outbox.Approve(ctx, args[0], replace)
		return a.printAnswer(f, item, err)
	})
	f.add(c)
	c.Flags().StringVar(&text, "text", "", "send this text instead of the draft's")
	return c
}

// outboxDeclineCommand declines a draft waiting for approval.
func (a *app) outboxDeclineCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:   "decline OUTBOX_ID",
		Short: "Decline an agent key's draft: it is never sent",
		Long: `Decline a draft an agent key's send left waiting for the owner's approval: it
ends failed with error "declined" and is never sent.`,
		Example: "  blueline outbox decline obx_…",
		Args:    exactArgs(1, "OUTBOX_ID"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			item, err := c.Outbox.Decline(ctx, args[0])
			return a.printAnswer(f, item, err)
		}),
	}
	f.add(c)
	return c
}

// approvalColumn is keys list's APPROVAL: whether the key's messages wait
// for approval, and for whom not.
func approvalColumn(k api.KeyInfo) string {
	if k.Approval != api.ApprovalRequired || len(k.ApprovalExcept) == 0 {
		return orDash(k.Approval)
	}
	return k.Approval + " except " + strings.Join(k.ApprovalExcept, ",")
}
