package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/julienschmidt/httprouter"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/mediatype"
	"github.com/blueline-app/blueline/storage"
)

// FileStore keeps uploaded files and signs their download URLs.
type FileStore interface {
	Save(ctx context.Context, body io.Reader, name, mimeType string, scope storage.FileScope) (storage.File, error)
	MaxUploadBytes() int64
	URL(id string, now time.Time) string
	Verify(id, expires, signature string, now time.Time) error
	Serve(w http.ResponseWriter, r *http.Request, f storage.File) error
}

func (s *Server) toAPIFile(f storage.File, requestID string) api.File {
	return api.File{ID: f.ID, URL: s.files.URL(f.ID, s.now()), Filename: nonEmpty(f.Filename), MimeType: f.MimeType,
		Size: f.Size, RequestID: requestID}
}

// uploadFile streams a raw request body into the file store.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) error {
	mimeType, err := mediatype.Parse(r.Header.Get("Content-Type"))
	if err != nil {
		return httpapi.Invalid("Content-Type", "Content-Type is not a valid media type.")
	}
	name, err := filenameHeader(r.Header.Get("X-Filename"))
	if err != nil {
		return err
	}
	limit := s.files.MaxUploadBytes()
	tooLarge := httpapi.TooLarge("file_too_large", "The file is larger than the upload limit of %d bytes ([files] max_upload_bytes).", limit)
	// Refuse a declared size without storing any of it.
	if r.ContentLength > limit {
		dropOvershoot(r, 0, limit)
		return tooLarge
	}
	f, err := s.files.Save(r.Context(), r.Body, name, mimeType, storage.FileScope{Owner: apiKey(r.Context()).Owner})
	switch {
	case errors.Is(err, files.ErrEmpty):
		return httpapi.InvalidRequest("empty_file", "", "The file is empty: send its bytes as the request body.")
	case errors.Is(err, files.ErrTooLarge):
		dropOvershoot(r, limit+1, limit) // Save reads one byte past the limit
		return tooLarge
	case errors.Is(err, files.ErrIncomplete):
		return httpapi.InvalidRequest("upload_incomplete", "", "The upload was cut off before the end of the body; nothing was stored.")
	case err != nil:
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, s.toAPIFile(f, httpapi.RequestID(r.Context())))
	return nil
}

// filenameHeader reads X-Filename. Header values are bytes; UTF-8 is taken
// as is, and the RFC 8187 form UTF-8”percent-encoded is decoded, for
// clients (browsers) that cannot send raw UTF-8 in a header.
func filenameHeader(v string) (string, error) {
	if rest, ok := strings.CutPrefix(v, "UTF-8''"); ok {
		dec, err := url.PathUnescape(rest)
		if err != nil {
			return "", httpapi.Invalid("X-Filename", "X-Filename is not valid UTF-8''percent-encoding.")
		}
		v = dec
	}
	return v, nil
}

// getFile answers with a redirect to the file's signed download URL.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) error {
	id, err := queryRequired(r, "id")
	if err != nil {
		return err
	}
	f, err := s.fileByID(r.Context(), id, "id")
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.files.URL(f.ID, s.now()), http.StatusFound)
	return nil
}

// fileByID finds a file the request's key may use: an inbound attachment
// of a line it can reach (on the sandbox line, of its owner's sandbox), or
// a file uploaded by a key of the same owner. Any other is not found.
func (s *Server) fileByID(ctx context.Context, id, param string) (storage.File, error) {
	if !storage.IDShaped(id, "file_") {
		return storage.File{}, httpapi.Invalid(param, "%s must be a file ID (file_…) from POST /v1/files.", param)
	}
	notFound := httpapi.NotFound("file_not_found", param, "No file %s.", id)
	f, err := s.db.FileByID(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return f, notFound
	}
	if err != nil {
		return f, err
	}
	key := apiKey(ctx)
	if f.LineID == "" {
		if f.Owner != key.Owner {
			return f, notFound
		}
		return f, nil
	}
	line, ok := s.db.LineByID(f.LineID)
	if !ok || checkLineAccess(key, line) != nil || line.IsSandbox && f.Owner != key.Owner {
		return f, notFound
	}
	return f, nil
}

// downloadFile serves a signed download URL. The signature is the
// credential, like a presigned object-store URL: no API key is needed.
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	id := p.ByName("id")
	q := r.URL.Query()
	err := s.files.Verify(id, q.Get("expires"), q.Get("signature"), s.now())
	switch {
	case errors.Is(err, files.ErrURLExpired):
		err = httpapi.Forbidden("download_url_expired", "This download URL has expired; ask GET /v1/files?id=%s for a new one.", id)
	case err != nil:
		err = httpapi.Forbidden("download_url_invalid", "This download URL is not valid: it was altered or was never issued.")
	default:
		var f storage.File
		if f, err = s.db.FileByID(r.Context(), id); err == nil {
			err = s.files.Serve(w, r, f)
		}
		if errors.Is(err, storage.ErrNotFound) {
			err = httpapi.NotFound("file_not_found", "", "No file %s.", id)
		}
	}
	if err != nil {
		httpapi.WriteError(w, r, s.log, err)
	}
}
