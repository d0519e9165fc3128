package storage

import (
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// BridgeCursor returns how far a bridge has read its network for a line (the
// Messages bridge: the highest chat.db ROWID handled); ok is false before the
// first save.
func (db *DB) BridgeCursor(ctx context.Context, lineID string) (pos int64, ok bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bktBridgeState).Get([]byte(lineID)); len(v) == 8 {
			pos, ok = int64(binary.BigEndian.Uint64(v)), true
		}
		return nil
	})
	return pos, ok, err
}

// SetBridgeCursor saves a bridge's position for a line.
func (db *DB) SetBridgeCursor(ctx context.Context, lineID string, pos int64) error {
	return db.bolt.Batch(func(tx *bolt.Tx) error {
		return tx.Bucket(bktBridgeState).Put([]byte(lineID), i64(pos))
	})
}
