package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// The examples that need a daemon are compiled, not run (they have no
// Output): e2e/goclient runs the same calls against a real one.

// Send a text, then follow its outbox item until it is sent or failed.
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", client.WithAPIKey(os.Getenv("BLUELINE_API_KEY")))

	item, err := c.Messages.Send(ctx, client.MessageSendParams{
		From:           "+15550000001", // a line of the daemon (GET /v1/lines)
		To:             "+15551230001", // E.164, or an e-mail address for iMessage
		Text:           "Your table is ready",
		IdempotencyKey: "order-1234", // a retry with this key sends nothing twice
	})
	var apiErr *client.Error
	switch {
	case errors.Is(err, client.ErrInvalidRequest) && errors.As(err, &apiErr):
		log.Fatalf("refused: %s (%s)", apiErr.Message, apiErr.Param)
	case err != nil:
		log.Fatal(err)
	}
	for item.Status == "pending" || item.Status == "claimed" {
		time.Sleep(time.Second)
		got, err := c.Outbox.Get(ctx, item.ID)
		if err != nil {
			log.Fatal(err)
		}
		item.OutboxItem = *got
	}
	fmt.Println(item.Status) // "sent", or "failed" with item.Error
}

// List a conversation, newest first. Text is a pointer: nil for a message
// with no text (a file, a voice memo), which is not the same as "".
func ExampleMessageService_List() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", client.WithAPIKey(os.Getenv("BLUELINE_API_KEY")))

	n := 0
	for m, err := range c.Messages.List(ctx, client.MessageListParams{From: "+15550000001", To: "+15551230001"}) {
		if err != nil {
			log.Fatal(err) // the iteration stops at the first error
		}
		text := "(no text)"
		if m.Text != nil {
			text = *m.Text
		}
		fmt.Printf("%s %s: %s (%d files)\n", time.UnixMilli(m.SentAt).Format(time.DateTime), m.Sender, text, len(m.Attachments))
		if n++; n == 50 {
			break // pages are fetched as the loop goes: stop when you have enough
		}
	}
}

// Wait for events without a webhook. The stream needs a key with
// webhooks:read (and messages:read for the message events). It does not
// end on a network error: it yields the error, waits a second and follows
// the stream again from the last event it yielded, so a loop that logs
// and goes on loses nothing the server still keeps. Only an API error (a
// revoked key, a refused parameter) or ctx ends it.
func ExampleEventService_Stream() {
	ctx, stop := context.WithTimeout(context.Background(), time.Hour)
	defer stop()
	c := client.New("http://127.0.0.1:8080", client.WithAPIKey(os.Getenv("BLUELINE_API_KEY")))

	for ev, err := range c.Events.Stream(ctx, client.EventStreamParams{Events: []string{api.EventMessageReceived}}) {
		var apiErr *client.Error
		if errors.As(err, &apiErr) {
			log.Fatalf("the stream ended: %v", apiErr) // the last thing it yields
		}
		if err != nil {
			log.Printf("stream interrupted, resuming: %v", err)
			continue
		}
		m, err := ev.Message()
		if err != nil {
			continue // not a message event
		}
		if m.Text != nil {
			fmt.Printf("%s wrote %q (resume after %d)\n", m.Sender, *m.Text, ev.Seq)
		}
	}
}

// Check a webhook delivery in a receiver: the body must be read whole and
// passed as received. A refusal wraps client.ErrSignature.
func ExampleVerifyWebhook() {
	secret := "whsec_test" // the webhook's secret, from its creation
	http.HandleFunc("/hooks/blueline", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		ev, err := client.VerifyWebhook(secret, r.Header, body, 0, time.Now())
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Deliveries are retried: drop one already handled by ev.DeliveryID.
		log.Printf("%s %s", ev.Type, ev.DeliveryID)
		w.WriteHeader(http.StatusNoContent)
	})

	// What the daemon sends, signed here for the example.
	data, _ := json.Marshal(api.MessageEventData{Message: api.Message{ID: "msg_1", Sender: "+15551230001"}, LineHandle: "+15550000001"})
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	body, header, _ := client.SignWebhook(secret, api.Event{Type: api.EventMessageReceived, Data: data, DeliveryID: "dlv_1"}, at)

	ev, err := client.VerifyWebhook(secret, header, body, 0, at.Add(time.Minute))
	fmt.Println(ev.Type, err)
	_, err = client.VerifyWebhook("another secret", header, body, 0, at.Add(time.Minute))
	fmt.Println(errors.Is(err, client.ErrSignature))
	_, err = client.VerifyWebhook(secret, header, body, 0, at.Add(time.Hour))
	fmt.Println(errors.Is(err, client.ErrSignature))
	// Output:
	// message.received <nil>
	// true
	// true
}
