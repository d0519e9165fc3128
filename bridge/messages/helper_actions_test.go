package messages

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/blueline-app/blueline/bridge"
)

// The frames of the actions beyond sending: exactly what the helper is
// handed, and what its answers become.
func TestHelperActionFrames(t *testing.T) {
	h := newTestHelper(t)
	p := connectPeer(t, h)
	const chat = "iMessage;+;chat123456789012345678"
	const target = "5A1B2C3D-0000-4000-8000-00000000ABCD"
	tests := []struct {
		name   string
		call   func(ctx context.Context) (any, error)
		answer map[string]any
		want   string
		result any
	}{
		{
			name: "send-reaction with an emoji",
			call: func(ctx context.Context) (any, error) {
				return h.SendEmojiReaction(ctx, chat, target, "👩‍👩‍👧", false)
			},
			want: `{"action":"send-reaction","data":{"chatGuid":"iMessage;+;chat123456789012345678",
				"selectedMessageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","reactionType":"emoji","emoji":"👩‍👩‍👧","partIndex":0}}`,
			answer: map[string]any{"identifier": "R1"}, result: "R1",
		},
		{
			name: "send-reaction removing an emoji",
			call: func(ctx context.Context) (any, error) { return h.SendEmojiReaction(ctx, chat, target, "🎉", true) },
			want: `{"action":"send-reaction","data":{"chatGuid":"iMessage;+;chat123456789012345678",
				"selectedMessageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","reactionType":"-emoji","emoji":"🎉","partIndex":0}}`,
			answer: map[string]any{"identifier": "R2"}, result: "R2",
		},
		{
			name: "edit-message",
			call: func(ctx context.Context) (any, error) { return nil, h.EditMessage(ctx, chat, target, "see you at 6") },
			want: `{"action":"edit-message","data":{"chatGuid":"iMessage;+;chat123456789012345678","messageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD",
				"editedMessage":"see you at 6","backwardsCompatibilityMessage":"Edited to “see you at 6”","partIndex":0}}`,
			answer: map[string]any{},
		},
		{
			name: "unsend-message",
			call: func(ctx context.Context) (any, error) { return nil, h.UnsendMessage(ctx, chat, target) },
			want: `{"action":"unsend-message","data":{"chatGuid":"iMessage;+;chat123456789012345678",
				"messageGuid":"5A1B2C3D-0000-4000-8000-00000000ABCD","partIndex":0}}`,
			answer: map[string]any{},
		},
		{
			name: "create-chat",
			call: func(ctx context.Context) (any, error) {
				return h.CreateChat(ctx, []string{"+15551230001", "bob@example.com"}, "climbing?", "iMessage")
			},
			want: `{"action":"create-chat","data":{"addresses":["+15551230001","bob@example.com"],"message":"climbing?","service":"iMessage",
				"attributedBody":null,"effectId":null,"subject":null}}`,
			// The BlueBubbles helper answers with its first message's GUID.
			answer: map[string]any{"identifier": "5B2E1B8C-7F6A-4C2B-9E3D-1A2B3C4D5E6F"}, result: "5B2E1B8C-7F6A-4C2B-9E3D-1A2B3C4D5E6F",
		},
		{
			name:   "set-display-name",
			call:   func(ctx context.Context) (any, error) { return nil, h.SetDisplayName(ctx, chat, "Crag crew") },
			want:   `{"action":"set-display-name","data":{"chatGuid":"iMessage;+;chat123456789012345678","newName":"Crag crew"}}`,
			answer: map[string]any{},
		},
		{
			name:   "add-participant",
			call:   func(ctx context.Context) (any, error) { return nil, h.AddParticipant(ctx, chat, "+15551230003") },
			want:   `{"action":"add-participant","data":{"chatGuid":"iMessage;+;chat123456789012345678","address":"+15551230003"}}`,
			answer: map[string]any{},
		},
		{
			name:   "remove-participant",
			call:   func(ctx context.Context) (any, error) { return nil, h.RemoveParticipant(ctx, chat, "+15551230003") },
			want:   `{"action":"remove-participant","data":{"chatGuid":"iMessage;+;chat123456789012345678","address":"+15551230003"}}`,
			answer: map[string]any{},
		},
		{
			name:   "leave-chat",
			call:   func(ctx context.Context) (any, error) { return nil, h.LeaveChat(ctx, chat) },
			want:   `{"action":"leave-chat","data":{"chatGuid":"iMessage;+;chat123456789012345678"}}`,
			answer: map[string]any{},
		},
		{
			name:   "check-imessage-availability of a phone",
			call:   func(ctx context.Context) (any, error) { return h.CheckIMessageAvailability(ctx, "+15551230001") },
			want:   `{"action":"check-imessage-availability","data":{"aliasType":"phone","address":"+15551230001"}}`,
			answer: map[string]any{"data": map[string]any{"available": true}}, result: true,
		},
		{
			name:   "check-imessage-availability of an e-mail",
			call:   func(ctx context.Context) (any, error) { return h.CheckIMessageAvailability(ctx, "bob@example.com") },
			want:   `{"action":"check-imessage-availability","data":{"aliasType":"email","address":"bob@example.com"}}`,
			answer: map[string]any{"data": map[string]any{"available": false}}, result: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type out struct {
				v   any
				err error
			}
			done := make(chan out, 1)
			go func() {
				v, err := tt.call(t.Context())
				done <- out{v, err}
			}()
			got, line, err := p.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			id, _ := got["transactionId"].(string)
			if !uuidV4.MatchString(id) {
				t.Errorf("transactionId %q is not a UUID", got["transactionId"])
			}
			delete(got, "transactionId")
			if want := mustJSON(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("frame\n got %s\nwant %s", line, tt.want)
			}
			p.answer(map[string]any{"transactionId": id}, tt.answer)
			r := <-done
			if r.err != nil {
				t.Fatalf("call: %v", r.err)
			}
			if tt.result != nil && r.v != tt.result {
				t.Errorf("result %v, want %v", r.v, tt.result)
			}
		})
	}
	// Refusals are the helper's errors; a chat GUID that is not one, an
	// answer without "available", are refused here.
	t.Run("errors", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- helperErr(h.LeaveChat(t.Context(), chat)) }()
		f := p.frame()
		p.answer(f, map[string]any{"error": "Chat does not exist!"})
		var he *HelperError
		if err := <-done; !errors.As(err, &he) || he.Action != "leave-chat" || !bridge.IsPermanent(err) {
			t.Fatalf("refused leave: %v", err)
		}
		if err := h.SetDisplayName(t.Context(), "iMessage;+;chat1;x", "x"); !bridge.IsPermanent(err) {
			t.Fatalf("bad chat GUID: %v", err)
		}
		availability := make(chan error, 1)
		go func() {
			_, err := h.CheckIMessageAvailability(t.Context(), "+15551230001")
			availability <- err
		}()
		p.answer(p.frame(), map[string]any{"identifier": ""})
		if err := <-availability; err == nil {
			t.Fatal("an answer without available passed")
		}
		created := make(chan error, 1)
		go func() {
			_, err := h.CreateChat(t.Context(), []string{"+15551230001", "+15551230002"}, "hi", "iMessage")
			created <- err
		}()
		p.answer(p.frame(), map[string]any{"identifier": ""})
		if err := <-created; err == nil {
			t.Fatal("a created chat without its first message's GUID passed")
		}
	})
}
