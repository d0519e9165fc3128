package messages

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/blueline-app/blueline/bridge"
)

// The helper's actions beyond sending, reacting, typing and reading, with
// the parameters the BlueBubbles helper takes (PrivateApiMessage.ts,
// PrivateApiChat.ts, PrivateApiHandle.ts).

// SendEmojiReaction adds (or, with remove, removes) a tapback with any
// emoji on the message targetGUID (macOS 15 and later). The helper takes
// it as reactionType "emoji" ("-emoji" to remove) with the emoji in
// "emoji". It returns the reaction's message GUID.
func (h *HelperServer) SendEmojiReaction(ctx context.Context, chatGUID, targetGUID, emoji string, remove bool) (string, error) {
	if err := checkChatGUID(chatGUID); err != nil {
		return "", err
	}
	if targetGUID == "" {
		return "", bridge.Permanent(errors.New("messages: reaction without a target message"))
	}
	if emoji == "" {
		return "", bridge.Permanent(errors.New("messages: emoji reaction without an emoji"))
	}
	typ := bridge.ReactionEmoji
	if remove {
		typ = "-" + typ
	}
	return h.Request(ctx, "send-reaction", map[string]any{
		"chatGuid":            chatGUID,
		"selectedMessageGuid": targetGUID,
		"reactionType":        typ,
		"emoji":               emoji,
		"partIndex":           0,
	})
}

// EditMessage replaces the text of the line's message messageGUID (macOS 13
// and later). Recipients on older systems get "Edited to “…”".
func (h *HelperServer) EditMessage(ctx context.Context, chatGUID, messageGUID, text string) error {
	if err := checkChatGUID(chatGUID); err != nil {
		return err
	}
	if messageGUID == "" || text == "" {
		return bridge.Permanent(errors.New("messages: an edit needs a message and a text"))
	}
	_, err := h.Request(ctx, "edit-message", map[string]any{
		"chatGuid":                      chatGUID,
		"messageGuid":                   messageGUID,
		"editedMessage":                 text,
		"backwardsCompatibilityMessage": "Edited to “" + text + "”",
		"partIndex":                     0,
	})
	return err
}

// UnsendMessage takes back the line's message messageGUID (macOS 13 and
// later).
func (h *HelperServer) UnsendMessage(ctx context.Context, chatGUID, messageGUID string) error {
	if err := checkChatGUID(chatGUID); err != nil {
		return err
	}
	if messageGUID == "" {
		return bridge.Permanent(errors.New("messages: unsend without a message"))
	}
	_, err := h.Request(ctx, "unsend-message", map[string]any{
		"chatGuid":    chatGUID,
		"messageGuid": messageGUID,
		"partIndex":   0,
	})
	return err
}

// CreateChat creates a chat with addresses and sends it its first message
// on service ("iMessage" or "SMS"). It returns what the helper answers: the
// GUID of that first message (the BlueBubbles helper sends it and answers
// as its send-message does), from whose row in chat.db the new chat is
// known.
func (h *HelperServer) CreateChat(ctx context.Context, addresses []string, message, service string) (string, error) {
	if len(addresses) == 0 || message == "" {
		return "", bridge.Permanent(errors.New("messages: a new chat needs addresses and a first message"))
	}
	if service != "iMessage" && service != "SMS" {
		return "", bridge.Permanent(fmt.Errorf("messages: unknown service %q", service))
	}
	guid, err := h.Request(ctx, "create-chat", map[string]any{
		"addresses":      addresses,
		"message":        message,
		"service":        service,
		"attributedBody": nil,
		"effectId":       nil,
		"subject":        nil,
	})
	if err != nil {
		return "", err
	}
	if guid == "" {
		return "", fmt.Errorf("messages: the helper created a chat but did not say its first message's GUID")
	}
	return guid, nil
}

// SetDisplayName renames a group chat ("" clears its name).
func (h *HelperServer) SetDisplayName(ctx context.Context, chatGUID, name string) error {
	return h.chatRequest(ctx, "set-display-name", chatGUID, map[string]any{"newName": name})
}

// AddParticipant adds address to a group chat.
func (h *HelperServer) AddParticipant(ctx context.Context, chatGUID, address string) error {
	return h.chatRequest(ctx, "add-participant", chatGUID, map[string]any{"address": address})
}

// RemoveParticipant removes address from a group chat.
func (h *HelperServer) RemoveParticipant(ctx context.Context, chatGUID, address string) error {
	return h.chatRequest(ctx, "remove-participant", chatGUID, map[string]any{"address": address})
}

// LeaveChat has the line leave a group chat.
func (h *HelperServer) LeaveChat(ctx context.Context, chatGUID string) error {
	return h.chatRequest(ctx, "leave-chat", chatGUID, map[string]any{})
}

func (h *HelperServer) chatRequest(ctx context.Context, action, chatGUID string, data map[string]any) error {
	if err := checkChatGUID(chatGUID); err != nil {
		return err
	}
	data["chatGuid"] = chatGUID
	_, err := h.Request(ctx, action, data)
	return err
}

// CheckIMessageAvailability asks Apple's directory, through the helper,
// whether address (a phone number or e-mail address) is reachable on
// iMessage.
func (h *HelperServer) CheckIMessageAvailability(ctx context.Context, address string) (bool, error) {
	if address == "" {
		return false, bridge.Permanent(errors.New("messages: availability of no address"))
	}
	aliasType := "phone"
	if strings.Contains(address, "@") {
		aliasType = "email"
	}
	r, err := h.request(ctx, "check-imessage-availability", map[string]any{"aliasType": aliasType, "address": address})
	if err != nil {
		return false, err
	}
	available, ok := r.data["available"].(bool)
	if !ok {
		return false, fmt.Errorf("messages: the helper's availability answer has no \"available\": %v", r.data)
	}
	return available, nil
}
