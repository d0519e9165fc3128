package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

func (a *app) webhooksCommand() *cobra.Command {
	hooks := group("webhooks", "List webhooks, their delivery attempts, and redeliver",
		"  blueline webhooks list\n  blueline webhooks deliveries --webhook wh_… --limit 20\n  blueline webhooks redeliver dlv_…",
		"list, deliveries or redeliver")
	hooks.AddCommand(a.webhooksListCommand(), a.webhooksDeliveriesCommand(), a.webhooksRedeliverCommand())
	return hooks
}

func (a *app) webhooksListCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List every webhook with its state",
		Long: `List every webhook: ID, line, state (active, failing since …, inactive),
events, URL. On a terminal, an aligned table with a header; otherwise one
tab-separated line per webhook.`,
		Example: "  blueline webhooks list\n  blueline webhooks list --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var hooks []server.WebhookInfo
			raw, err := a.adminList(cmd.Context(), "/webhooks", &hooks)
			if err != nil {
				return err
			}
			if asJSON {
				return printRawJSON(a.stdout, raw)
			}
			rows := make([][]string, 0, len(hooks))
			for _, h := range hooks {
				state := "active"
				if !h.IsActive {
					state = "inactive"
				} else if h.FailingSince > 0 {
					state = "failing since " + time.UnixMilli(h.FailingSince).UTC().Format(time.RFC3339)
				}
				rows = append(rows, []string{h.ID, h.Line, state, strings.Join(h.Events, ","), h.URL})
			}
			return printTable(a.stdout, []string{"ID", "LINE", "STATE", "EVENTS", "URL"}, rows)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the webhooks as a JSON array")
	return c
}

func (a *app) webhooksDeliveriesCommand() *cobra.Command {
	var webhookID, deliveryID string
	var limit int
	var asJSON bool
	c := &cobra.Command{
		Use:   "deliveries [--webhook wh_…] [--delivery dlv_…] [--limit N]",
		Short: "List recent delivery attempts, newest first",
		Long: `List recent delivery attempts, newest first: time, delivery ID, webhook ID,
event, attempt #n, HTTP status (- when none came), latency, ok or what went
wrong. On a terminal, an aligned table with a header; otherwise one
tab-separated line per attempt.`,
		Example: "  blueline webhooks deliveries\n  blueline webhooks deliveries --webhook wh_… --limit 10\n  blueline webhooks deliveries --delivery dlv_… --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			for name, v := range map[string]string{"webhook": webhookID, "delivery": deliveryID} {
				if v != "" {
					q.Set(name, v)
				}
			}
			var attempts []storage.Attempt
			raw, err := a.adminList(cmd.Context(), "/webhooks/attempts?"+q.Encode(), &attempts)
			if err != nil {
				return err
			}
			if asJSON {
				return printRawJSON(a.stdout, raw)
			}
			rows := make([][]string, 0, len(attempts))
			for _, at := range attempts {
				status, outcome := "-", "ok"
				if at.StatusCode != 0 {
					status = fmt.Sprint(at.StatusCode)
				}
				if at.Error != "" {
					outcome = at.Error
				}
				rows = append(rows, []string{time.UnixMilli(at.At).UTC().Format("2006-01-02T15:04:05.000Z"),
					at.DeliveryID, at.WebhookID, at.Event, fmt.Sprintf("#%d", at.N), status, fmt.Sprintf("%dms", at.LatencyMs), outcome})
			}
			return printTable(a.stdout, []string{"TIME", "DELIVERY", "WEBHOOK", "EVENT", "ATTEMPT", "STATUS", "LATENCY", "OUTCOME"}, rows)
		},
	}
	f := c.Flags()
	f.StringVar(&webhookID, "webhook", "", "only this webhook's attempts")
	f.StringVar(&deliveryID, "delivery", "", "only this delivery's attempts")
	f.IntVar(&limit, "limit", 50, "how many attempts, newest first")
	f.BoolVar(&asJSON, "json", false, "print the attempts as a JSON array")
	return c
}

func (a *app) webhooksRedeliverCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "redeliver DELIVERY_ID",
		Short:   "Queue a delivery again now (same delivery_id), whatever its state",
		Long:    "Queue a delivery again now, with the same delivery_id, whatever its state. Its webhook must be active.",
		Example: "  blueline webhooks redeliver dlv_…",
		Args:    oneArg("one ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/webhooks/redeliver", map[string]string{"id": args[0]}, nil); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, map[string]any{"id": args[0], "queued": true})
			}
			fmt.Fprintf(a.stdout, "queued %s again\n", args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return c
}
