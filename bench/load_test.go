package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/storage"
)

// benchDaemon seeds a data folder with the bench's two chats (small and
// big messages) through seed, then starts a real daemon over it with
// daemontest (in this process), whose main line is the bench's line.
func benchDaemon(t *testing.T, small, big int) (*daemontest.Daemon, string, seedStats) {
	t.Helper()
	if lineHandle != daemontest.MainLine {
		t.Fatalf("the bench's line %s is not daemontest's main line %s", lineHandle, daemontest.MainLine)
	}
	td := daemontest.New(t, "[limits]\nrequests_per_hour = 0\n")
	cfg := daemontest.LoadConfig(t, td.ConfigPath())
	e := &env{dataDir: td.DataDir()}
	for _, l := range cfg.Lines {
		e.lines = append(e.lines, storage.Line{Handle: l.Handle, Service: l.Service, Bridge: l.Bridge})
	}
	stats, err := seed(t.Context(), e, options{small: small, big: big, seeders: 4})
	if err != nil {
		t.Fatal(err)
	}
	td.Start()
	return td, td.Key(api.KeyRequest{Label: "bench"}), stats
}

// The load tool's HTTP half against a real daemon: the seeded chats list
// in full and in order through measurePages, a short POST load is accepted
// and its outbox drains, and the report shows it all.
func TestLoadAgainstDaemon(t *testing.T) {
	ctx := t.Context()
	td, key, stats := benchDaemon(t, 60, 130)
	if stats.messages != 190 || stats.seeders != 4 || stats.took <= 0 {
		t.Errorf("seed stats %+v", stats)
	}
	o := options{duration: 300 * time.Millisecond, warmup: 50 * time.Millisecond, clients: 2, small: 60, big: 130, gets: 6, drain: 20 * time.Second}
	r := &report{opts: o, seed: stats, rssAfterStart: rssOf(os.Getpid()), rssAfterLoad: rss{-1, -1}, dbAfterSeed: -1, dbAfterLoad: -1}

	c := newAPIClient(td.URL(), key, o.clients)
	for _, chat := range []struct {
		contact string
		size    int
	}{{contactSmall, 60}, {contactBig, 130}} {
		ps, err := measurePages(ctx, c, chat.contact, chat.size, o.gets)
		if err != nil {
			t.Fatalf("measurePages on %d messages: %v", chat.size, err)
		}
		if ps.failed != 0 || len(ps.anomalies) != 0 {
			t.Errorf("%d messages: %d failures (%s), anomalies %q", chat.size, ps.failed, ps.firstErr, ps.anomalies)
		}
		if len(ps.first) != 3 || len(ps.walk) != 3 || ps.minDepth < 0 || ps.maxDepth < ps.minDepth {
			t.Errorf("%d messages: %d first pages, %d walked, depths %d-%d", chat.size, len(ps.first), len(ps.walk), ps.minDepth, ps.maxDepth)
		}
		if ps.walkedAll != chat.size {
			t.Errorf("a walk counted %d messages, want %d", ps.walkedAll, chat.size)
		}
		ps.name = thousands(chat.size) + " msgs"
		r.pages = append(r.pages, ps)
	}

	res, err := postLoad(ctx, "blueline daemon", c, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ok == 0 || res.failed != 0 || res.firstErr != "" {
		t.Fatalf("POST load: %d ok, %d failed, first failure %q", res.ok, res.failed, res.firstErr)
	}
	if len(res.lats) != res.ok || len(res.accepted) < res.ok || !strings.HasPrefix(res.accepted[0].id, "obx_") {
		t.Errorf("%d latencies, %d accepted (first %+v) for %d ok", len(res.lats), len(res.accepted), res.accepted[0], res.ok)
	}
	for i := 1; i < len(res.accepted); i++ {
		if res.accepted[i].at.Before(res.accepted[i-1].at) {
			t.Fatal("accepted items are not in arrival order")
		}
	}
	if res.benchCPU < 0 || res.daemonCPU != -1 {
		t.Errorf("CPU: bench %v, daemon %v (none for a nil daemon)", res.benchCPU, res.daemonCPU)
	}
	r.loads = append(r.loads, res)

	r.drain = waitDrain(ctx, c, res.accepted, o.drain)
	if !r.drain.done || r.drain.delivered != len(res.accepted) || r.drain.err != "" || (r.drain.lastStatus != "sent" && r.drain.lastStatus != "failed") {
		t.Errorf("drain %+v", r.drain)
	}
	if d := waitDrain(ctx, c, nil, time.Second); d.items != 0 || d.done {
		t.Errorf("drain of nothing: %+v", d)
	}

	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"Seeded 190 messages (60 + 130)", "blueline daemon", "60 msgs", "130 msgs", "Outbox backlog: all"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if rs := messageResults(r); len(rs) != 4 {
		t.Errorf("results %+v", rs)
	}
}

// Failures are measured, not fatal: a wrong key fails every request, and
// an outbox that cannot be read stops the drain with its error.
func TestLoadFailures(t *testing.T) {
	ctx := t.Context()
	td, key, _ := benchDaemon(t, 3, 5)
	bad := newAPIClient(td.URL(), "sk_wrong", 1)
	o := options{duration: 100 * time.Millisecond, clients: 1}
	res, err := postLoad(ctx, "wrong key", bad, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ok != 0 || res.failed == 0 || !strings.HasPrefix(res.firstErr, "HTTP 401") {
		t.Errorf("with a wrong key: %d ok, %d failed, first %q", res.ok, res.failed, res.firstErr)
	}
	ps, err := measurePages(ctx, bad, contactSmall, 3, 2)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("measurePages with a wrong key: %+v, %v", ps, err)
	}
	d := waitDrain(ctx, bad, []accepted{{id: "obx_x"}}, time.Second)
	if d.done || !strings.Contains(d.err, "HTTP 401") {
		t.Errorf("drain with a wrong key: %+v", d)
	}

	// A chat with no messages lists wrong for a chat said to hold some.
	empty, err := measurePages(ctx, newAPIClient(td.URL(), key, 1), "+15559999999", 10, 4)
	if err != nil || empty.failed != 0 || len(empty.anomalies) == 0 {
		t.Errorf("an empty chat said to hold 10 messages: %v, anomalies %q", err, empty.anomalies)
	}
	// Requests that keep failing stop the measure.
	ps, err = measurePages(ctx, bad, contactSmall, 0, 60)
	if err == nil || !strings.Contains(err.Error(), "keeps failing") || ps.failed != 21 {
		t.Errorf("measurePages failing throughout: %d failed, %v", ps.failed, err)
	}
}

func TestHello(t *testing.T) {
	h, err := startHello()
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	c := newAPIClient(h.url, "sk_any", 2)
	status, body, took, err := c.do(t.Context(), http.MethodPost, "/v1/messages", []byte(`{"x":1}`))
	if err != nil || status != http.StatusCreated || !strings.Contains(string(body), "obx_hello") || took <= 0 {
		t.Fatalf("hello: %d %s %s %v", status, body, took, err)
	}
	res, err := postLoad(t.Context(), "hello-world handler", c, options{duration: 150 * time.Millisecond, warmup: 20 * time.Millisecond, clients: 2}, nil)
	if err != nil || res.ok == 0 || res.failed != 0 || res.rate() <= 0 {
		t.Errorf("postLoad on hello: %+v, %v", res, err)
	}
	// A canceled run is an error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := postLoad(ctx, "canceled", c, options{duration: time.Second, clients: 1}, nil); err == nil {
		t.Error("a canceled load: no error")
	}
	if _, _, _, err := c.do(t.Context(), "BAD METHOD", "/", nil); err == nil {
		t.Error("a malformed request: no error")
	}
}

