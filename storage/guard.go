package storage

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The Apple ID guard's counts live in one bucket, written in the
// transactions that accept a message or store an inbound one:
//
//	"c" ‖ chat ID               → guardChat: the chat's unanswered count and last inbound message
//	"d" ‖ line ID ‖ day         → GuardDay: the line's counts of that UTC day
//	"k" ‖ line ID ‖ day ‖ chat  → nil: a cold chat the line messaged that day
//
// A line keeps only its current day: the first count of a new day drops
// the others.

// GuardLimits are a line's caps, checked when a message is accepted.
type GuardLimits struct {
	// Enforce refuses a message over a cap; off, messages are only
	// counted.
	Enforce bool
	// MaxUnanswered caps the line's messages in a chat since the contact's
	// last message; 0 for no cap.
	MaxUnanswered int
	// MaxRatio caps the day's accepted messages at MaxRatio times the day's
	// received ones (at least one); 0 for no cap.
	MaxRatio int
	// MaxColdContacts caps the cold chats messaged in a day; 0 for no cap.
	MaxColdContacts int
	// ColdAfter is how long a chat's contacts must have been silent for it
	// to be cold (ms); 0 means DefaultColdAfter.
	ColdAfter int64
}

// DefaultColdAfter is how long a contact is silent before being cold: 24 h.
const DefaultColdAfter = 24 * 60 * 60 * 1000 // ms

// Limits a GuardError names.
const (
	GuardUnanswered   = "unanswered"
	GuardRatio        = "ratio"
	GuardColdContacts = "cold_contacts"
)

// GuardError is a message the guard refused.
type GuardError struct {
	Limit string // GuardUnanswered, GuardRatio or GuardColdContacts
	Count int    // the count the message would have gone over
	Max   int
}

func (e *GuardError) Error() string {
	return fmt.Sprintf("guard: %s limit reached (%d of %d)", e.Limit, e.Count, e.Max)
}

// GuardDay is a line's counts of one UTC day.
type GuardDay struct {
	Sent         int `json:"sent"`          // messages accepted
	Received     int `json:"received"`      // messages received from contacts
	ColdContacts int `json:"cold_contacts"` // cold chats messaged
}

type guardChat struct {
	Unanswered int   `json:"u"`
	LastIn     int64 `json:"in"` // Unix ms of the contact's last message; 0 for none known
}

// guardScan bounds the messages read to learn a chat's state when it has
// no record yet (a chat from before the guard).
const guardScan = 64

func guardDayOf(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.DateOnly) }

func guardChatKey(chatID string) []byte { return join([]byte("c"), []byte(chatID)) }

func guardDayKey(lineID, day string) []byte { return join([]byte("d"), []byte(lineID), []byte(day)) }

func guardColdKey(lineID, day, chatID string) []byte {
	return join([]byte("k"), []byte(lineID), []byte(day), []byte(chatID))
}

// loadGuardChat reads a chat's state, or learns it from the chat's latest
// messages when it has no record.
func loadGuardChat(tx *bolt.Tx, chatID string) (guardChat, error) {
	var g guardChat
	err := getJSON(tx.Bucket(bktGuard), guardChatKey(chatID), &g)
	if err != ErrNotFound {
		return g, err
	}
	g = guardChat{}
	c := tx.Bucket(bktChatMessages).Cursor()
	prefix := []byte(chatID)
	k, v := c.Seek(join(prefix, []byte{0xff}))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	r := msgReader{tx: tx}
	for n := 0; k != nil && bytes.HasPrefix(k, prefix) && n < guardScan; k, v = c.Prev() {
		n++
		var m Message
		if err := r.decode(k, v, &m); err != nil {
			return g, err
		}
		if !m.IsFromMe {
			g.LastIn = m.SentAt
			break
		}
		g.Unanswered++
	}
	return g, nil
}

// loadGuardDay reads a line's counts of day; a new day drops the line's
// older ones.
func loadGuardDay(tx *bolt.Tx, lineID, day string) (GuardDay, error) {
	b := tx.Bucket(bktGuard)
	var d GuardDay
	err := getJSON(b, guardDayKey(lineID, day), &d)
	if err != ErrNotFound {
		return d, err
	}
	var old [][]byte
	for _, kind := range []string{"d", "k"} {
		prefix, today := join([]byte(kind), []byte(lineID)), join([]byte(kind), []byte(lineID), []byte(day))
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if !bytes.HasPrefix(k, today) {
				old = append(old, bytes.Clone(k))
			}
		}
	}
	return GuardDay{}, deleteKeys(b, old)
}

