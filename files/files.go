// Package files keeps file blobs on local disk and handles their upload and
// download. A blob is stored under its file ID in one folder; its metadata is
// in the database and commits only after the blob is durable, so metadata
// never points at missing bytes, and what a crash leaves behind (temp files,
// blobs without metadata) is swept at the next Open.
package files

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/mediatype"
	"github.com/blueline-app/blueline/storage"
)

// Options tune a Store: the daemon passes [files]'s settings.
type Options struct {
	MaxUploadBytes int64         // largest upload; more than 0
	URLTTL         time.Duration // how long a signed download URL works; more than 0
	BaseURL        string        // public base URL of the API, no trailing slash, e.g. "http://127.0.0.1:8080"
}

// Errors callers branch on: the first three are the uploader's fault, the
// URL ones the downloader's.
var (
	ErrEmpty      = errors.New("file is empty")
	ErrTooLarge   = errors.New("file is too large")
	ErrIncomplete = errors.New("file upload is incomplete")
	ErrURLExpired = errors.New("download URL has expired")
	ErrURLInvalid = errors.New("download URL is invalid")
)

// tempPrefix marks uploads in progress; Open removes any it finds, as only a
// crash leaves one behind.
const tempPrefix = ".upload-"

// Store keeps blobs in one folder. It is safe for concurrent use: its fields
// are fixed at Open, and each upload writes its own temp file.
type Store struct {
	dir     string
	db      *storage.DB
	max     int64
	ttl     time.Duration
	baseURL string
	secret  []byte
}

// Open opens the blob folder dir, creating it if needed, and removes what
// uploads interrupted by a crash left in it.
func Open(ctx context.Context, dir string, db *storage.DB, opts Options) (*Store, error) {
	if opts.MaxUploadBytes <= 0 || opts.URLTTL <= 0 {
		return nil, fmt.Errorf("open files: the upload limit and the URL lifetime must be more than 0")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create files folder: %w", err)
	}
	secret, err := db.Secret(ctx, "file_urls")
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:     dir,
		db:      db,
		max:     opts.MaxUploadBytes,
		ttl:     opts.URLTTL,
		baseURL: strings.TrimSuffix(opts.BaseURL, "/"),
		secret:  secret,
	}
	if err := s.sweep(ctx); err != nil {
		return nil, fmt.Errorf("clean files folder: %w", err)
	}
	return s, nil
}

