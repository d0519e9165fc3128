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
	"github.com/blueline-app/blueline/webhook"
)

func (a *app) webhooksCommand() *cobra.Command {
	hooks := group("webhooks", "List webhooks, their delivery attempts; redeliver; send a test event",
		"  blueline webhooks list\n  blueline webhooks deliveries --webhook wh_… --limit 20\n  blueline webhooks redeliver dlv_…\n  blueline webhooks test wh_…",
		"list, deliveries, redeliver or test")
	hooks.AddCommand(a.webhooksListCommand(), a.webhooksDeliveriesCommand(), a.webhooksRedeliverCommand(), a.webhooksTestCommand())
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
	return a.idActionCommand(&cobra.Command{
		Use:     "redeliver DELIVERY_ID",
		Short:   "Queue a delivery again now (same delivery_id), whatever its state",
		Long:    "Queue a delivery again now, with the same delivery_id, whatever its state. Its webhook must be active.",
		Example: "  blueline webhooks redeliver dlv_…",
	}, "/webhooks/redeliver", "queued", "queued %s again\n")
}

// idActionCommand completes c as a command that posts its one ID argument
// to the admin path and prints what was done: done as a line (a format
// taking the ID), or {id, <field>: true} with --json.
func (a *app) idActionCommand(c *cobra.Command, path, field, done string) *cobra.Command {
	var asJSON bool
	c.Args = oneArg("one ID")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if err := a.adminDo(cmd.Context(), http.MethodPost, path, map[string]string{"id": args[0]}, nil); err != nil {
			return err
		}
		if asJSON {
			return printJSON(a.stdout, map[string]any{"id": args[0], field: true})
		}
		fmt.Fprintf(a.stdout, done, args[0])
		return nil
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return c
}

func (a *app) webhooksTestCommand() *cobra.Command {
	var event string
	var asJSON bool
	c := &cobra.Command{
		Use:   "test WEBHOOK_ID [--event EVENT]",
		Short: "Send a signed test event to a webhook and print its receiver's answer",
		Long: `Send a webhook one test event, signed and posted exactly as a delivery is
(same headers, signature, address policy and timeout), and print what its
receiver answered: HTTP status, latency, the first bytes of its body, or
what went wrong. The event is of a type the webhook subscribes to (by
default its first), with sample data in the event's real shape: IDs such
as msg_test_…, and "test": true beside "event". It is sent once and is not
recorded as a delivery.

Exits 0 when the receiver answered 2xx, 1 otherwise.`,
		Example: "  blueline webhooks test wh_…\n  blueline webhooks test wh_… --event reaction.added --json",
		Args:    oneArg("one webhook ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res webhook.TestResult
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/webhooks/test", server.WebhookTestRequest{ID: args[0], Event: event}, &res); err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(a.stdout, res); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(a.stdout, testLine(args[0], res))
			}
			if res.Error != "" {
				return fmt.Errorf("webhook %s did not accept the test event: %s", args[0], res.Error)
			}
			return nil
		},
	}
	c.Flags().StringVar(&event, "event", "", "the event to send, one the webhook subscribes to (default its first)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the receiver's answer as JSON")
	return c
}

// testLine is a test event's outcome on one line: webhook, event, status
// (- when none came), latency, then the start of the answer's body or what
// went wrong.
func testLine(id string, res webhook.TestResult) string {
	status, outcome := "-", strings.Join(strings.Fields(res.Body), " ")
	if res.StatusCode != 0 {
		status = fmt.Sprint(res.StatusCode)
	}
	if res.Error != "" && res.StatusCode == 0 {
		outcome = res.Error
	}
	return strings.TrimSpace(fmt.Sprintf("%s\t%s\t%s\t%dms\t%s", id, res.Event, status, res.LatencyMs, outcome))
}
