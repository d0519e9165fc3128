package storage

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// What fleet mode keeps here: how far this node's event log has been
// published to the fleet's events stream, and the attempts this node made
// at the fleet's webhook deliveries.

// metaPublished is the key of the publish cursor in the meta bucket.
var metaPublished = []byte("fleet_published")

// PublishCursor is how far the node's event log has gone out to the
// fleet's events stream.
type PublishCursor struct {
	// Seq is the last local event (Event.Seq) the stream acknowledged.
	Seq uint64 `json:"seq"`
	// StreamSeq is the stream's sequence of that event: what the next
	// publish expects as the node's last.
	StreamSeq uint64 `json:"stream_seq"`
}

// PublishCursor returns the publish cursor, zero before the first publish.
func (db *DB) PublishCursor(ctx context.Context) (PublishCursor, error) {
	var c PublishCursor
	err := db.bolt.View(func(tx *bolt.Tx) error {
		err := getJSON(tx.Bucket(bktMeta), metaPublished, &c)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	return c, err
}

// SetPublishCursor records the publish cursor.
func (db *DB) SetPublishCursor(ctx context.Context, c PublishCursor) error {
	return db.bolt.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bktMeta), metaPublished, c) })
}

// SetFleetDeliveries, when on, makes the events recorded from then on
// queue no local webhook deliveries: in a fleet, webhooks are delivered
// from the events stream by one consumer per webhook, and the local
// dispatcher does not run. The daemon sets it before it records anything.
func (db *DB) SetFleetDeliveries(on bool) { db.fleetDeliveries.Store(on) }

// RecordAttempt keeps an attempt at a delivery made outside the local
// queue (a fleet's consumer), so that the operator lists it with the
// others. a.N and the IDs are the caller's.
func (db *DB) RecordAttempt(ctx context.Context, a Attempt) error {
	return db.bolt.Batch(func(tx *bolt.Tx) error { return putAttempt(tx, a) })
}

// HashID is an ID with prefix derived from parts: the same parts give the
// same ID, on every node, shaped as NewID's (26 characters of its
// alphabet).
func HashID(prefix string, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + idEncoding.EncodeToString(sum[:16])[:IDLen]
}