// sweep removes temp files of interrupted uploads, and blobs whose metadata
// never committed (a crash between the rename and PutFile). Anything else in
// the folder is not ours and is left alone.
func (s *Store) sweep(ctx context.Context) error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		orphan := strings.HasPrefix(name, tempPrefix)
		if !orphan && storage.ValidID(name, "file_") {
			has, err := s.db.HasFile(ctx, name)
			if err != nil {
				return err
			}
			orphan = !has
		}
		if orphan {
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Path is the path of the blob of file id, or "" when id is not a file ID,
// so that no request can steer a path outside the folder.
func (s *Store) Path(id string) string {
	if !storage.ValidID(id, "file_") {
		return ""
	}
	return filepath.Join(s.dir, id)
}

// MaxUploadBytes is the largest upload Save accepts.
func (s *Store) MaxUploadBytes() int64 { return s.max }

// Save streams body into a new blob and stores its metadata. It fails with
// ErrEmpty, ErrTooLarge or ErrIncomplete for a bad body, and on any failure
// leaves nothing behind. name is sanitised; mimeType "" means
// application/octet-stream, and anything else must pass mediatype.Parse.
func (s *Store) Save(ctx context.Context, body io.Reader, name, mimeType string, scope storage.FileScope) (storage.File, error) {
	mimeType, err := mediatype.Parse(mimeType)
	if err != nil {
		return storage.File{}, err
	}
	f := storage.File{ID: storage.NewID("file_"), Filename: SanitizeFilename(name), MimeType: mimeType, FileScope: scope,
		CreatedAt: time.Now().UnixMilli()}
	return s.store(ctx, f, body)
}

// Adopt stores body as f, a file another node of a fleet stored (its ID,
// name, type, scope and time kept), so that a message sent here can carry
// it. Its size must be f's. Limits and atomicity are Save's.
func (s *Store) Adopt(ctx context.Context, f storage.File, body io.Reader) error {
	if !storage.IDShaped(f.ID, "file_") {
		return fmt.Errorf("adopt file: %q is not a file ID", f.ID)
	}
	mimeType, err := mediatype.Parse(f.MimeType)
	if err != nil {
		return err
	}
	want := f.Size
	f.Filename, f.MimeType = SanitizeFilename(f.Filename), mimeType
	if f, err = s.store(ctx, f, body); err == nil && f.Size != want {
		s.db.DeleteFile(ctx, f.ID)
		os.Remove(s.Path(f.ID))
		err = fmt.Errorf("%w: %d bytes of %d", ErrIncomplete, f.Size, want)
	}
	return err
}

// store streams body into f's blob and stores f with its size: nothing is
// left behind on a failure.
func (s *Store) store(ctx context.Context, f storage.File, body io.Reader) (storage.File, error) {
	blob := s.Path(f.ID)
	tmp, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return storage.File{}, fmt.Errorf("save file: %w", err)
	}
	f.Size, err = s.fill(ctx, tmp, body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), blob)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return storage.File{}, err
	}
	// The rename is durable only once the folder is synced; metadata must
	// not commit before it.
	err = syncDir(s.dir)
	if err == nil {
		err = s.db.PutFile(ctx, f)
	}
	if err != nil {
		os.Remove(blob)
		return storage.File{}, err
	}
	return f, nil
}

// fill copies body into tmp through a fixed buffer, so an upload's size never
// shows in memory, and syncs it. It reads one byte past the limit to tell
// "too large" from "exactly the limit".
func (s *Store) fill(ctx context.Context, tmp *os.File, body io.Reader) (int64, error) {
	// 1 MiB: system calls, not memory, bound an upload's speed (64 KiB was
	// half as fast on a sandboxed VM), and the buffer is per upload.
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, rerr := body.Read(buf[:min(int64(len(buf)), s.max+1-n)])
		n += int64(m)
		if n > s.max {
			return n, fmt.Errorf("%w: the limit is %d bytes", ErrTooLarge, s.max)
		}
		if _, err := tmp.Write(buf[:m]); err != nil {
			return n, err
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, fmt.Errorf("%w: %w", ErrIncomplete, rerr)
		}
	}
	if n == 0 {
		return 0, ErrEmpty
	}
	if err := tmp.Sync(); err != nil {
		return n, err
	}
	// A request abandoned after its last byte arrived is abandoned still.
	return n, ctx.Err()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Import copies the local file at path into the store through Save, with the
// same limits and atomicity. name "" means path's base name; mimeType ""
// means the type mediatype.ByName gives name.
func (s *Store) Import(ctx context.Context, path, name, mimeType string, scope storage.FileScope) (storage.File, error) {
	src, err := os.Open(path)
	if err != nil {
		return storage.File{}, fmt.Errorf("import file: %w", err)
	}
	defer src.Close()
	name = cmp.Or(name, filepath.Base(path))
	return s.Save(ctx, src, name, cmp.Or(mimeType, mediatype.ByName(name)), scope)
}

