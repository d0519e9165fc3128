package storage

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Event is one thing that happened on a line, as webhooks are told of it:
// kept in commit order whether or not a webhook wants it, so that a live
// reader (the console) can follow everything and resume where it stopped.
type Event struct {
	Seq uint64 `json:"seq"` // 1, 2, … in commit order
	// ID names the event wherever it is shown (evt_…): a reader that sees
	// it twice, after a reconnect, can tell.
	ID     string `json:"id"`
	Name   string `json:"event"`
	LineID string `json:"line_id"`
	ChatID string `json:"chat_id"`
	At     int64  `json:"at"`
	// LineHandle is the line's handle when the event was recorded: a
	// reader on another node of a fleet, which does not serve the line,
	// shows it.
	LineHandle string `json:"line_handle,omitempty"`
	// SandboxOwner is set on the sandbox line's events only: the owner
	// whose sandbox chat it happened in ("" for a chat no owner is paired
	// with), as queueEvent found it, so that a reader elsewhere in a fleet
	// applies the sandbox's rule without the chat.
	SandboxOwner *string `json:"sandbox_owner,omitempty"`
	EventSubject
}

// signal wakes everyone waiting for a kind of change (events added,
// credentials revoked): a channel closed at each commit that makes one,
// and replaced.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// EventsChanged is closed after the next commit that adds events. Take it
// before reading Events, so that nothing committed in between is missed.
func (db *DB) EventsChanged() <-chan struct{} { return db.events.wait() }

// appendEvent records an event in the transaction that causes it.
func (db *DB) appendEvent(tx *bolt.Tx, e Event) error {
	b := appendOnly(tx, bktEvents)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	e.Seq, e.ID = seq, NewID("evt_")
	if l, ok := db.LineByID(e.LineID); ok {
		e.LineHandle = l.Handle
	}
	if err := putJSON(b, u64(seq), e); err != nil {
		return err
	}
	tx.OnCommit(db.events.broadcast)
	return nil
}

// Events returns up to max events after the one numbered after, oldest
// first.
func (db *DB) Events(ctx context.Context, after uint64, max int) ([]Event, error) {
	var out []Event
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktEvents).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(out) < max; k, v = c.Next() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// LastEventSeq is the number of the latest event, 0 when there is none.
func (db *DB) LastEventSeq(ctx context.Context) (uint64, error) {
	var seq uint64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bktEvents).Cursor().Last(); k != nil {
			seq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return seq, err
}

// EventsBefore is the number of the last event older than at (Unix ms): a
// reader that wants the events from at on starts after it. Events are in
// time order, so it is a binary search over their numbers.
func (db *DB) EventsBefore(ctx context.Context, at int64) (uint64, error) {
	var before uint64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktEvents).Cursor()
		first, _ := c.First()
		last, _ := c.Last()
		if first == nil {
			return nil
		}
		lo, hi := binary.BigEndian.Uint64(first), binary.BigEndian.Uint64(last)
		before = lo - 1
		// Invariant: every event numbered up to before is older than at;
		// none after hi is. Numbers are contiguous from the first kept.
		for lo <= hi {
			mid := lo + (hi-lo)/2
			k, v := c.Seek(u64(mid))
			if k == nil {
				break
			}
			var e struct {
				At int64 `json:"at"`
			}
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if e.At < at {
				before, lo = binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k)+1
			} else {
				hi = mid - 1
			}
		}
		return nil
	})
	return before, err
}

// PurgeEvents forgets the events older than before (Unix ms).
func (db *DB) PurgeEvents(ctx context.Context, before int64) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktEvents)
		var gone [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var e struct {
				At int64 `json:"at"`
			}
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if e.At >= before {
				break // events are in commit order, so in time order
			}
			gone = append(gone, k)
		}
		n = len(gone)
		return deleteKeys(b, gone)
	})
	return n, err
}
