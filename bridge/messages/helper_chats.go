package messages

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
)

// helperChatGUIDs lists the GUIDs to hand the helper for chat c, in the
// order to try them. The helper finds a chat in Messages' chat registry by
// the GUID as Messages keeps it, which on macOS 15 and 26 is often the
// "any;-;…" form chat.db stores: so the stored forms of the chat come
// first, then the service-prefixed one Blueline names it by, then the
// "any;" form.
func (b *Bridge) helperChatGUIDs(ctx context.Context, c bridge.Chat) []string {
	var out []string
	add := func(g string) {
		if g != "" && !slices.Contains(out, g) && checkChatGUID(g) == nil {
			out = append(out, g)
		}
	}
	if db := b.db.Load(); db == nil {
		// Not reading chat.db (a bridge made for a test of the helper).
	} else if stored, err := db.ChatsByIdentifier(ctx, c.Identifier); err == nil {
		for _, sc := range stored {
			if chatdb.CanonicalGUID(sc.GUID, sc.ServiceName) == c.GUID {
				add(sc.GUID)
			}
		}
	} else {
		b.log.Warn("cannot list the chat's stored GUIDs; the helper gets Blueline's", "chat", c.GUID, "err", err)
	}
	add(c.GUID)
	if prefix, rest, ok := strings.Cut(c.GUID, ";"); ok && !strings.EqualFold(prefix, "any") {
		add("any;" + rest)
	}
	return out
}

// withHelperChat runs a helper action on chat c with each of its GUID forms
// in turn, for as long as the helper answers that it has no such chat
// (nothing was done then): the first form it knows is the one.
func (b *Bridge) withHelperChat(ctx context.Context, c bridge.Chat, act func(guid string) error) error {
	var err error
	for _, guid := range b.helperChatGUIDs(ctx, c) {
		if err = act(guid); !isNoSuchChat(err) {
			return err
		}
		b.log.Info("the private-API helper has no chat under this GUID; trying its next form", "chat", guid)
	}
	return err
}

// isNoSuchChat reports whether the helper answered that it found no chat
// by the GUID it was given ("Chat does not exist…").
func isNoSuchChat(err error) bool {
	var he *HelperError
	return errors.As(err, &he) && strings.Contains(strings.ToLower(he.Message), "does not exist")
}

// helperChatGUID is the GUID a helper notification (typing, reading),
// which gets no answer, names chat c by: the first form to try.
func (b *Bridge) helperChatGUID(ctx context.Context, c bridge.Chat) string {
	if guids := b.helperChatGUIDs(ctx, c); len(guids) > 0 {
		return guids[0]
	}
	return c.GUID
}

// canonicalChat maps a chat GUID in the helper's form (its events name
// chats as Messages keeps them: "any;-;…" on macOS 26) to the chat as
// Blueline names it.
func (b *Bridge) canonicalChat(ctx context.Context, guid string) bridge.Chat {
	parts := strings.SplitN(guid, ";", 3)
	if len(parts) != 3 {
		return bridge.Chat{GUID: guid}
	}
	c := bridge.Chat{GUID: guid, Identifier: parts[2], IsGroup: parts[1] == "+"}
	stored, err := b.db.Load().ChatsByIdentifier(ctx, c.Identifier)
	if err != nil {
		b.log.Debug("cannot look the helper's chat up in chat.db", "chat", guid, "err", err)
	}
	service := ""
	for _, sc := range stored {
		if strings.EqualFold(sc.GUID, guid) {
			service = sc.ServiceName
			break
		}
	}
	c.GUID = chatdb.CanonicalGUID(guid, service)
	return c
}
