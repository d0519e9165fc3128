package messages

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
)

// What the line changes after sending, and its group chats: all through
// the private-API helper. What Messages then records (date_edited,
// date_retracted, the group's system rows) reaches the sink from chat.db,
// as a contact's changes do.

// Edit replaces the text of a message the line sent.
func (b *Bridge) Edit(ctx context.Context, e bridge.Edit) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	return helperErr(b.withHelperChat(ctx, e.Chat, func(chatGUID string) error {
		return b.helper.EditMessage(ctx, chatGUID, e.TargetGUID, e.Text)
	}))
}

// Unsend takes back a message the line sent.
func (b *Bridge) Unsend(ctx context.Context, u bridge.Unsend) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	return helperErr(b.withHelperChat(ctx, u.Chat, func(chatGUID string) error {
		return b.helper.UnsendMessage(ctx, chatGUID, u.TargetGUID)
	}))
}

// ChangeGroup renames a group, adds or removes a member, or leaves it.
func (b *Bridge) ChangeGroup(ctx context.Context, c bridge.GroupChange) error {
	if !b.helper.Connected() {
		return errNoHelper
	}
	return helperErr(b.withHelperChat(ctx, c.Chat, func(chatGUID string) error {
		switch c.Action {
		case bridge.ChatRenamed:
			return b.helper.SetDisplayName(ctx, chatGUID, c.Name)
		case bridge.ChatParticipantAdded:
			return b.helper.AddParticipant(ctx, chatGUID, c.Participant)
		case bridge.ChatParticipantRemoved:
			return b.helper.RemoveParticipant(ctx, chatGUID, c.Participant)
		case bridge.ChatParticipantLeft:
			return b.helper.LeaveChat(ctx, chatGUID)
		}
		return bridge.Permanent(fmt.Errorf("messages: unknown group change %q", c.Action))
	}))
}

// helperErr marks a helper's refusal permanent: it answered that the action
// cannot be done ("Chat does not exist!"), which retrying will not change.
// A helper not connected certainly did nothing. A helper that went away,
// or did not answer in time, after it was given the action may have done
// it: that is final too, so that nothing is done twice (a second edit
// would count against Messages' five). What happened shows in chat.db.
func helperErr(err error) error {
	var he *HelperError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he):
		return bridge.Permanent(err)
	case errors.Is(err, ErrHelperNotConnected):
		return bridge.NotSent(err)
	case errors.Is(err, ErrHelperDisconnected) || errors.Is(err, context.DeadlineExceeded):
		return bridge.Permanent(fmt.Errorf("%w: %w", errUnknownOutcome, err))
	}
	return err
}

// CreateGroup creates a group chat through the helper, which sends its
// first message, and follows that message in chat.db until it is sent. A
// name is given to the group afterwards (set-display-name), as Messages
// does. Creating sends a message: an attempt that handed it to the helper
// is never made again (see bridge.Outgoing.Handoff).
func (b *Bridge) CreateGroup(ctx context.Context, g bridge.NewGroup) (bridge.Chat, bridge.Receipt, error) {
	if !g.HandedAt.IsZero() {
		return bridge.Chat{}, bridge.Receipt{}, bridge.Permanent(fmt.Errorf("%w: the daemon stopped while creating the group; "+
			"it is not created again (look in Messages)", errUnknownOutcome))
	}
	if !b.helper.Connected() {
		return bridge.Chat{}, bridge.Receipt{}, errNoHelper
	}
	service, err := accountService(g.Service)
	if err != nil {
		return bridge.Chat{}, bridge.Receipt{}, err
	}
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	mark, err := b.db.Load().MaxRowID(ctx)
	if err != nil {
		return bridge.Chat{}, bridge.Receipt{}, err
	}
	since := time.Now().Add(-2 * time.Second)
	// Until the chat is named, every new outgoing group row may be its
	// first message: the watcher leaves them to this send.
	b.setSending(&sendingState{after: mark, newGroup: true})
	defer b.setSending(nil)
	if err := onlyOnce(g.Handoff)(ctx); err != nil {
		return bridge.Chat{}, bridge.Receipt{}, err
	}
	first, err := b.helper.CreateChat(ctx, g.Participants, g.Text, service)
	if err != nil {
		return bridge.Chat{}, bridge.Receipt{}, helperErr(err)
	}
	rows, err := b.firstMessage(ctx, first, mark, since, g.Text)
	if err != nil {
		return bridge.Chat{}, bridge.Receipt{}, err
	}
	guid, ident := rows[0].Chat.GUID, rows[0].Chat.Identifier
	chat := bridge.Chat{GUID: guid, Identifier: ident, IsGroup: true, Participants: g.Participants}
	b.setSending(&sendingState{identifier: ident, after: mark})
	b.claim(rows...)
	receipt, err := b.await(ctx, rows, b.cfg.TextTimeout)
	if err != nil {
		return bridge.Chat{}, bridge.Receipt{}, err
	}
	receipt.ChatGUID = guid
	if g.Name != "" {
		// The group exists and has its message: a name that fails is
		// logged, not a failed send (the client can rename it).
		err := b.withHelperChat(ctx, chat, func(chatGUID string) error { return b.helper.SetDisplayName(ctx, chatGUID, g.Name) })
		if err != nil {
			b.log.Warn("the new group could not be named", "chat", guid, "err", err)
		} else {
			chat.Name = g.Name
		}
	}
	return chat, receipt, nil
}

