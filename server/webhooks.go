package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

func toAPIWebhook(w storage.Webhook, requestID string) api.Webhook {
	return api.Webhook{ID: w.ID, LineIDs: w.LineIDs, URL: w.URL, Events: w.Events, Arrival: wakeArrivals(w.Wake),
		IncludeFiltered: !w.SkipFiltered, Secret: w.Secret, IsActive: w.IsActive, CreatedAt: w.CreatedAt, RequestID: requestID}
}

// undelivered are events the reference lists but does not deliver.
var undelivered = []string{"typing.started", "typing.stopped"}

// maxWebhooksPerLine bounds the fan-out of one event.
const maxWebhooksPerLine = 50

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	from, err := b.optStr("from")
	if err != nil {
		return err
	}
	if from == nil {
		return httpapi.Missing("from")
	}
	rawURL, err := b.required("url")
	if err != nil {
		return err
	}
	events, err := b.strings("events")
	if err != nil {
		return err
	}
	if events == nil {
		return httpapi.Missing("events")
	}
	if len(events) == 0 {
		return httpapi.Invalid("events", "events must name at least one of %s.", strings.Join(api.WebhookEvents, ", "))
	}
	var subscribed []string
	for _, e := range events {
		switch {
		case slices.Contains(undelivered, e):
			return httpapi.Invalid("events", "%s events are not delivered by webhooks; subscribe to %s.", e, strings.Join(api.WebhookEvents, ", "))
		case !slices.Contains(api.WebhookEvents, e):
			return httpapi.Invalid("events", "Unknown event %q; events are %s.", e, strings.Join(api.WebhookEvents, ", "))
		case !slices.Contains(subscribed, e):
			subscribed = append(subscribed, e)
		}
	}
	wake, err := webhookWake(apiKey(r.Context()), b)
	if err != nil {
		return err
	}
	lines, err := s.webhookLines(r, *from)
	if err != nil {
		return err
	}
	u, err := s.opts.WebhookPolicy.CheckURL(r.Context(), strings.TrimSpace(rawURL))
	if errors.Is(err, webhook.ErrRefused) {
		return httpapi.Invalid("url", "The webhook URL is refused: %s.", strings.TrimPrefix(err.Error(), webhook.ErrRefused.Error()+": "))
	}
	if err != nil {
		return err
	}
	handles := make([]string, len(lines))
	hook := storage.Webhook{ID: storage.NewID("wh_"), Owner: apiKey(r.Context()).Owner, URL: u.String(), Events: subscribed,
		Secret: "whsec_" + randomBase62(40), IsActive: true, CreatedAt: time.Now().UnixMilli(), Wake: wake}
	for i, line := range lines {
		existing, err := s.lineWebhooks(r.Context(), line)
		if err != nil {
			return err
		}
		if len(existing) >= maxWebhooksPerLine {
			return httpapi.Invalid("from", "Line %s has %d webhooks, the most a line may have.", line.Handle, maxWebhooksPerLine)
		}
		hook.LineIDs, handles[i] = append(hook.LineIDs, line.ID), line.Handle
	}
	if err := s.db.CreateWebhook(r.Context(), hook); err != nil {
		return err
	}
	s.log.Info("webhook created", "webhook_id", hook.ID, "lines", strings.Join(handles, ","), "url", webhook.RedactURL(hook.URL))
	httpapi.WriteJSON(w, http.StatusCreated, toAPIWebhook(hook, httpapi.RequestID(r.Context())))
	return nil
}

// webhookLines are the lines a webhook registration names: the line in
// from, or, when from is empty (the reference CLI's `webhooks create`
// without --line), every line the key may use.
func (s *Server) webhookLines(r *http.Request, from string) ([]storage.Line, error) {
	if strings.TrimSpace(from) != "" {
		line, err := s.lineFor(r, from, "from")
		return []storage.Line{line}, err
	}
	key := apiKey(r.Context())
	var lines []storage.Line
	for _, l := range s.db.Lines() {
		if checkLineAccess(key, l) == nil {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil, httpapi.Invalid("from", "This API key may use no line, so an empty from names none.")
	}
	return lines, nil
}

// listWebhooks lists a line's active webhooks, all of them: the SDK pages
// this list by asking again without a cursor.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	from, err := queryHandle(r, "from")
	if err != nil {
		return err
	}
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return err
	}
	hooks, err := s.lineWebhooks(r.Context(), line)
	if err != nil {
		return err
	}
	out := []api.Webhook{}
	for _, h := range hooks {
		if h.IsActive && s.webhookVisible(r.Context(), h) {
			out = append(out, toAPIWebhook(h, ""))
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	id, err := b.requiredID("id", "wh_", "a webhook ID")
	if err != nil {
		return err
	}
	hook, err := s.db.WebhookByID(r.Context(), id)
	if err == nil && !s.webhookVisible(r.Context(), hook) {
		err = storage.ErrNotFound
	}
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("webhook_not_found", "id", "No webhook %s.", id)
	}
	if err != nil {
		return err
	}
	if err := s.db.DeleteWebhook(r.Context(), id); errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("webhook_not_found", "id", "No webhook %s.", id)
	} else if err != nil {
		return err
	}
	s.log.Info("webhook deleted", "webhook_id", id)
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true, "request_id": httpapi.RequestID(r.Context())})
	return nil
}

