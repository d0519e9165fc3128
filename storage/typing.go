package storage

import (
	"errors"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TypingTTL is how long a typing indicator lasts without an update. The
// network hides an indicator nobody refreshes; so do we. A stopped one is
// listed (is_typing false) for the same time, so a client polling every few
// seconds sees the stop.
const TypingTTL = time.Minute

// Indicator is one chat member's typing state.
type Indicator struct {
	ID        string `json:"id"`
	ChatID    string `json:"chat_id"`
	Handle    string `json:"handle"`
	IsTyping  bool   `json:"is_typing"`
	UpdatedAt int64  `json:"updated_at"`
}

// typingState holds indicators in memory only: they expire within a minute,
// so after a restart there is nothing worth keeping.
type typingState struct {
	mu      sync.Mutex
	chats   map[string][]Indicator // by chat ID
	changed signal
}

// TypingChanged is closed at the next change of any chat's indicators.
// Take it before reading TypingIndicators, so that nothing in between is
// missed.
func (db *DB) TypingChanged() <-chan struct{} { return db.typing.changed.wait() }

// SetTyping records that handle started (on) or stopped typing in a chat.
// An indicator keeps its ID while it lasts.
func (db *DB) SetTyping(chatID, handle string, on bool, at time.Time) Indicator {
	t := &db.typing
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.chats == nil {
		t.chats = map[string][]Indicator{}
	}
	list := live(t.chats[chatID], at)
	i := slices.IndexFunc(list, func(ind Indicator) bool { return ind.Handle == handle })
	if i < 0 {
		list = append(list, Indicator{ID: NewID("ind_"), ChatID: chatID, Handle: handle})
		i = len(list) - 1
	}
	if at.UnixMilli() >= list[i].UpdatedAt {
		list[i].IsTyping, list[i].UpdatedAt = on, at.UnixMilli()
	}
	t.chats[chatID] = list
	t.changed.broadcast()
	return list[i]
}

// TypingIndicators lists a chat's indicators that have not expired at now,
// but those of contacts blocked on the chat's line: what a blocked
// contact does makes no event, and its typing shows nowhere either.
func (db *DB) TypingIndicators(chatID string, now time.Time) []Indicator {
	t := &db.typing
	t.mu.Lock()
	list := live(t.chats[chatID], now)
	if len(list) == 0 {
		delete(t.chats, chatID)
		t.mu.Unlock()
		return []Indicator{}
	}
	t.chats[chatID] = list
	list = slices.Clone(list)
	t.mu.Unlock()
	return db.hideBlocked(chatID, list)
}

// hideBlocked drops from a chat's indicators those of contacts blocked on
// its line. A chat that cannot be read shows none: hiding a contact's
// typing wrongly is better than showing a blocked one's.
func (db *DB) hideBlocked(chatID string, list []Indicator) []Indicator {
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var c Chat
		if err := getJSON(tx.Bucket(bktChats), []byte(chatID), &c); err != nil {
			return err
		}
		if anyOf(tx, bktBlocked, c.LineID) {
			list = slices.DeleteFunc(list, func(ind Indicator) bool { return blocked(tx, c.LineID, ind.Handle) })
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return []Indicator{}
	}
	return list
}

func live(list []Indicator, now time.Time) []Indicator {
	cutoff := now.Add(-TypingTTL).UnixMilli()
	return slices.DeleteFunc(list, func(ind Indicator) bool { return ind.UpdatedAt <= cutoff })
}
