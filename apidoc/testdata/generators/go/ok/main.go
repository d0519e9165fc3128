// A program against the Go client oapi-codegen generates from
// apidoc/openapi.json: apidoc/generators.sh builds it, so a document change
// that breaks the generated client, or types a request wrong, fails CI.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"gencheck/blueline"
)

func main() {
	ctx := context.Background()
	c, err := blueline.NewClientWithResponses("http://127.0.0.1:8080")
	if err != nil {
		panic(err)
	}

	// The send body: from and to are required (plain strings), text and
	// attachments optional (pointers).
	text := "hi"
	body := blueline.SendMessageJSONRequestBody{From: "+15550000001", To: "+15551230001", Text: &text}
	var from, to string = body.From, body.To
	var _ *string = body.Text
	var _ *[]string = body.Attachments
	fmt.Println(from, to)
	sent, err := c.SendMessageWithResponse(ctx, &blueline.SendMessageParams{}, body)
	if err == nil {
		switch {
		case sent.JSON201 != nil:
			fmt.Println(sent.JSON201.Id, sent.JSON201.Status)
		case sent.JSON400 != nil:
			report(sent.JSON400)
		case sent.JSON404 != nil:
			report(sent.JSON404)
		}
	}

	// A tapback: a named one, or one emoji itself.
	_ = blueline.SendReactionJSONRequestBody{From: "+15550000001", To: "+15551230001", MessageId: "msg_1", Type: "🎉"}

	// A page of messages.
	limit := blueline.Limit(20)
	page, err := c.ListMessagesWithResponse(ctx, &blueline.ListMessagesParams{From: "+15550000001", To: "+15551230001", Limit: &limit})
	if err == nil && page.JSON200 != nil {
		for _, m := range page.JSON200.Data {
			fmt.Println(m.Id)
		}
	}

	// A webhook delivery: one type for every event, told apart by event.
	var ev blueline.WebhookEvent
	if err := json.NewDecoder(os.Stdin).Decode(&ev); err == nil {
		if name, err := ev.Discriminator(); err == nil && name == "message.received" {
			if m, err := ev.AsMessageReceivedEvent(); err == nil {
				fmt.Println(m.Data.Id)
			}
		}
	}
}

// report takes every error answer: the document has one error schema.
func report(e *blueline.Error) { fmt.Println(e.Error.Type, e.Error.Code, e.Error.Message) }
