package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the whole database to w while the
// daemon runs: a read transaction's snapshot, copied page by page
// (tx.WriteTo). Writers go on meanwhile; only a write that needs the file to
// grow past its current mapping waits for the copy to end. It returns the
// bytes written. ctx stops the copy between writes.
func (db *DB) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var n int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

// ctxWriter fails its writes once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// CheckBackup checks that the file at path is a Blueline database this build
// can open: a bbolt file (its meta pages' checksums are verified on open)
// with our meta bucket and a schema version no newer than ours. It opens the
// file read-only and changes nothing.
func CheckBackup(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if info.Size() == 0 {
		return fmt.Errorf("%s is empty, not a Blueline database", path)
	}
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return fmt.Errorf("%s is locked by another process (a running daemon?)", path)
	}
	if err != nil {
		return fmt.Errorf("%s is not a Blueline database: %w", path, err)
	}
	defer b.Close()
	return b.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		if meta == nil {
			return fmt.Errorf("%s is a bbolt file but not a Blueline database (no %q bucket)", path, bktMeta)
		}
		v := meta.Get([]byte("version"))
		if len(v) != 8 {
			return fmt.Errorf("%s is not a Blueline database (no schema version)", path)
		}
		switch got := binary.BigEndian.Uint64(v); {
		case got == 0:
			return fmt.Errorf("%s has an invalid schema version 0", path)
		case got > schemaVersion:
			return fmt.Errorf("%s has schema version %d, newer than this build understands (%d)", path, got, schemaVersion)
		}
		return nil
	})
}

// Restored says what Restore did.
type Restored struct {
	Path string // the database now in place
	Size int64
	// Previous is where the database that was in place was kept ("" when
	// there was none).
	Previous string
}

// Restore puts the backup at src in place as the database of data folder
// dir, on a stopped daemon. The backup is checked first; it is copied beside
// the database (db.bolt.restore-tmp), synced, and renamed into place, so the
// database is never half-written. The database that was there is kept as
// db.bolt.before-restore-<UTC time>. The current database is held locked
// throughout: a daemon that holds it makes Restore fail instead.
func Restore(dir, src string, now time.Time) (Restored, error) {
	if err := CheckBackup(src); err != nil {
		return Restored{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Restored{}, fmt.Errorf("create data folder: %w", err)
	}
	path := filepath.Join(dir, "db.bolt")
	if same, err := sameFile(src, path); err != nil {
		return Restored{}, err
	} else if same {
		return Restored{}, fmt.Errorf("%s is the database itself", src)
	}
	res := Restored{Path: path}
	if _, err := os.Stat(path); err == nil {
		// A shared lock: refused while a daemon holds the exclusive one.
		cur, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if errors.Is(err, bolt.ErrTimeout) {
			return Restored{}, fmt.Errorf("%s is locked by another process: stop the daemon first", path)
		}
		if err == nil {
			defer cur.Close()
		}
		// A database that does not open (damaged) is kept all the same.
		res.Previous = path + ".before-restore-" + now.UTC().Format("20060102T150405.000Z")
	} else if !errors.Is(err, os.ErrNotExist) {
		return Restored{}, err
	}
	tmp := path + ".restore-tmp"
	n, err := copyFile(src, tmp)
	if err != nil {
		os.Remove(tmp)
		return Restored{}, fmt.Errorf("copy %s: %w", src, err)
	}
	res.Size = n
	if res.Previous != "" {
		if err := os.Rename(path, res.Previous); err != nil {
			os.Remove(tmp)
			return Restored{}, err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return res, fmt.Errorf("put the backup in place (the previous database is %s, the backup's copy %s): %w", res.Previous, tmp, err)
	}
	return res, SyncDir(dir)
}

// copyFile copies src to a new file dst (mode 0600) and syncs it.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func sameFile(a, b string) (bool, error) {
	ia, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	ib, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(ia, ib), nil
}

// SyncDir makes the renames in a folder durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
