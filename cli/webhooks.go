package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

func cmdWebhooks(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: webhooks needs list, deliveries or redeliver", errUsage)
	}
	fs := flag.NewFlagSet("webhooks "+args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	switch args[0] {
	case "list":
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		var hooks struct{ Data []server.WebhookInfo }
		if err := adminGet(ctx, *cfgPath, "/webhooks", &hooks); err != nil {
			return err
		}
		for _, h := range hooks.Data {
			state := "active"
			if !h.IsActive {
				state = "inactive"
			} else if h.FailingSince > 0 {
				state = "failing since " + time.UnixMilli(h.FailingSince).UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\n", h.ID, h.Line, state, strings.Join(h.Events, ","), h.URL)
		}
	case "deliveries":
		webhookID := fs.String("webhook", "", "only this webhook's attempts")
		deliveryID := fs.String("delivery", "", "only this delivery's attempts")
		limit := fs.Int("limit", 50, "how many attempts, newest first")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		q := url.Values{"limit": {fmt.Sprint(*limit)}}
		for name, v := range map[string]string{"webhook": *webhookID, "delivery": *deliveryID} {
			if v != "" {
				q.Set(name, v)
			}
		}
		var attempts struct{ Data []storage.Attempt }
		if err := adminGet(ctx, *cfgPath, "/webhooks/attempts?"+q.Encode(), &attempts); err != nil {
			return err
		}
		for _, a := range attempts.Data {
			status, outcome := "-", "ok"
			if a.StatusCode != 0 {
				status = fmt.Sprint(a.StatusCode)
			}
			if a.Error != "" {
				outcome = a.Error
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t#%d\t%s\t%dms\t%s\n", time.UnixMilli(a.At).UTC().Format("2006-01-02T15:04:05.000Z"),
				a.DeliveryID, a.WebhookID, a.Event, a.N, status, a.LatencyMs, outcome)
		}
	case "redeliver":
		id, err := adminPostID(ctx, fs, cfgPath, args[1:], "/webhooks/redeliver")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "queued %s again\n", id)
	default:
		return fmt.Errorf("%w: unknown webhooks command %q", errUsage, args[0])
	}
	return nil
}
