package storage

import (
	"context"

	bolt "go.etcd.io/bbolt"
)

// File is an uploaded file's metadata.
type File struct {
	ID        string `json:"id"`
	Filename  string `json:"filename"`
	MimeType  string `json:"mime_type"`
	Size      int64  `json:"size"`
	CreatedAt int64  `json:"created_at"`
}

// FileByID returns a file's metadata. Uploads (POST /v1/files) are not built
// yet, so no file exists and every lookup answers ErrNotFound.
func (db *DB) FileByID(ctx context.Context, id string) (File, error) {
	var f File
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bktFiles), []byte(id), &f)
	})
	return f, err
}
