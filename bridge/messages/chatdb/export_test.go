package chatdb

import "context"

// ExecForTest runs a statement through the reader's own connections, to
// show they cannot write.
func (db *DB) ExecForTest(ctx context.Context, query string) error {
	_, err := db.db.ExecContext(ctx, query)
	return err
}

// RowStatesPlan is SQLite's query plan for RowStates, one step a line.
func (db *DB) RowStatesPlan(ctx context.Context) (string, error) {
	rs, err := db.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+db.rowStatesQuery(), 0)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	var plan string
	for rs.Next() {
		var id, parent, unused int
		var detail string
		if err := rs.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		plan += detail + "\n"
	}
	return plan, rs.Err()
}
