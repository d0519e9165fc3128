package chatdb

import "strings"

// Kind classifies a row.
type Kind int

const (
	// KindOther is everything the bridge skips: other system rows,
	// stickers placed on a message, polls, and rows with neither body nor
	// attachment.
	KindOther Kind = iota
	// KindMessage is a normal message with a body or attachments.
	KindMessage
	// KindReaction is a tapback added or removed (see Reaction).
	KindReaction
	// KindGroupChange is a group chat's member added, removed or gone, or
	// its new name or photo: ItemType 1 to 3 with GroupActionType,
	// GroupTitle and OtherHandle.
	KindGroupChange
)

// Item types of group changes, with their group action types.
const (
	ItemMembers = 1 // action 0: OtherHandle added; 1: OtherHandle removed
	ItemRename  = 2 // GroupTitle is the new name
	ItemGroup   = 3 // action 0: the sender left; 1: photo changed; 2: photo removed
)

func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindReaction:
		return "reaction"
	case KindGroupChange:
		return "group change"
	}
	return "other"
}

// Associated message types of tapbacks: love is 2000 when added and 3000
// when removed, question 2005 and 3005; 2006 is any emoji (in
// associated_message_emoji) and 2007 a sticker (iOS 18, macOS 15).
const (
	tapbackAdd    = 2000
	tapbackRemove = 3000
)

var reactionTypes = [...]string{"love", "like", "dislike", "laugh", "emphasize", "question", "emoji", "sticker"}

// Kind classifies the row.
func (r Row) Kind() Kind {
	if _, _, ok := r.Reaction(); ok {
		return KindReaction
	}
	if r.AssociatedType == 0 && r.ItemType >= ItemMembers && r.ItemType <= ItemGroup {
		return KindGroupChange
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
// "laugh", "emphasize", "question", "emoji" with AssociatedEmoji, or
// "sticker") and whether it adds or removes it. ok is false for rows that
// are not tapbacks, and for an emoji tapback that names no emoji.
func (r Row) Reaction() (typ string, added bool, ok bool) {
	switch t := r.AssociatedType; {
	case t >= tapbackAdd && t < tapbackAdd+len(reactionTypes):
		typ, added = reactionTypes[t-tapbackAdd], true
	case t >= tapbackRemove && t < tapbackRemove+len(reactionTypes):
		typ = reactionTypes[t-tapbackRemove]
	default:
		return "", false, false
	}
	if typ == "emoji" && r.AssociatedEmoji == "" {
		return "", false, false
	}
	return typ, added, true
}

// isPoll reports whether a balloon bundle ID is the Polls app's
// ("com.apple.messages.Polls", possibly after an extension prefix).
func isPoll(bundleID string) bool {
	return strings.HasSuffix(bundleID, "com.apple.messages.Polls")
}