// The files client against a real daemon: upload, the signed URL, a
// download with its fsync, a ranged GET compared with the source, and the
// transfer measured in this process, where the daemon runs.
func TestFilesAgainstDaemon(t *testing.T) {
	ctx := t.Context()
	td := daemontest.Start(t, "")
	key := td.Key(api.KeyRequest{})
	dir := t.TempDir()
	const size = 3 << 20
	src := filepath.Join(dir, "big.bin")
	sum, err := writeRandomFile(src, size)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := hashFile(src); err != nil || !bytes.Equal(got, sum) {
		t.Fatalf("hashFile = %x, %v; writeRandomFile said %x", got, err, sum)
	}
	if fi, _ := os.Stat(src); fi.Size() != size {
		t.Fatalf("source is %d bytes", fi.Size())
	}

	c := &fileClient{base: td.URL(), key: key, http: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{env: &env{dir: dir}, cmd: &exec.Cmd{Process: self}}
	var id string
	up, err := measureTransfer(d, size, func() (err error) {
		id, err = c.upload(ctx, src, size)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "file_") || up.took <= 0 || up.base.total <= 0 || up.peak.total < up.base.total/2 {
		t.Errorf("upload: id %q, transfer %+v", id, up)
	}
	loc, err := c.signedURL(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "signature=") {
		t.Errorf("signed URL %s", loc)
	}
	dst := filepath.Join(dir, "down.bin")
	if _, err := c.download(ctx, loc, dst, size); err != nil {
		t.Fatal(err)
	}
	if got, _ := hashFile(dst); !bytes.Equal(got, sum) {
		t.Error("the download differs from the upload")
	}
	var mem bytes.Buffer
	if n, err := c.fetch(ctx, loc, size, &mem); err != nil || n != size || sha256.Sum256(mem.Bytes()) != [32]byte(sum) {
		t.Errorf("fetch: %d, %v", n, err)
	}
	if _, err := c.fetch(ctx, loc, size+1, &mem); err == nil {
		t.Error("fetch of fewer bytes than expected: no error")
	}
	check, err := c.checkRange(ctx, loc, src, size)
	if err != nil || !strings.Contains(check, "206") || !strings.Contains(check, "1,048,576 bytes that match") {
		t.Errorf("checkRange = %q, %v", check, err)
	}
	// Another file's bytes do not match.
	other := filepath.Join(dir, "other.bin")
	writeRandomFile(other, size)
	if _, err := c.checkRange(ctx, loc, other, size); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("checkRange against other bytes: %v", err)
	}

	// Refusals.
	if _, err := c.signedURL(ctx, "file_nope"); err == nil {
		t.Error("signedURL of a missing file: no error")
	}
	if _, err := c.fetch(ctx, loc+"x", size, &mem); err == nil {
		t.Error("fetch with a bad signature: no error")
	}
	if _, err := c.upload(ctx, filepath.Join(dir, "missing"), 1); err == nil {
		t.Error("upload of a missing file: no error")
	}
	wrong := &fileClient{base: td.URL(), key: "sk_wrong", http: c.http}
	if _, err := wrong.upload(ctx, src, size); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("upload with a wrong key: %v", err)
	}
	if _, err := hashFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("hashFile of a missing file: no error")
	}
}

