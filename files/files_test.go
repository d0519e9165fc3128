package files_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/storage"
)

func openDB(t testing.TB, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// configured is opts, what they leave unset as the default configuration
// has it.
func configured(opts files.Options) files.Options {
	def := config.Default().Files
	opts.MaxUploadBytes = cmp.Or(opts.MaxUploadBytes, def.MaxUploadBytes)
	opts.URLTTL = cmp.Or(opts.URLTTL, def.URLTTL.Duration)
	return opts
}

// openStore opens a store configured with opts over a fresh database and
// returns it with its database and blob folder.
func openStore(t testing.TB, opts files.Options) (*files.Store, *storage.DB, string) {
	t.Helper()
	db := openDB(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "files")
	s, err := files.Open(t.Context(), dir, db, configured(opts))
	if err != nil {
		t.Fatal(err)
	}
	return s, db, dir
}

// list names what is in dir, sorted.
func list(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSave(t *testing.T) {
	s, db, dir := openStore(t, files.Options{})
	const body = "hello, world\n"
	f, err := s.Save(t.Context(), strings.NewReader(body), "../notes.txt", "Text/Plain; Charset=UTF-8", storage.FileScope{})
	if err != nil {
		t.Fatal(err)
	}
	if !storage.ValidID(f.ID, "file_") || f.Filename != "notes.txt" || f.MimeType != "text/plain; charset=UTF-8" ||
		f.Size != int64(len(body)) || f.CreatedAt == 0 {
		t.Errorf("Save returned %+v", f)
	}
	if got, err := os.ReadFile(s.Path(f.ID)); err != nil || string(got) != body {
		t.Errorf("blob holds %q, %v; want %q", got, err, body)
	}
	if stored, err := db.FileByID(t.Context(), f.ID); err != nil || stored != f {
		t.Errorf("stored %+v, %v; want %+v", stored, err, f)
	}
	if got := list(t, dir); !slices.Equal(got, []string{f.ID}) {
		t.Errorf("folder holds %q, want only the blob", got)
	}

	f, err = s.Save(t.Context(), strings.NewReader(body), "", "", storage.FileScope{})
	if err != nil || f.Filename != "" || f.MimeType != "application/octet-stream" {
		t.Errorf("Save without name or type: %+v, %v", f, err)
	}
}

func TestSaveLimits(t *testing.T) {
	const limit = 16
	tests := []struct {
		name string
		body io.Reader
		want error // nil: saved
	}{
		{"empty", strings.NewReader(""), files.ErrEmpty},
		{"at the limit", strings.NewReader(strings.Repeat("x", limit)), nil},
		{"one byte over", strings.NewReader(strings.Repeat("x", limit+1)), files.ErrTooLarge},
		{"far over", strings.NewReader(strings.Repeat("x", 1<<20)), files.ErrTooLarge},
		{"cut off", io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(io.ErrUnexpectedEOF)), files.ErrIncomplete},
		{"cut off at once", iotest.ErrReader(io.ErrUnexpectedEOF), files.ErrIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, dir := openStore(t, files.Options{MaxUploadBytes: limit})
			f, err := s.Save(t.Context(), tt.body, "x.bin", "", storage.FileScope{})
			if tt.want == nil {
				if err != nil || f.Size != limit {
					t.Fatalf("Save: %+v, %v", f, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Save: %v, want %v", err, tt.want)
			}
			if got := list(t, dir); len(got) != 0 {
				t.Errorf("failed Save left %q", got)
			}
		})
	}
}

func TestSaveErrors(t *testing.T) {
	s, _, dir := openStore(t, files.Options{MaxUploadBytes: 1000})
	_, err := s.Save(t.Context(), strings.NewReader(strings.Repeat("x", 1001)), "", "", storage.FileScope{})
	if !strings.Contains(err.Error(), "1000 bytes") {
		t.Errorf("too large error %q does not name the limit", err)
	}
	_, err = s.Save(t.Context(), iotest.ErrReader(io.ErrUnexpectedEOF), "", "", storage.FileScope{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("incomplete error %q hides its cause", err)
	}
	if _, err := s.Save(t.Context(), strings.NewReader("x"), "", "text", storage.FileScope{}); err == nil {
		t.Error("Save accepted the media type \"text\"")
	}
	if got := list(t, dir); len(got) != 0 {
		t.Errorf("failed Saves left %q", got)
	}
}

// cancelOnRead cancels its context when first read, as a client hanging up
// mid-upload does.
type cancelOnRead struct {
	cancel context.CancelFunc
}

func (r cancelOnRead) Read(p []byte) (int, error) {
	r.cancel()
	return copy(p, "partial"), nil
}

func TestSaveCancelled(t *testing.T) {
	s, _, dir := openStore(t, files.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := s.Save(ctx, cancelOnRead{cancel}, "", "", storage.FileScope{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save: %v, want context.Canceled", err)
	}
	if got := list(t, dir); len(got) != 0 {
		t.Errorf("cancelled Save left %q", got)
	}
}

func TestSaveMetadataFailure(t *testing.T) {
	s, db, dir := openStore(t, files.Options{})
	db.Close()
	if _, err := s.Save(t.Context(), strings.NewReader("abc"), "", "", storage.FileScope{}); err == nil {
		t.Fatal("Save with a closed database succeeded")
	}
	if got := list(t, dir); len(got) != 0 {
		t.Errorf("Save whose metadata failed left %q", got)
	}
}

// zeros is an endless reader that allocates nothing.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestSaveStreams(t *testing.T) {
	const size = 32 << 20
	s, _, _ := openStore(t, files.Options{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := s.Save(t.Context(), io.LimitReader(zeros{}, size), "", "", storage.FileScope{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
		t.Errorf("saving %d MiB allocated %d KiB", size>>20, grew>>10)
	}
}

func TestOpenSweepsCrashLeftovers(t *testing.T) {
	s, db, dir := openStore(t, files.Options{})
	good, err := s.Save(t.Context(), strings.NewReader("keep"), "", "", storage.FileScope{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := storage.NewID("file_") // renamed into place, metadata never committed
	for _, name := range []string{".upload-123456", orphan, "README"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := files.Open(t.Context(), dir, db, configured(files.Options{})); err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, dir), []string{"README", good.ID}; !slices.Equal(got, want) {
		t.Errorf("after Open the folder holds %q, want %q", got, want)
	}
}

func TestSanitizeFilename(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct{ in, want string }{
		{"photo.jpg", "photo.jpg"},
		{"", ""},
		{"../../etc/passwd", "passwd"},
		{`C:\Users\x\photo.jpg`, "photo.jpg"},
		{"a\x00b\nc.txt", "abc.txt"},
		{"dir/", ""},
		{".", ""},
		{"..", ""},
		{"x/..", ""},
		{" . ", ""},
		{".bashrc", ".bashrc"},
		{"  spaced name.txt \t", "spaced name.txt"},
		{"invoice\u202egpj.exe", "invoicegpj.exe"},
		{"a\u2066b\u2069\u2028c\u2029.txt", "abc.txt"},
		{"bad\xff\xfeutf8.txt", "badutf8.txt"},
		{"résumé 📄.pdf", "résumé 📄.pdf"},
		{long + ".jpeg", long[:250] + ".jpeg"},
		{long + ".jpg", long[:250] + ".jpg"},
		{long + long, long[:254]},
		{"x" + long + "." + long, ("x" + long)[:255]},
	}
	for _, tt := range tests {
		if got := files.SanitizeFilename(tt.in); got != tt.want {
			t.Errorf("SanitizeFilename(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestURL(t *testing.T) {
	s, _, _ := openStore(t, files.Options{BaseURL: "https://example.com/api", URLTTL: time.Hour})
	id := storage.NewID("file_")
	now := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	raw := s.URL(id, now)
	if later := s.URL(id, now.Add(29*time.Second)); later != raw {
		t.Errorf("URLs within one minute differ:\n%s\n%s", raw, later)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	expires, sig := u.Query().Get("expires"), u.Query().Get("signature")
	if u.Scheme+"://"+u.Host+u.Path != "https://example.com/api/files/"+id || len(sig) != 64 {
		t.Errorf("URL %s", raw)
	}
	wantExp := now.Add(time.Hour + 30*time.Second).Unix()
	if expires != strconv.FormatInt(wantExp, 10) {
		t.Errorf("expires = %s, want %d (one hour, rounded up to the minute)", expires, wantExp)
	}

	otherSig := strings.Repeat("0", 64)
	flipped := []byte(sig)
	flipped[0] ^= 1
	tests := []struct {
		name, id, expires, sig string
		now                    time.Time
		want                   error
	}{
		{"valid", id, expires, sig, now, nil},
		{"valid at its expiry", id, expires, sig, time.Unix(wantExp, 0), nil},
		{"expired", id, expires, sig, time.Unix(wantExp+1, 0), files.ErrURLExpired},
		{"other id", storage.NewID("file_"), expires, sig, now, files.ErrURLInvalid},
		{"not a file id", "../db.bolt", expires, sig, now, files.ErrURLInvalid},
		{"later expiry", id, strconv.FormatInt(wantExp+3600, 10), sig, now, files.ErrURLInvalid},
		{"unparsable expiry", id, "soon", sig, now, files.ErrURLInvalid},
		{"altered signature", id, expires, string(flipped), now, files.ErrURLInvalid},
		{"other signature", id, expires, otherSig, now, files.ErrURLInvalid},
		{"upper-case signature", id, expires, strings.ToUpper(sig), now, nil},
		{"no signature", id, expires, "", now, files.ErrURLInvalid},
		{"malformed signature", id, expires, "zz", now, files.ErrURLInvalid},
		{"forged and expired", id, expires, otherSig, time.Unix(wantExp+1, 0), files.ErrURLInvalid},
	}
	for _, tt := range tests {
		if err := s.Verify(tt.id, tt.expires, tt.sig, tt.now); !errors.Is(err, tt.want) {
			t.Errorf("%s: Verify = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestURLSurvivesRestart(t *testing.T) {
	dbDir, dir := t.TempDir(), t.TempDir()
	db := openDB(t, dbDir)
	s, err := files.Open(t.Context(), dir, db, configured(files.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	id, now := storage.NewID("file_"), time.Now()
	u, err := url.Parse(s.URL(id, now))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = files.Open(t.Context(), dir, openDB(t, dbDir), configured(files.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(id, u.Query().Get("expires"), u.Query().Get("signature"), now); err != nil {
		t.Errorf("a URL made before the restart: %v", err)
	}
	other, _, _ := openStore(t, files.Options{})
	if err := other.Verify(id, u.Query().Get("expires"), u.Query().Get("signature"), now); !errors.Is(err, files.ErrURLInvalid) {
		t.Errorf("another database's store accepted the URL: %v", err)
	}
}

// serve starts a download server as the daemon wires one: verify the URL,
// look the file up, serve it.
func serve(t *testing.T) *files.Store {
	t.Helper()
	var s *files.Store
	var db *storage.DB
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/files/")
		q := r.URL.Query()
		if err := s.Verify(id, q.Get("expires"), q.Get("signature"), time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		f, err := db.FileByID(r.Context(), id)
		if err == nil {
			err = s.Serve(w, r, f)
		}
		switch {
		case errors.Is(err, storage.ErrNotFound):
			http.Error(w, err.Error(), http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	s, db, _ = openStore(t, files.Options{BaseURL: "http://" + srv.Listener.Addr().String()})
	srv.Start()
	t.Cleanup(srv.Close)
	return s
}

// do fetches url as a browser following a link does; header is name,
// value pairs.
func do(t *testing.T, method, url string, header ...string) (*http.Response, string) {
	t.Helper()
	resp, body := apitest.Client{TB: t, Part: true}.Fetch(method, url, header...)
	return resp, string(body)
}

func TestServe(t *testing.T) {
	s := serve(t)
	const content = "0123456789<script>alert(1)</script>"
	f, err := s.Save(t.Context(), strings.NewReader(content), "rapport été 📄.html", "text/html", storage.FileScope{})
	if err != nil {
		t.Fatal(err)
	}
	u := s.URL(f.ID, time.Now())

	resp, body := do(t, "GET", u)
	h := resp.Header
	if resp.StatusCode != http.StatusOK || body != content {
		t.Fatalf("GET: %s %q", resp.Status, body)
	}
	if h.Get("Content-Type") != "text/html" || h.Get("Content-Length") != strconv.Itoa(len(content)) ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "sandbox" ||
		!strings.HasPrefix(h.Get("Cache-Control"), "private") || h.Get("Accept-Ranges") != "bytes" {
		t.Errorf("GET headers: %v", h)
	}
	disposition, params, err := mime.ParseMediaType(h.Get("Content-Disposition"))
	if err != nil || disposition != "attachment" || params["filename"] != f.Filename {
		t.Errorf("Content-Disposition %q gives %q %q, %v", h.Get("Content-Disposition"), disposition, params, err)
	}

	resp, body = do(t, "GET", u, "Range", "bytes=2-5")
	if resp.StatusCode != http.StatusPartialContent || body != content[2:6] ||
		resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 2-5/%d", len(content)) {
		t.Errorf("Range: %s %q %q", resp.Status, body, resp.Header.Get("Content-Range"))
	}

	resp, body = do(t, "HEAD", u)
	if resp.StatusCode != http.StatusOK || body != "" || resp.Header.Get("Content-Length") != strconv.Itoa(len(content)) {
		t.Errorf("HEAD: %s %q %v", resp.Status, body, resp.Header)
	}

	resp, _ = do(t, "GET", u, "If-None-Match", h.Get("ETag"))
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %s", resp.Status)
	}

	if resp, _ := do(t, "GET", strings.Replace(u, "expires=", "expires=1", 1)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("altered URL: %s", resp.Status)
	}
}

func TestServeUnnamed(t *testing.T) {
	s := serve(t)
	f, err := s.Save(t.Context(), strings.NewReader("x"), "", "", storage.FileScope{})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := do(t, "GET", s.URL(f.ID, time.Now()))
	if got, want := resp.Header.Get("Content-Disposition"), "attachment; filename="+f.ID; got != want {
		t.Errorf("Content-Disposition = %q, want %q", got, want)
	}
}

func TestServeMissingBlob(t *testing.T) {
	s := serve(t)
	f, err := s.Save(t.Context(), strings.NewReader("x"), "", "", storage.FileScope{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.Path(f.ID)); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	err = s.Serve(rec, httptest.NewRequest("GET", "/files/"+f.ID, nil), f)
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Serve: %v, want storage.ErrNotFound", err)
	}
	if len(rec.Header()) != 0 || rec.Body.Len() != 0 {
		t.Errorf("Serve wrote %v %q before failing", rec.Header(), rec.Body)
	}
	if resp, _ := do(t, "GET", s.URL(f.ID, time.Now())); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET: %s", resp.Status)
	}
}

func TestPath(t *testing.T) {
	s, _, dir := openStore(t, files.Options{})
	id := storage.NewID("file_")
	if got := s.Path(id); got != filepath.Join(dir, id) {
		t.Errorf("Path(%s) = %s", id, got)
	}
	for _, id := range []string{"", "../db.bolt", "file_../../../../etc/passwd", "msg_" + id[5:]} {
		if got := s.Path(id); got != "" {
			t.Errorf("Path(%q) = %q, want \"\"", id, got)
		}
	}
	if s.MaxUploadBytes() != config.Default().Files.MaxUploadBytes {
		t.Errorf("MaxUploadBytes = %d", s.MaxUploadBytes())
	}
}

func TestImport(t *testing.T) {
	s, _, _ := openStore(t, files.Options{})
	src := filepath.Join(t.TempDir(), "Voice Memo.CAF")
	if err := os.WriteFile(src, []byte("caff"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := s.Import(t.Context(), src, "", "", storage.FileScope{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Filename != "Voice Memo.CAF" || f.MimeType != "audio/x-caf" || f.Size != 4 {
		t.Errorf("Import with defaults: %+v", f)
	}
	if got, err := os.ReadFile(s.Path(f.ID)); err != nil || string(got) != "caff" {
		t.Errorf("imported blob holds %q, %v", got, err)
	}
	f, err = s.Import(t.Context(), src, "memo.m4a", "", storage.FileScope{})
	if err != nil || f.Filename != "memo.m4a" || f.MimeType != "audio/mp4" {
		t.Errorf("Import with a name: %+v, %v", f, err)
	}
	f, err = s.Import(t.Context(), src, "", "audio/AMR", storage.FileScope{})
	if err != nil || f.MimeType != "audio/amr" {
		t.Errorf("Import with a type: %+v, %v", f, err)
	}
	if _, err := s.Import(t.Context(), filepath.Join(t.TempDir(), "gone.jpg"), "", "", storage.FileScope{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Import of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func BenchmarkSave(b *testing.B) {
	const size = 64 << 20
	s, _, _ := openStore(b, files.Options{})
	b.SetBytes(size)
	for b.Loop() {
		f, err := s.Save(b.Context(), io.LimitReader(zeros{}, size), "", "", storage.FileScope{})
		if err != nil {
			b.Fatal(err)
		}
		// Keep the folder from growing by 64 MiB an iteration.
		os.Remove(s.Path(f.ID))
	}
}

// A file another node stored is adopted whole, under its own ID and
// metadata; one cut short, or of another size, leaves nothing behind.
func TestAdopt(t *testing.T) {
	s, db, _ := openStore(t, files.Options{})
	f := storage.File{ID: storage.NewID("file_"), Filename: "memo.m4a", MimeType: "audio/mp4", Size: 5, CreatedAt: 1_700_000_000_000,
		FileScope: storage.FileScope{Owner: "ann"}}
	if err := s.Adopt(t.Context(), f, strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := db.FileByID(t.Context(), f.ID)
	if err != nil || got != f {
		t.Fatalf("adopted %+v, %v; want %+v", got, err, f)
	}
	if b, err := os.ReadFile(s.Path(f.ID)); err != nil || string(b) != "hello" {
		t.Fatalf("blob %q, %v", b, err)
	}
	short := f
	short.ID, short.Size = storage.NewID("file_"), 10
	if err := s.Adopt(t.Context(), short, strings.NewReader("hello")); !errors.Is(err, files.ErrIncomplete) {
		t.Errorf("a file shorter than its size: %v", err)
	}
	if ok, _ := db.HasFile(t.Context(), short.ID); ok {
		t.Error("a file cut short was kept")
	}
	if _, err := os.Stat(s.Path(short.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its blob: %v", err)
	}
	bad := f
	bad.ID = "../etc/passwd"
	if err := s.Adopt(t.Context(), bad, strings.NewReader("hello")); err == nil {
		t.Error("an ID that is not a file ID was adopted")
	}
}
