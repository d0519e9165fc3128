package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// linesGuardCommand shows each line's Apple ID guard and today's standing.
func (a *app) linesGuardCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:   "guard",
		Short: "Show each line's Apple ID guard: on or off, its pace, today's counts against its caps",
		Long: `Show each line's Apple ID guard: whether it is on, its pace, and today's
counts (UTC) against its caps: messages accepted against max_ratio times the
messages received (at least one), cold contacts messaged against
max_cold_contacts. A cap of 0 is no cap. --json prints the lines as the API
lists them, each with its "guard".`,
		Example: "  blueline lines guard\n  blueline lines guard --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			lines, err := c.Lines.List(ctx)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(lines))
			for _, l := range lines {
				g := l.Guard
				on, sentCap, coldCap := "off", "-", "-"
				if g.Enabled {
					on = "on"
				}
				if g.Limits.MaxRatio > 0 {
					sentCap = fmt.Sprint(g.SentAllowed())
				}
				if g.Limits.MaxColdContacts > 0 {
					coldCap = fmt.Sprint(g.Limits.MaxColdContacts)
				}
				unanswered := "-"
				if g.Limits.MaxUnanswered > 0 {
					unanswered = fmt.Sprint(g.Limits.MaxUnanswered)
				}
				rows = append(rows, []string{l.Handle, on, (time.Duration(g.PaceMS) * time.Millisecond).String(),
					fmt.Sprintf("%d/%s", g.Today.Sent, sentCap), fmt.Sprint(g.Today.Received),
					fmt.Sprintf("%d/%s", g.Today.ColdContacts, coldCap), unanswered})
			}
			return a.printList(f.json, listJSON(lines), []string{"HANDLE", "GUARD", "PACE", "SENT", "RECEIVED", "COLD", "UNANSWERED_MAX"}, rows, "")
		}),
	}
	f.add(c)
	return c
}

// outboxCancelCommand cancels a pending outbox item.
func (a *app) outboxCancelCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:   "cancel OUTBOX_ID",
		Short: "Cancel a pending outbox item (a scheduled send, or one waiting for a retry)",
		Long: `Cancel an outbox item (obx_…) that is still pending: a send scheduled with
send_at, or one waiting for a retry or its line's pace. It ends failed with
error "canceled" and is never sent. An item already claimed, sent or failed
cannot be cancelled (outbox_item_not_pending).`,
		Example: "  blueline outbox cancel obx_…\n  blueline outbox cancel obx_… --json",
		Args:    exactArgs(1, "OUTBOX_ID"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			item, err := c.Outbox.Cancel(ctx, args[0])
			return a.printAnswer(f, item, err)
		}),
	}
	f.add(c)
	return c
}