func TestCopyAndSettle(t *testing.T) {
	if _, err := exec.LookPath("cp"); err != nil {
		t.Skip("no cp")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if _, err := writeRandomFile(src, 64<<10); err != nil {
		t.Fatal(err)
	}
	cp, cpSync, err := timeCopy(t.Context(), src, filepath.Join(dir, "dst"), 64<<10)
	if err != nil || cp <= 0 || cpSync < cp {
		t.Errorf("timeCopy = %s, %s, %v", cp, cpSync, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dst")); !os.IsNotExist(err) {
		t.Error("timeCopy left its copy")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("settle left files: %v", entries)
	}
	if _, _, err := timeCopy(t.Context(), filepath.Join(dir, "missing"), filepath.Join(dir, "dst"), 1); err == nil {
		t.Error("timeCopy of a missing file: no error")
	}
	if err := settle(filepath.Join(dir, "missing"), 1); err == nil {
		t.Error("settle in a missing folder: no error")
	}
	if err := fsyncFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("fsyncFile of a missing file: no error")
	}
	if _, err := writeRandomFile(filepath.Join(dir, "missing", "f"), 1); err == nil {
		t.Error("writeRandomFile in a missing folder: no error")
	}
	var z [8]byte
	z[3] = 1
	if n, err := (zeros{}).Read(z[:]); n != 8 || err != nil || z != [8]byte{} {
		t.Errorf("zeros read %d, %v: %v", n, err, z)
	}
}
