package chatdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// NewestRow returns the ROWID and date of the newest message row (the
// highest ROWID); 0 and the zero time when there is none.
func (db *DB) NewestRow(ctx context.Context) (rowID int64, date time.Time, err error) {
	var d sql.NullInt64
	err = db.db.QueryRowContext(ctx, "SELECT ROWID, date FROM message ORDER BY ROWID DESC LIMIT 1").Scan(&rowID, &d)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, time.Time{}, nil
	case err != nil:
		return 0, time.Time{}, fmt.Errorf("chatdb: newest row: %w", err)
	}
	if d.Int64 != 0 {
		date = AppleTime(d.Int64)
	}
	return rowID, date, nil
}

// CallerIDs returns the owner's addresses (destination_caller_id: the
// Apple ID, phone number or alias a message went out from or came in to)
// named by the newest rows (at most rows of them), most used first; none
// on a macOS without the column.
func (db *DB) CallerIDs(ctx context.Context, rows int) ([]string, error) {
	if !db.cols.has("message", "destination_caller_id") {
		return nil, nil
	}
	rs, err := db.db.QueryContext(ctx, `SELECT destination_caller_id FROM
		(SELECT destination_caller_id FROM message ORDER BY ROWID DESC LIMIT ?)
		WHERE destination_caller_id IS NOT NULL AND destination_caller_id != ''
		GROUP BY destination_caller_id ORDER BY count(*) DESC, destination_caller_id`, rows)
	if err != nil {
		return nil, fmt.Errorf("chatdb: caller IDs: %w", err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			return nil, fmt.Errorf("chatdb: caller IDs: %w", err)
		}
		out = append(out, id)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("chatdb: caller IDs: %w", err)
	}
	return out, nil
}