// webhookVisible reports whether the request's key may see a webhook: one
// whose lines it can all use, created by its owner if the sandbox line is
// among them. Lines no longer served do not count, so that a webhook of
// several lines stays in reach when one of them goes.
func (s *Server) webhookVisible(ctx context.Context, h storage.Webhook) bool {
	key := apiKey(ctx)
	served := 0
	for _, id := range h.LineIDs {
		line, ok := s.db.LineByID(id)
		if !ok {
			continue
		}
		if checkLineAccess(key, line) != nil || (line.IsSandbox && h.Owner != key.Owner) {
			return false
		}
		served++
	}
	return served > 0
}

// lineWebhooks are the webhooks that receive line's events for the
// request's key: on the sandbox line, those of the key's owner.
func (s *Server) lineWebhooks(ctx context.Context, line storage.Line) ([]storage.Webhook, error) {
	hooks, err := s.db.Webhooks(ctx, line.ID)
	if err != nil || !line.IsSandbox {
		return hooks, err
	}
	owner := apiKey(ctx).Owner
	return slices.DeleteFunc(hooks, func(h storage.Webhook) bool { return h.Owner != owner }), nil
}

// EventData implements webhook.Renderer: the resource in the API's shape,
// plus the line's handle.
func (s *Server) EventData(d storage.Delivery, lineHandle string) (json.RawMessage, error) {
	var data any
	switch {
	case d.Message != nil:
		data = api.MessageEventData{Message: s.toAPIMessage(*d.Message), LineHandle: lineHandle, Arrival: s.arrival(d),
			Filter: nonEmpty(d.ChatFilter), SenderVerified: d.Message.IsFromMe || d.Message.Service == "imessage"}
	case d.Reaction != nil:
		data = api.ReactionEventData{Reaction: toAPIReaction(*d.Reaction), LineHandle: lineHandle}
	case d.Receipt != nil:
		data = api.ReceiptEventData{Receipt: api.Receipt(*d.Receipt), LineHandle: lineHandle}
	case d.ChatUpdate != nil:
		data = toChatEventData(*d.ChatUpdate, lineHandle)
	case d.Contact != nil:
		data = api.ContactEventData{Handle: d.Contact.Handle, ChatID: d.ChatID, At: d.Contact.At, LineHandle: lineHandle}
	case d.Handoff != nil:
		data = api.HandoffEventData{ChatID: d.Handoff.ChatID, LineHandle: lineHandle, State: d.Handoff.State, Until: nonZero(d.Handoff.Until)}
	case d.Lease != nil:
		l := d.Lease
		data = api.LeaseEventData{ChatID: l.ChatID, LineHandle: lineHandle, KeyID: l.KeyID, KeyLabel: l.KeyLabel, Label: nonEmpty(l.Label),
			ExpiresAt: l.ExpiresAt, Released: nonEmpty(l.Released)}
	default:
		return nil, fmt.Errorf("delivery %s carries no event", d.ID)
	}
	return json.Marshal(data)
}

// arrival is a message event's arrival as its receiver gets it: catch-up
// when the message was read late, or when this hand-over comes more than
// bridge.LiveAge after the event was recorded (a webhook retried while its
// receiver was down, a stream resumed late).
func (s *Server) arrival(d storage.Delivery) string {
	if s.now().Sub(time.UnixMilli(d.CreatedAt)) > bridge.LiveAge {
		return api.ArrivalCatchUp
	}
	return d.RecordedArrival()
}

// toChatEventData is a chat.updated event's data; `blueline sim group`
// prints the same.
func toChatEventData(u storage.ChatUpdate, lineHandle string) api.ChatEventData {
	return api.ChatEventData{Chat: toAPIChat(u.Chat), ChatID: u.Chat.ID, LineHandle: lineHandle, Change: api.ChatChange{
		Action: u.Action, Participant: nonEmpty(u.Participant), Name: nonEmpty(u.Name), By: nonEmpty(u.By), IsFromMe: u.IsFromMe, At: u.At,
	}}
}