// firstMessage finds in chat.db the rows of a new group's first message,
// which the helper named by its GUID (answer), and so the group. A helper
// that answers with the chat's GUID instead (an older contract) is
// followed too: its first message is then found by its text.
func (b *Bridge) firstMessage(ctx context.Context, answer string, mark int64, since time.Time, text string) ([]chatdb.Row, error) {
	if checkChatGUID(answer) == nil {
		ident := strings.SplitN(answer, ";", 3)[2]
		q := chatdb.Outgoing{Identifier: ident, IsGroup: true, After: mark, Since: since, Text: text}
		rows, err := b.find(ctx, q, b.cfg.TextTimeout)
		if err == nil && len(rows) == 0 {
			err = bridge.Permanent(fmt.Errorf("%w: the helper created chat %s but its first message did not appear in chat.db within %s",
				errUnknownOutcome, answer, b.cfg.TextTimeout))
		}
		return rows, err
	}
	deadline := time.Now().Add(b.cfg.TextTimeout)
	for {
		rows, err := b.db.Load().RowsByGUID(ctx, []string{answer})
		if err != nil {
			return nil, err
		}
		if len(rows) == 1 && rows[0].Chat.GUID != "" {
			if !rows[0].Chat.IsGroup {
				return nil, bridge.Permanent(fmt.Errorf("%w: the helper's new chat %s is not a group", errUnknownOutcome, rows[0].Chat.GUID))
			}
			return rows, nil
		}
		if time.Now().After(deadline) {
			return nil, bridge.Permanent(fmt.Errorf("%w: the helper created a group, but its first message %s did not appear in chat.db within %s",
				errUnknownOutcome, answer, b.cfg.TextTimeout))
		}
		if err := sleep(ctx, followInterval); err != nil {
			return nil, err
		}
	}
}

// Availability asks, through the helper, whether handle is reachable on
// iMessage.
func (b *Bridge) Availability(ctx context.Context, line, handle string) (bool, error) {
	if !b.helper.Connected() {
		return false, errNoHelper
	}
	return b.helper.CheckIMessageAvailability(ctx, handle)
}

// minMacOS is the macOS version a feature needs, where it needs a recent
// one: Messages edits and unsends from macOS 13, emoji tapbacks from 15.
var minMacOS = map[string]int{"edit": 13, "unsend": 13, "emoji_reactions": 15}

// Capabilities says, for each feature of the line, why it cannot be used
// now ("" when it can): the private-API helper must be connected for all
// but sending text and files, chat.db must be readable for what is
// confirmed from it, and some features need a recent macOS (when the
// version is known).
func (b *Bridge) Capabilities() map[string]string {
	h := b.Health()
	reason := ""
	if h.Helper != "connected" {
		reason = "the private-API helper is not connected"
	}
	out := map[string]string{}
	for _, f := range []string{"reactions", "emoji_reactions", "typing", "receipts", "edit", "unsend", "groups", "availability",
		"audio_messages", "threaded_replies"} {
		out[f] = reason
	}

	if reason == "" && h.ChatDB != "readable" {
		// A new group's first message is found in chat.db.
		out["groups"] = "chat.db is not readable (Full Disk Access?)"
	}
	if major := macOSMajor(b.cfg.MacOSVersion); major > 0 {
		for f, need := range minMacOS {
			if major < need && out[f] == "" {
				out[f] = fmt.Sprintf("needs macOS %d or later (this Mac runs %s)", need, b.cfg.MacOSVersion)
			}
		}
	}
	if out["emoji_reactions"] == "" && !b.helper.Declares(HelperEmojiReactions) {
		out["emoji_reactions"] = noEmojiReactions
	}
	if out["threaded_replies"] == "" && !b.threadedReplies() {
		out["threaded_replies"] = noThreadedReplies
	}
	if b.cfg.Service == "sms" {
		for _, f := range []string{"edit", "unsend", "emoji_reactions"} {
			out[f] = "not on an SMS line"
		}
	}
	return out
}

// What the stock BlueBubbles helper lacks, as capabilities give it.
const (
	noEmojiReactions = "the private-API helper does not declare emoji tapbacks " +
		"(the stock BlueBubbles helper would send a message quoting the target instead)"
	noThreadedReplies = "on macOS 26 the private-API helper must declare threaded replies " +
		"(they stall in the stock BlueBubbles helper): replies are sent unthreaded"
)

// threadedReplies reports whether a reply can go out threaded now: through
// the helper, which on macOS 26 and later must declare it can.
func (b *Bridge) threadedReplies() bool {
	if !b.helper.Connected() {
		return false
	}
	return macOSMajor(b.cfg.MacOSVersion) < 26 || b.helper.Declares(HelperThreadedReplies)
}

// macOSMajor is the major version of v ("13.6.1" → 13), 0 if unknown.
func macOSMajor(v string) int {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	return n
}
