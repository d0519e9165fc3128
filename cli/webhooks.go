package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

func (a *app) webhooksCommand() *cobra.Command {
	hooks := group("webhooks", "Create, list and delete webhooks, see their delivery attempts; redeliver; send a test event",
		"  blueline webhooks list\n  blueline webhooks create --url https://example.com/hook --event message.received --line +15550000001\n  blueline webhooks deliveries --webhook wh_… --limit 20\n  blueline webhooks redeliver dlv_…\n  blueline webhooks test wh_…",
		"list, create, delete, deliveries, redeliver or test")
	hooks.AddCommand(a.webhooksListCommand(), a.webhooksCreateCommand(), a.webhooksDeleteCommand(),
		a.webhooksDeliveriesCommand(), a.webhooksRedeliverCommand(), a.webhooksTestCommand())
	return hooks
}

func (a *app) webhooksListCommand() *cobra.Command {
	var f apiFlags
	var line string
	c := &cobra.Command{
		Use:   "list [--line HANDLE]",
		Short: "List every webhook with its state, or a line's through the API",
		Long: `On the host: list every webhook: ID, line, state (active, failing since …,
inactive), events, URL. On a terminal, an aligned table with a header;
otherwise one tab-separated line per webhook; --json, a JSON array.

With --line, or over the network (--base-url, which needs --line): the API's
list of the line's active webhooks: ID, URL, events, whether active; --json
prints the API's list, secrets included.`,
		Example: "  blueline webhooks list\n  blueline webhooks list --json\n  blueline webhooks list --line +15550000001\n  BLUELINE_API_KEY=sk_live_… blueline webhooks list --line +15550000001 --base-url https://blueline.example.com",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if line == "" && f.baseURL == "" && a.env.getenv(envBaseURL) == "" {
				if f.owner != "" {
					return usageErrorf("webhooks list takes --owner with --line")
				}
				return a.webhooksAdminList(cmd, f.json)
			}
			return a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
				if line == "" {
					return usageErrorf("webhooks list needs --line over the network (see `blueline lines list`)")
				}
				hooks, err := c.Webhooks.List(ctx, line)
				if err != nil {
					return err
				}
				rows := make([][]string, 0, len(hooks))
				for _, h := range hooks {
					rows = append(rows, []string{h.ID, h.URL, strings.Join(h.Events, ","), fmt.Sprint(h.IsActive)})
				}
				return a.printList(f.json, listJSON(hooks), []string{"ID", "URL", "EVENTS", "ACTIVE"}, rows, "")
			})(cmd, args)
		},
	}
	f.add(c)
	c.Flags().Lookup("json").Usage = "print JSON: on the host without --line, the webhooks as an array; else the API's list"
	c.Flags().StringVar(&line, "line", "", "list this line's webhooks through the API (required with --base-url)")
	return c
}

// webhooksAdminList is webhooks list on the host: every webhook, from the
// admin socket.
func (a *app) webhooksAdminList(cmd *cobra.Command, asJSON bool) error {
	var hooks []api.WebhookInfo
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
}

func (a *app) webhooksCreateCommand() *cobra.Command {
	var f apiFlags
	var hookURL, line string
	var events []string
	c := &cobra.Command{
		Use:   "create --url URL --event EVENT [--event EVENT…] [--line HANDLE]",
		Short: "Register a webhook for a line's events and print its secret",
		Long: `Register a webhook: the daemon posts the line's events (--event, repeatable or
comma-separated: message.received, message.sent, reaction.added,
reaction.removed, and Blueline's own) to --url, an https:// URL, signed with
the secret printed here. Without --line, the line is the only active line.`,
		Example: "  blueline webhooks create --url https://example.com/hook --event message.received --line +15550000001\n  blueline webhooks create --url https://example.com/hook --event message.received,reaction.added --line +15550000001 --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if hookURL == "" || len(events) == 0 {
				return usageErrorf("webhooks create needs --url and at least one --event")
			}
			from, err := resolveFrom(ctx, c, line)
			if err != nil {
				return err
			}
			h, err := c.Webhooks.Create(ctx, client.WebhookCreateParams{From: from, URL: hookURL, Events: splitList(strings.Join(events, ","))})
			if err != nil {
				return err
			}
			if err := printResult(a.stdout, f.json, "Created webhook "+h.ID+" for "+from, h); err != nil {
				return err
			}
			if !f.json {
				fmt.Fprintln(a.stdout, "Deliveries are signed with the secret above: give it to the receiver (client.VerifyWebhook).")
			}
			return nil
		}),
	}
	f.add(c)
	c.Flags().StringVar(&hookURL, "url", "", "the receiver's https:// URL (required)")
	c.Flags().StringArrayVar(&events, "event", nil, "an event to deliver, repeatable (required)")
	c.Flags().StringVar(&line, "line", "", "the line whose events are delivered (default: the only active line)")
	return c
}

func (a *app) webhooksDeleteCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:     "delete WEBHOOK_ID",
		Short:   "Delete a webhook; its pending deliveries are dropped",
		Example: "  blueline webhooks delete wh_…\n  blueline webhooks delete wh_… --json",
		Args:    exactArgs(1, "WEBHOOK_ID"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			res, err := c.Webhooks.Delete(ctx, args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(a.stdout, res)
			}
			_, err = fmt.Fprintf(a.stdout, "Deleted webhook %s\n", res.ID)
			return err
		}),
	}
	f.add(c)
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
as msg_test…, and "test": true beside "event". It is sent once and is not
recorded as a delivery.

Exits 0 when the receiver answered 2xx, 1 otherwise.`,
		Example: "  blueline webhooks test wh_…\n  blueline webhooks test wh_… --event reaction.added --json",
		Args:    oneArg("one webhook ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res webhook.TestResult
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/webhooks/test", api.WebhookTestRequest{ID: args[0], Event: event}, &res); err != nil {
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
	status, outcome := "-", oneLine(res.Body)
	if res.StatusCode != 0 {
		status = fmt.Sprint(res.StatusCode)
	}
	if res.Error != "" && res.StatusCode == 0 {
		outcome = res.Error
	}
	return strings.TrimSpace(fmt.Sprintf("%s\t%s\t%s\t%dms\t%s", id, res.Event, status, res.LatencyMs, printable(outcome)))
}
