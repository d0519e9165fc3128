package storage_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blueline-app/blueline/storage"
)

func TestFiles(t *testing.T) {
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	f := storage.File{ID: storage.NewID("file_"), Filename: "a.png", MimeType: "image/png", Size: 3, CreatedAt: 1}
	if err := db.PutFile(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got, err := db.FileByID(ctx, f.ID); err != nil || got != f {
		t.Errorf("FileByID = %+v, %v; want %+v", got, err, f)
	}
	if ok, err := db.HasFile(ctx, f.ID); !ok || err != nil {
		t.Errorf("HasFile of a stored file = %v, %v", ok, err)
	}
	if err := db.DeleteFile(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.HasFile(ctx, f.ID); ok || err != nil {
		t.Errorf("HasFile of a deleted file = %v, %v", ok, err)
	}
	if _, err := db.FileByID(ctx, f.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("FileByID of a deleted file: %v", err)
	}
	if err := db.DeleteFile(ctx, f.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("second DeleteFile: %v", err)
	}
}

func TestSecretPersists(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.Secret(t.Context(), "a")
	if err != nil || len(a) != 32 {
		t.Fatalf("Secret = %x, %v", a, err)
	}
	b, err := db.Secret(t.Context(), "b")
	if err != nil || bytes.Equal(a, b) {
		t.Errorf("two names share a secret: %x, %v", b, err)
	}
	db.Close()

	db, err = storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if again, err := db.Secret(t.Context(), "a"); err != nil || !bytes.Equal(again, a) {
		t.Errorf("after reopening, Secret = %x, %v; want %x", again, err, a)
	}
}
