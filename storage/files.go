package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// File is an uploaded file's metadata. The bytes live on disk, in the files
// package's folder, under the file's ID.
type File struct {
	ID        string `json:"id"`
	Filename  string `json:"filename"`
	MimeType  string `json:"mime_type"`
	Size      int64  `json:"size"`
	CreatedAt int64  `json:"created_at"`
	FileScope
}

// FileScope says whom a file belongs to: the line an inbound attachment
// arrived on (and, on the sandbox line, the owner paired with its sender),
// or the owner of the key that uploaded it.
type FileScope struct {
	LineID string `json:"line_id,omitempty"`
	Owner  string `json:"owner,omitempty"`
}

// PutFile stores a file's metadata durably. The files package calls it only
// once the blob is on disk, so metadata never points at missing bytes.
func (db *DB) PutFile(ctx context.Context, f File) error {
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		return putJSON(appendOnly(tx, bktFiles), []byte(f.ID), f)
	})
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.ID, err)
	}
	return nil
}

// FileByID returns a file's metadata, or ErrNotFound.
func (db *DB) FileByID(ctx context.Context, id string) (File, error) {
	var f File
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bktFiles), []byte(id), &f)
	})
	return f, err
}

// HasFile reports whether a file's metadata exists, without decoding it.
func (db *DB) HasFile(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bktFiles).Get([]byte(id)) != nil
		return nil
	})
	return ok, err
}

// DeleteFile removes a file's metadata, or answers ErrNotFound. The caller
// removes the blob afterwards: a crash in between leaves an orphan blob,
// which the files package sweeps at startup, never metadata without bytes.
func (db *DB) DeleteFile(ctx context.Context, id string) error {
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktFiles)
		if b.Get([]byte(id)) == nil {
			return ErrNotFound
		}
		return b.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("delete file %s: %w", id, err)
	}
	return nil
}

// Secret returns the 32-byte random secret called name, creating it on first
// use. It lives in the database so that what it signed before a restart
// still verifies after it.
func (db *DB) Secret(ctx context.Context, name string) ([]byte, error) {
	key := []byte("secret/" + name)
	var secret []byte
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bktMeta)
		if v := meta.Get(key); v != nil {
			secret = bytes.Clone(v)
			return nil
		}
		secret = make([]byte, 32)
		rand.Read(secret)
		return meta.Put(key, secret)
	})
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return secret, nil
}