// guardCount counts a message being accepted at now, after checking it
// against the limits when they are enforced.
func guardCount(tx *bolt.Tx, item *OutboxItem, limits *GuardLimits, now int64) error {
	var l GuardLimits
	if limits != nil {
		l = *limits
	}
	if l.ColdAfter == 0 {
		l.ColdAfter = DefaultColdAfter
	}
	b := tx.Bucket(bktGuard)
	chat, err := loadGuardChat(tx, item.ChatID)
	if err != nil {
		return err
	}
	day := guardDayOf(now)
	d, err := loadGuardDay(tx, item.LineID, day)
	if err != nil {
		return err
	}
	coldKey := guardColdKey(item.LineID, day, item.ChatID)
	newCold := chat.LastIn < now-l.ColdAfter && b.Get(coldKey) == nil
	if l.Enforce {
		switch {
		case l.MaxUnanswered > 0 && chat.Unanswered >= l.MaxUnanswered:
			return &GuardError{Limit: GuardUnanswered, Count: chat.Unanswered, Max: l.MaxUnanswered}
		case l.MaxRatio > 0 && d.Sent >= l.MaxRatio*max(d.Received, 1):
			return &GuardError{Limit: GuardRatio, Count: d.Sent, Max: l.MaxRatio * max(d.Received, 1)}
		case l.MaxColdContacts > 0 && newCold && d.ColdContacts >= l.MaxColdContacts:
			return &GuardError{Limit: GuardColdContacts, Count: d.ColdContacts, Max: l.MaxColdContacts}
		}
	}
	chat.Unanswered++
	d.Sent++
	if newCold {
		d.ColdContacts++
		if err := b.Put(coldKey, nil); err != nil {
			return err
		}
	}
	if err := putJSON(b, guardChatKey(item.ChatID), chat); err != nil {
		return err
	}
	return putJSON(b, guardDayKey(item.LineID, day), d)
}

// guardUncount gives back what an accepted message that never went out
// (cancelled or failed) counted: its place among the chat's unanswered
// messages and, on the day it was accepted, the day's sends. A cold
// contact stays counted.
func guardUncount(tx *bolt.Tx, item OutboxItem, now int64) error {
	if item.Kind != KindMessage {
		return nil
	}
	b := tx.Bucket(bktGuard)
	var chat guardChat
	switch err := getJSON(b, guardChatKey(item.ChatID), &chat); {
	case err == nil && chat.Unanswered > 0:
		chat.Unanswered--
		if err := putJSON(b, guardChatKey(item.ChatID), chat); err != nil {
			return err
		}
	case err != nil && err != ErrNotFound:
		return err
	}
	day := guardDayOf(item.CreatedAt)
	if day != guardDayOf(now) {
		return nil
	}
	var d GuardDay
	switch err := getJSON(b, guardDayKey(item.LineID, day), &d); {
	case err == nil && d.Sent > 0:
		d.Sent--
		return putJSON(b, guardDayKey(item.LineID, day), d)
	case err != nil && err != ErrNotFound:
		return err
	}
	return nil
}

// guardInbound records a contact's message: the chat is answered, and the
// day of the line (when the message is of today) has one more received.
func guardInbound(tx *bolt.Tx, m Message, now int64) error {
	if m.IsFromMe {
		return nil
	}
	at := m.SentAt
	if at == 0 {
		at = now
	}
	b := tx.Bucket(bktGuard)
	var chat guardChat
	if err := getJSON(b, guardChatKey(m.ChatID), &chat); err != nil && err != ErrNotFound {
		return err
	}
	chat.Unanswered, chat.LastIn = 0, max(chat.LastIn, at)
	if err := putJSON(b, guardChatKey(m.ChatID), chat); err != nil {
		return err
	}
	day := guardDayOf(now)
	if guardDayOf(at) != day {
		return nil // an old message caught up with: not today's
	}
	d, err := loadGuardDay(tx, m.LineID, day)
	if err != nil {
		return err
	}
	d.Received++
	return putJSON(b, guardDayKey(m.LineID, day), d)
}

// GuardToday returns a line's counts of the UTC day of now (Unix ms).
func (db *DB) GuardToday(ctx context.Context, lineID string, now int64) (GuardDay, error) {
	var d GuardDay
	err := db.bolt.View(func(tx *bolt.Tx) error {
		err := getJSON(tx.Bucket(bktGuard), guardDayKey(lineID, guardDayOf(now)), &d)
		if err == ErrNotFound {
			return nil
		}
		return err
	})
	return d, err
}

// GuardUnanswered returns how many of the line's messages in a chat wait
// for an answer.
func (db *DB) GuardUnanswered(ctx context.Context, chatID string) (int, error) {
	var g guardChat
	err := db.bolt.View(func(tx *bolt.Tx) (err error) {
		g, err = loadGuardChat(tx, chatID)
		return err
	})
	return g.Unanswered, err
}