// Serve answers a download of f, with Range, HEAD and conditional requests;
// ranges that would make the response larger than the file are ignored (see
// rangesServable).
// A missing blob is an error wrapping storage.ErrNotFound, returned before
// anything is written, so the caller still chooses the response.
func (s *Store) Serve(w http.ResponseWriter, r *http.Request, f storage.File) error {
	// An invalid ID gives the path "", which does not exist either.
	blob, err := os.Open(s.Path(f.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file %s has no blob: %w", f.ID, storage.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("serve file: %w", err)
	}
	defer blob.Close()
	h := w.Header()
	h.Set("Content-Type", f.MimeType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": cmp.Or(f.Filename, f.ID)}))
	h.Set("X-Content-Type-Options", "nosniff")
	// Opened in a browser, an uploaded HTML or SVG file must not run scripts
	// on our origin.
	h.Set("Content-Security-Policy", "sandbox")
	// A blob never changes under its ID: the ID is a strong validator.
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("ETag", `"`+f.ID+`"`)
	if rh := r.Header.Get("Range"); rh != "" {
		if fi, err := blob.Stat(); err == nil && !rangesServable(rh, fi.Size(), f.MimeType) {
			r = r.Clone(r.Context())
			r.Header.Del("Range")
		}
	}
	http.ServeContent(w, r, "", time.UnixMilli(f.CreatedAt), blob)
	return nil
}

// maxRanges is the most byte ranges a download may ask for at once.
// Clients ask for one (a resumed download, a player seeking) or a few.
const maxRanges = 8

// rangesServable reports whether http.ServeContent may answer the Range
// header h of a download of size bytes of type ctype. It may not when the
// ranges are more than maxRanges, overlap, or would make a multipart
// response larger than the whole file (many small ones: each part has its
// own headers). ServeContent alone allows all of these as long as the
// ranges add up to no more than the file: 1,000 overlapping one-byte ranges
// of a 1,000-byte file make a response of over 100 KB. Such a request is
// answered with the whole file, 200, as RFC 9110 §14.2 lets a server ignore
// Range: never more bytes than the file, and a client that asked for ranges
// still gets what it wanted. A single range, a malformed header or one with
// no satisfiable range is left to ServeContent (206, or 416 Range Not
// Satisfiable).
func rangesServable(h string, size int64, ctype string) bool {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return true // not bytes: ServeContent refuses it with 416
	}
	type byteRange struct{ start, length int64 }
	var ranges []byteRange
	n := 0
	for ra := range strings.SplitSeq(spec, ",") {
		ra = textproto.TrimString(ra)
		if ra == "" {
			continue
		}
		if n++; n > maxRanges {
			return false
		}
		// As ServeContent reads them; anything it refuses is left to it.
		first, last, ok := strings.Cut(ra, "-")
		if !ok {
			return true
		}
		first, last = textproto.TrimString(first), textproto.TrimString(last)
		var r byteRange
		if first == "" { // the last N bytes
			if last == "" || last[0] == '-' {
				return true
			}
			i, err := strconv.ParseInt(last, 10, 64)
			if err != nil || i < 0 {
				return true
			}
			r.start = size - min(i, size)
			r.length = size - r.start
		} else {
			i, err := strconv.ParseInt(first, 10, 64)
			if err != nil || i < 0 {
				return true
			}
			if i >= size {
				continue // not satisfiable: ServeContent skips it
			}
			r.start, r.length = i, size-i
			if last != "" {
				j, err := strconv.ParseInt(last, 10, 64)
				if err != nil || i > j {
					return true
				}
				r.length = min(j, size-1) - i + 1
			}
		}
		ranges = append(ranges, r)
	}
	if len(ranges) < 2 {
		return true
	}
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b byteRange) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].start < sorted[i-1].start+sorted[i-1].length {
			return false
		}
	}
	// The multipart response's size, counted as ServeContent writes it.
	var cw countWriter
	mw := multipart.NewWriter(&cw)
	total := int64(0)
	for _, r := range ranges {
		mw.CreatePart(textproto.MIMEHeader{
			"Content-Range": {fmt.Sprintf("bytes %d-%d/%d", r.start, r.start+r.length-1, size)},
			"Content-Type":  {ctype},
		})
		total += r.length
	}
	mw.Close()
	return total+int64(cw) <= size
}

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}
