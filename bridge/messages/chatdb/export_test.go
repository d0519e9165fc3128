package chatdb

import "context"

// ExecForTest runs a statement through the reader's own connections, to
// show they cannot write.
func (db *DB) ExecForTest(ctx context.Context, query string) error {
	_, err := db.db.ExecContext(ctx, query)
	return err
}
