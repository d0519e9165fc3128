package storage

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The owner answers a draft from their own Messages. Blueline writes each
// draft that starts waiting for approval into the owner's chat with
// themselves, in the transaction that makes it wait: the prompt, an
// outbox item of the line's own whose PromptFor names the draft (no
// prompt when that chat does not exist yet: the console and the API
// answer the draft all the same). A 👍 (like) tapback on the prompt
// approves the draft, a 👎 (dislike) declines it, and an inline reply to
// the prompt replaces the draft's text with the reply's and approves it,
// each in the transaction that records the tapback or the reply. The
// prompt is known by the outbox item that sent it, through the message
// the tapback or the reply names by GUID (its received copy's GUID names
// it too: selfchat.go); a draft answered already, or expired, stays as it
// is. A tapback Blueline itself sends (an agent's reaction through the
// API) is recorded as sent, never as the owner's, and answers nothing.

// AnsweredInMessages is the approval_by of a draft the owner answered in
// their chat with themselves.
const AnsweredInMessages = "self_chat"

// promptOwner writes draft, which starts waiting for approval, into the
// owner's chat with themselves.
func (db *DB) promptOwner(tx *bolt.Tx, draft OutboxItem) error {
	line, ok := db.LineByID(draft.LineID)
	if !ok {
		return nil
	}
	self, ok, err := selfChatOf(tx, line)
	if err != nil || !ok {
		return err
	}
	var to Chat
	if err := getJSON(tx.Bucket(bktChats), []byte(draft.ChatID), &to); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("chat of draft %s: %w", draft.ID, err)
	}
	return db.putReply(tx, line, self, promptText(draft, to), draft.ID)
}

// selfChatOf is the owner's chat with themselves on line: of the chats
// with the line's SelfHandles that exist, the one written in last.
func selfChatOf(tx *bolt.Tx, line Line) (self Chat, found bool, err error) {
	for _, h := range line.SelfHandles {
		id := tx.Bucket(bktChatIdents).Get(join([]byte(line.ID), []byte(h)))
		if id == nil {
			continue
		}
		var c Chat
		if err := getJSON(tx.Bucket(bktChats), id, &c); err != nil {
			return Chat{}, false, err
		}
		if !found || c.LastMessageAt > self.LastMessageAt {
			self, found = c, true
		}
	}
	return self, found, nil
}

// promptText is what the prompt of draft, to chat to, says.
func promptText(draft OutboxItem, to Chat) string {
	who := to.Identifier
	switch {
	case to.IsGroup && to.Name != "":
		who = to.Name
	case who == "":
		who = "a new chat"
	}
	body := "(no text: an attachment)"
	if draft.Text != nil && *draft.Text != "" {
		body = *draft.Text
	}
	return fmt.Sprintf("An agent wants to send this to %s:\n\n%s\n\n👍 sends it, 👎 declines it; reply to this message to send your words instead. "+
		"It expires at %s.", who, body, time.UnixMilli(draft.ApprovalExpiresAt).UTC().Format("15:04 MST"))
}

// promptOf is the draft whose prompt m is ("" for none).
func promptOf(tx *bolt.Tx, m Message) (string, error) {
	if m.OutboxID == "" || !m.IsFromMe {
		return "", nil
	}
	var item OutboxItem
	err := getJSON(tx.Bucket(bktOutbox), []byte(m.OutboxID), &item)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return item.PromptFor, err
}

// answerInMessages approves draft draftID (with text instead of its own
// unless nil) or declines it, as the owner said in their own Messages. It
// reports whether the draft was waiting; one answered already or expired
// is left as it is.
func (db *DB) answerInMessages(tx *bolt.Tx, draftID string, approve bool, text *string) (bool, error) {
	now := nowMillis()
	answer := declineDraft(AnsweredInMessages, now)
	if approve {
		answer = approveDraft(AnsweredInMessages, text, now)
	}
	_, _, err := db.answerApprovalTx(tx, draftID, now, answer)
	switch {
	case errors.Is(err, ErrApprovalAnswered) || errors.Is(err, ErrApprovalExpired) || errors.Is(err, ErrNoApproval) || errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	if approve {
		tx.OnCommit(db.signalOutbox)
	}
	return true, nil
}

// tapbackAnswer applies a tapback the network reported: a like or dislike
// added on a prompt in the owner's chat with themselves answers its draft.
func (db *DB) tapbackAnswer(tx *bolt.Tx, r Reaction) error {
	if !r.Added || r.Type != "like" && r.Type != "dislike" {
		return nil
	}
	var m Message
	if err := getMessage(tx, []byte(r.MessageID), &m); err != nil {
		return err
	}
	draft, err := promptOf(tx, m)
	if err != nil || draft == "" || !db.inSelfChat(tx, m.LineID, m.ChatID) {
		return err
	}
	_, err = db.answerInMessages(tx, draft, r.Type == "like", nil)
	return err
}

// replyAnswer applies an owner's message in their chat with themselves
// that replies inline to a prompt: its text replaces the draft's, which is
// approved. It reports whether the message answered a waiting draft.
func (db *DB) replyAnswer(tx *bolt.Tx, m Message) (bool, error) {
	if m.ReplyToGUID == "" || m.Text == nil || *m.Text == "" {
		return false, nil
	}
	var prompt Message
	if _, err := messageKeyByGUID(tx, m.ReplyToGUID, &prompt); errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	draft, err := promptOf(tx, prompt)
	if err != nil || draft == "" || !db.inSelfChat(tx, prompt.LineID, prompt.ChatID) {
		return false, err
	}
	return db.answerInMessages(tx, draft, true, m.Text)
}
