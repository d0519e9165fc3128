package chatdb

import "strings"

// Kind classifies a row.
type Kind int

const (
	// KindOther is everything the bridge skips: system rows (group
	// renames, members added or removed, …), stickers, emoji and sticker
	// tapbacks, polls, and rows with neither body nor attachment.
	KindOther Kind = iota
	// KindMessage is a normal message with a body or attachments.
	KindMessage
	// KindReaction is a classic tapback added or removed (see Reaction).
	KindReaction
)

func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindReaction:
		return "reaction"
	}
	return "other"
}

// Associated message types of the classic tapbacks: love is 2000 when
// added and 3000 when removed, question 2005 and 3005.
const (
	tapbackAdd    = 2000
	tapbackRemove = 3000
)

var reactionTypes = [...]string{"love", "like", "dislike", "laugh", "emphasize", "question"}

// Kind classifies the row.
func (r Row) Kind() Kind {
	if _, _, ok := r.Reaction(); ok {
		return KindReaction
	}
	if r.AssociatedType != 0 || r.ItemType != 0 || isPoll(r.BalloonBundleID) {
		return KindOther
	}
	if r.Text == nil && r.Transcription == nil && len(r.Attachments) == 0 {
		return KindOther
	}
	return KindMessage
}

// Reaction maps a tapback row to its type ("love", "like", "dislike",
// "laugh", "emphasize" or "question") and whether it adds or removes it.
// ok is false for rows that are not classic tapbacks.
func (r Row) Reaction() (typ string, added bool, ok bool) {
	switch t := r.AssociatedType; {
	case t >= tapbackAdd && t < tapbackAdd+len(reactionTypes):
		return reactionTypes[t-tapbackAdd], true, true
	case t >= tapbackRemove && t < tapbackRemove+len(reactionTypes):
		return reactionTypes[t-tapbackRemove], false, true
	}
	return "", false, false
}

// isPoll reports whether a balloon bundle ID is the Polls app's
// ("com.apple.messages.Polls", possibly after an extension prefix).
func isPoll(bundleID string) bool {
	return strings.HasSuffix(bundleID, "com.apple.messages.Polls")
}
