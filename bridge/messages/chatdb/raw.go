package chatdb

import (
	"context"
	"encoding/binary"
	"fmt"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// rawConn is a read-only connection to chat.db of its own, driven through
// SQLite's C API (as modernc.org/sqlite translates it) rather than
// database/sql, for the one read that hands over millions of columns: a first
// start's backlog. The driver opens every connection in serialized mode, so
// each column it hands over takes and releases the connection's mutex (twice
// for text), and boxes the value into an interface: on a backlog of 1,000,000
// rows of 29 columns that was a third of the reader's CPU. This connection
// is opened without that mutex (SQLITE_OPEN_NOMUTEX), which is safe because
// only one goroutine ever uses it (a Backlog is not for concurrent use), and
// its values go straight into typed columns.
type rawConn struct {
	tls *libc.TLS
	db  uintptr
}

// openRaw opens path read-only, with the pool's URI (dsn) and busy timeout.
func openRaw(path string) (*rawConn, error) {
	c := &rawConn{tls: libc.NewTLS()}
	name, err := libc.CString(dsn(path))
	if err != nil {
		c.tls.Close()
		return nil, fmt.Errorf("chatdb: open %s: %w", path, err)
	}
	defer libc.Xfree(c.tls, name)
	out := c.tls.Alloc(8)
	defer c.tls.Free(8)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, out,
		sqlite3.SQLITE_OPEN_READONLY|sqlite3.SQLITE_OPEN_NOMUTEX|sqlite3.SQLITE_OPEN_URI, 0)
	c.db = uintptr(binary.NativeEndian.Uint64(libc.GoBytes(out, 8)))
	if rc != sqlite3.SQLITE_OK {
		err := c.err(rc)
		c.close()
		return nil, fmt.Errorf("chatdb: open %s: %w", path, err)
	}
	sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, int32(busyTimeout.Milliseconds()))
	return c, nil
}

// close closes the connection and its statements' leftovers.
func (c *rawConn) close() {
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.db = 0
	}
	if c.tls != nil {
		c.tls.Close()
		c.tls = nil
	}
}

// err is SQLite's message for a result code.
func (c *rawConn) err(rc int32) error {
	if c.db == 0 {
		return fmt.Errorf("sqlite error %d", rc)
	}
	return fmt.Errorf("%s (%d)", libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)), rc)
}

// rawStmt is a prepared statement of a rawConn.
type rawStmt struct {
	c *rawConn
	p uintptr
}

// prepare compiles query; the statement is kept for the connection's life
// and finalized by the caller.
func (c *rawConn) prepare(query string) (*rawStmt, error) {
	q, err := libc.CString(query)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, q)
	out := c.tls.Alloc(8)
	defer c.tls.Free(8)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, q, -1, out, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	return &rawStmt{c: c, p: uintptr(binary.NativeEndian.Uint64(libc.GoBytes(out, 8)))}, nil
}

func (s *rawStmt) finalize() {
	if s.p != 0 {
		sqlite3.Xsqlite3_finalize(s.c.tls, s.p)
		s.p = 0
	}
}

// reset readies the statement to run again, ending its read.
func (s *rawStmt) reset() { sqlite3.Xsqlite3_reset(s.c.tls, s.p) }

// bind sets the statement's parameters (integers only: the backlog's
// statement takes a ROWID and a limit) after resetting it.
func (s *rawStmt) bind(args ...int64) error {
	s.reset()
	for i, a := range args {
		if rc := sqlite3.Xsqlite3_bind_int64(s.c.tls, s.p, int32(i+1), a); rc != sqlite3.SQLITE_OK {
			return s.c.err(rc)
		}
	}
	return nil
}

// step moves to the next row: false at the end. Every 256 rows it looks at
// ctx, as the driver's interrupt would.
func (s *rawStmt) step(ctx context.Context, n int) (bool, error) {
	if n%256 == 0 && ctx.Err() != nil {
		sqlite3.Xsqlite3_reset(s.c.tls, s.p)
		return false, ctx.Err()
	}
	switch rc := sqlite3.Xsqlite3_step(s.c.tls, s.p); rc {
	case sqlite3.SQLITE_ROW:
		return true, nil
	case sqlite3.SQLITE_DONE:
		return false, nil
	default:
		err := s.c.err(rc)
		sqlite3.Xsqlite3_reset(s.c.tls, s.p)
		return false, err
	}
}

// column reads column i of the current row into v. A blob is borrowed (v.b
// points into SQLite's memory until the next step), as sql.RawBytes would
// be; text is copied.
func (s *rawStmt) column(i int, v *column) {
	t, p := s.c.tls, s.p
	switch sqlite3.Xsqlite3_column_type(t, p, int32(i)) {
	case sqlite3.SQLITE_INTEGER:
		*v = column{kind: colInteger, i: sqlite3.Xsqlite3_column_int64(t, p, int32(i))}
	case sqlite3.SQLITE_FLOAT:
		*v = column{kind: colInteger, i: int64(sqlite3.Xsqlite3_column_double(t, p, int32(i)))}
	case sqlite3.SQLITE_TEXT:
		ptr := sqlite3.Xsqlite3_column_text(t, p, int32(i))
		n := int(sqlite3.Xsqlite3_column_bytes(t, p, int32(i)))
		*v = column{kind: colText}
		if n > 0 {
			v.s = string(libc.GoBytes(ptr, n))
		}
	case sqlite3.SQLITE_BLOB:
		ptr := sqlite3.Xsqlite3_column_blob(t, p, int32(i))
		n := int(sqlite3.Xsqlite3_column_bytes(t, p, int32(i)))
		*v = column{kind: colBlob}
		if n > 0 {
			v.b = libc.GoBytes(ptr, n)
		}
	default:
		*v = column{}
	}
}
