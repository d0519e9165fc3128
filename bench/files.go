package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	randv2 "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/blueline-app/blueline/config"
)

// Targets of the files mode.
const (
	targetFileSlowdown  = 2.0      // an upload or download takes at most this many times cp's time
	targetFileRSSGrowth = 32 << 20 // daemon memory growth while one file streams through it
)

const (
	rssEvery   = 20 * time.Millisecond // RSS sampling period during a transfer
	rangeBytes = 1 << 20               // length of the ranged GET
	copyBuffer = 1 << 20               // the bench's own copy buffer
	cpRuns     = 2                     // cp runs; the best counts
)

// parseSize reads a byte count: plain bytes, or a number with a decimal
// (kB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB) unit, in any case. ""
// is 0: no files run.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToLower(strings.TrimSpace(s[len(digits):]))
	mult := map[string]int64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[unit]
	n, err := strconv.ParseInt(digits, 10, 64)
	switch {
	case mult == 0:
		return 0, fmt.Errorf("size %q: unknown unit %q; want B, kB, MB, GB, TB, KiB, MiB, GiB or TiB", s, unit)
	case err != nil || n <= 0:
		return 0, fmt.Errorf("size %q: want a positive whole number, then an optional unit", s)
	case n > (1<<63-1)/mult:
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// transfer is one upload or download of the big file: how long it took and
// the daemon's resident memory just before it and at its peak during it.
type transfer struct {
	took       time.Duration // 0 until it completed
	base, peak rss
	daemonCPU  float64 // CPU seconds the daemon used during it, or -1
}

func (t transfer) rate(size int64) float64 { return mib(size) / t.took.Seconds() }

// growth is peak minus base, VmRSS and anonymous; -1 where unknown.
func (t transfer) growth() rss {
	g := rss{-1, -1}
	if t.base.total >= 0 && t.peak.total >= 0 {
		g.total = t.peak.total - t.base.total
	}
	if t.base.anon >= 0 && t.peak.anon >= 0 {
		g.anon = t.peak.anon - t.base.anon
	}
	return g
}

// filesReport gathers what the files mode measured; print writes it whatever
// stage the run reached.
type filesReport struct {
	size          int64
	srcSum        []byte
	cp, cpSync    time.Duration // best of cpRuns; 0 if not measured
	rssAfterStart rss
	up, down      transfer
	downSync      time.Duration // the download's closing fsync, part of down.took
	serve         time.Duration // the signed URL read into memory only; 0 if not measured
	downMatch     string        // "" until the download was checked
	rangeCheck    string
	shutdown      time.Duration
	shutdownErr   error
	daemonLog     string
}

// runFiles is the -files mode: one big file up and down through a real
// daemon, against cp on the same disk.
// The report holds whatever was measured, even when err is not nil.
func runFiles(ctx context.Context, o options) (*filesReport, error) {
	r := &filesReport{size: o.files, rssAfterStart: rss{-1, -1}}
	for _, t := range []*transfer{&r.up, &r.down} {
		t.base, t.peak, t.daemonCPU = rss{-1, -1}, rss{-1, -1}, -1
	}
	err := inTempDir(o, func(root, tmp string) error { return filesIn(ctx, o, root, tmp, r) })
	return r, err
}

func filesIn(ctx context.Context, o options, root, tmp string, r *filesReport) (err error) {

	env, err := newEnv(tmp, o.workers)
	if err != nil {
		return err
	}
	if err := allowUploads(env, o.files); err != nil {
		return err
	}
	// The file is written while the binary builds; both are needed first.
	built := make(chan error, 1)
	go func() { built <- env.build(ctx, root) }()
	src := filepath.Join(tmp, "big.bin")
	r.srcSum, err = writeRandomFile(src, o.files)
	if err != nil {
		<-built
		return err
	}
	if err := <-built; err != nil {
		return err
	}
	if r.cp, r.cpSync, err = timeCopy(ctx, src, filepath.Join(tmp, "big-cp.bin"), o.files); err != nil {
		return err
	}

	d, err := env.start(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Stop even when the run failed, so no daemon outlives the bench.
		r.shutdown, r.shutdownErr = d.stop(15 * time.Second)
		r.daemonLog = d.logTail(20)
		r.print(o.out)
	}()
	r.rssAfterStart = rssOf(d.pid())
	slog.Info("daemon ready", "pid", d.pid(), "addr", env.addr, "rss", r.rssAfterStart.String())

	c := &fileClient{base: "http://" + env.addr, key: d.key, http: &http.Client{
		Transport: &http.Transport{
			Proxy:              nil,
			DialContext:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			DisableCompression: true,
		},
		// The redirect to the signed URL is followed by hand, without the key.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	defer c.http.CloseIdleConnections()

	var id string
	r.up, err = measureTransfer(d, o.files, func() (err error) {
		id, err = c.upload(ctx, src, o.files)
		return err
	})
	if err != nil {
		return err
	}
	slog.Info("uploaded", "id", id, "took", r.up.took.Round(time.Millisecond), "MiB/s", fmt.Sprintf("%.0f", r.up.rate(o.files)))

	dst := filepath.Join(tmp, "big-download.bin")
	var location string
	r.down, err = measureTransfer(d, o.files, func() (err error) {
		if location, err = c.signedURL(ctx, id); err != nil {
			return err
		}
		r.downSync, err = c.download(ctx, location, dst, o.files)
		return err
	})
	if err != nil {
		return err
	}
	slog.Info("downloaded", "took", r.down.took.Round(time.Millisecond), "MiB/s", fmt.Sprintf("%.0f", r.down.rate(o.files)))
	// Hashed afterwards, from the page cache: hashing while streaming
	// cost the timed download 20-30 % on 2 cores, and cp hashes nothing.
	sum, err := hashFile(dst)
	if err != nil {
		return err
	}
	if err := os.Remove(dst); err != nil {
		return fmt.Errorf("remove the download: %w", err)
	}
	// The same download into memory only: what the daemon serves at when
	// the client's disk is out of the way.
	start := time.Now()
	if _, err := c.fetch(ctx, location, o.files, io.Discard); err != nil {
		return err
	}
	r.serve = time.Since(start)
	r.downMatch = "sha256 matches the source"
	if !bytes.Equal(sum, r.srcSum) {
		r.downMatch = fmt.Sprintf("WRONG BYTES: sha256 %x, the source's %x", sum, r.srcSum)
	}

	r.rangeCheck, err = c.checkRange(ctx, location, src, o.files)
	if err != nil {
		r.rangeCheck = "WRONG: " + err.Error()
	}
	if !bytes.Equal(sum, r.srcSum) {
		err = errors.Join(errors.New("the downloaded file differs from the uploaded one"), err)
	}
	return err
}

// allowUploads raises the daemon's upload limit to size by adding a [files]
// section to the config newEnv wrote (it has none), and reloads it to check.
func allowUploads(e *env, size int64) error {
	f, err := os.OpenFile(e.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	_, err = fmt.Fprintf(f, "\n[files]\nmax_upload_bytes = %d\n", max(size, config.Default().Files.MaxUploadBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		return fmt.Errorf("bench config: %w", err)
	}
	e.cfg = cfg
	return nil
}

// writeRandomFile writes size random bytes (a ChaCha8 stream with a random
// seed: fast, and nothing along the way can compress it) to path, fsyncs it
// and returns its sha256.
func writeRandomFile(path string, size int64) (sum []byte, err error) {
	start := time.Now()
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("source file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("source file: %w", cerr)
		}
	}()
	var seed [32]byte
	rand.Read(seed[:])
	h := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(randv2.NewChaCha8(seed), size), make([]byte, copyBuffer)); err != nil {
		return nil, fmt.Errorf("source file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("source file: %w", err)
	}
	slog.Info("source file written", "path", path, "size", sizeStr(size), "took", time.Since(start).Round(time.Millisecond))
	return h.Sum(nil), nil
}

// settle prepares the machine for a timed step that brings size new bytes
// into the page cache. It writes twice that in a scratch file in dir and
// deletes it, so the step finds warm free memory: on a virtual machine that
// hands free memory back to its host (virtio-balloon free page reporting)
// the first touch of a page costs a fault in the host, and writing 1 GiB
// into cold memory takes 2-3 s instead of 0.2 s, whichever step happens to
// come first. Then it writes back every dirty page, so that no step pays
// for an earlier one's writeback.
func settle(dir string, size int64) error {
	f, err := os.CreateTemp(dir, "warm-")
	if err != nil {
		return fmt.Errorf("warm the page cache: %w", err)
	}
	_, err = io.CopyBuffer(f, io.LimitReader(zeros{}, 2*size), make([]byte, copyBuffer))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("warm the page cache: %w", err)
	}
	syscall.Sync()
	return nil
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// timeCopy times the system cp from src to dst, then an fsync of dst, cpRuns
// times, and returns the best of each: cp alone, and cp through the fsync
// (the daemon fsyncs an upload before it answers). dst is removed.
func timeCopy(ctx context.Context, src, dst string, size int64) (cp, cpSync time.Duration, err error) {
	for range cpRuns {
		if err := settle(filepath.Dir(dst), size); err != nil {
			return 0, 0, err
		}
		start := time.Now()
		if out, err := exec.CommandContext(ctx, "cp", src, dst).CombinedOutput(); err != nil {
			return 0, 0, fmt.Errorf("cp: %w: %s", err, bytes.TrimSpace(out))
		}
		copied := time.Since(start)
		if err := fsyncFile(dst); err != nil {
			return 0, 0, err
		}
		synced := time.Since(start)
		if err := os.Remove(dst); err != nil {
			return 0, 0, err
		}
		slog.Info("cp", "took", copied.Round(time.Millisecond), "with fsync", synced.Round(time.Millisecond))
		if cp == 0 || copied < cp {
			cp = copied
		}
		if cpSync == 0 || synced < cpSync {
			cpSync = synced
		}
	}
	return cp, cpSync, nil
}

func fsyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", filepath.Base(path), err)
	}
	return nil
}

// measureTransfer times fn, which moves size bytes, while sampling the
// daemon's resident memory every rssEvery, after settling the machine.
func measureTransfer(d *daemon, size int64, fn func() error) (transfer, error) {
	if err := settle(d.env.dir, size); err != nil {
		return transfer{}, err
	}
	t := transfer{base: rssOf(d.pid()), peak: rss{-1, -1}}
	cpu := procCPU(d.pid())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(rssEvery)
		defer tick.Stop()
		for {
			cur := rssOf(d.pid())
			t.peak.total, t.peak.anon = max(t.peak.total, cur.total), max(t.peak.anon, cur.anon)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	start := time.Now()
	err := fn()
	took := time.Since(start)
	close(done)
	wg.Wait()
	t.daemonCPU = -1
	if after := procCPU(d.pid()); cpu >= 0 && after >= 0 {
		t.daemonCPU = after - cpu
	}
	if err == nil {
		t.took = took
	}
	return t, err
}

// fileClient talks to the daemon's file endpoints. Its client has no overall
// timeout (ctx bounds the run) and does not follow redirects.
type fileClient struct {
	base string
	key  string
	http *http.Client
}

// upload POSTs the file at path as the raw body and returns the new file's
// ID once the daemon has answered 201 with the right size.
func (c *fileClient) upload(ctx context.Context, path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	// The transport closes f once it has sent it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/files", f)
	if err != nil {
		f.Close()
		return "", err
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("X-Filename", "big.bin")
	res, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("POST /v1/files: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("POST /v1/files: %w", err)
	}
	if res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /v1/files: %s: %.500s", res.Status, body)
	}
	var got struct {
		ID   string `json:"id"`
		URL  string `json:"url"`
		Size int64  `json:"size"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return "", fmt.Errorf("POST /v1/files: %w: %.500s", err, body)
	}
	if got.ID == "" || got.URL == "" || got.Size != size {
		return "", fmt.Errorf("POST /v1/files: want an id, a url and size %d: %.500s", size, body)
	}
	return got.ID, nil
}

// signedURL asks GET /v1/files for the file's signed download URL.
func (c *fileClient) signedURL(ctx context.Context, id string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/files?id="+id, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET /v1/files: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	loc, err := res.Location()
	if res.StatusCode != http.StatusFound || err != nil {
		return "", fmt.Errorf("GET /v1/files: want 302 with a Location, got %s: %.500s", res.Status, body)
	}
	return loc.String(), nil
}

// fetch GETs a signed URL, without the key, into w and checks that size
// bytes came.
func (c *fileClient) fetch(ctx context.Context, location string, size int64, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return 0, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET the signed URL: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return 0, fmt.Errorf("GET the signed URL: %s: %.500s", res.Status, body)
	}
	// Hiding the file's ReadFrom makes CopyBuffer use our 1 MiB buffer:
	// *os.File.ReadFrom would fall back to 32 KiB writes for a response
	// body, and on this VM each system call is dear.
	n, err := io.CopyBuffer(struct{ io.Writer }{w}, res.Body, make([]byte, copyBuffer))
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes, want %d", n, size)
	}
	if err != nil {
		return n, fmt.Errorf("GET the signed URL: %w", err)
	}
	return n, nil
}

// download streams a signed URL into dst and fsyncs dst. It returns how
// long the fsync took.
func (c *fileClient) download(ctx context.Context, location, dst string, size int64) (fsync time.Duration, err error) {
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := c.fetch(ctx, location, size, f); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("fsync the download: %w", err)
	}
	return time.Since(start), f.Close()
}

// hashFile returns the sha256 of the file at path.
func hashFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, copyBuffer)); err != nil {
		return nil, fmt.Errorf("hash %s: %w", filepath.Base(path), err)
	}
	return h.Sum(nil), nil
}

// checkRange GETs up to rangeBytes from the middle of the file through its
// signed URL and compares them with the source. It returns what it checked.
func (c *fileClient) checkRange(ctx context.Context, location, src string, size int64) (string, error) {
	first := size / 2
	last := min(first+rangeBytes, size) - 1
	spec := fmt.Sprintf("bytes=%d-%d", first, last)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Range", spec)
	res, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("ranged GET: %w", err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(io.LimitReader(res.Body, rangeBytes+1))
	if err != nil {
		return "", fmt.Errorf("ranged GET: %w", err)
	}
	if res.StatusCode != http.StatusPartialContent {
		return "", fmt.Errorf("Range: %s: want 206, got %s: %.200s", spec, res.Status, got)
	}
	wantCR := fmt.Sprintf("bytes %d-%d/%d", first, last, size)
	if cr := res.Header.Get("Content-Range"); cr != wantCR {
		return "", fmt.Errorf("Range: %s: Content-Range %q, want %q", spec, cr, wantCR)
	}
	want := make([]byte, last-first+1)
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.ReadAt(want, first); err != nil {
		return "", err
	}
	if !bytes.Equal(got, want) {
		return "", fmt.Errorf("Range: %s: 206 with %d bytes that differ from the source's", spec, len(got))
	}
	return fmt.Sprintf("Range: %s: 206, Content-Range %s, %s bytes that match the source", spec, wantCR, thousands(len(got))), nil
}

func (r *filesReport) print(out io.Writer) {
	fmt.Fprintf(out, "\n=== Blueline bench, files: %d CPUs, %s %s/%s ===\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(out, "File: %s (%s bytes) of random bytes, on the disk of the daemon's data folder\n", sizeStr(r.size), thousands(int(r.size)))
	fmt.Fprintf(out, "Daemon RSS after start: %s\n\n", r.rssAfterStart)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "copy\ttook\tMiB/s\ttime vs cp\ttime vs cp+fsync\tdaemon CPU\t")
	row := func(name string, took time.Duration, cpu string) {
		if took <= 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\t\n", name, cpu)
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t\n", name, took.Round(time.Millisecond), mib(r.size)/took.Seconds(),
			times(took, r.cp), times(took, r.cpSync), cpu)
	}
	row(fmt.Sprintf("cp (best of %d)", cpRuns), r.cp, "-")
	row(fmt.Sprintf("cp + fsync (best of %d)", cpRuns), r.cpSync, "-")
	row("upload: POST /v1/files", r.up.took, cores(r.up.daemonCPU, r.up.took))
	row("download: signed URL to file + fsync", r.down.took, cores(r.down.daemonCPU, r.down.took))
	row("(download into memory only)", r.serve, "-")
	tw.Flush()
	fmt.Fprintln(out, "(The upload runs until the 201, which comes after the daemon's fsync. The download runs from")
	fmt.Fprintf(out, " GET /v1/files?id= through the redirect to the bench's fsync of its copy, which took %s of it.\n", r.downSync.Round(time.Millisecond))
	fmt.Fprintln(out, " Into memory only: the same GET with the body discarded, no target. Daemon CPU: cores used over the transfer)")

	fmt.Fprintf(out, "\nDaemon RSS, sampled every %s\n", rssEvery)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "during\tVmRSS before\tpeak\tgrowth\tanon before\tpeak\tgrowth\t")
	for _, p := range []struct {
		name string
		t    transfer
	}{{"upload", r.up}, {"download", r.down}} {
		g := p.t.growth()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.name, sizeStr(p.t.base.total), sizeStr(p.t.peak.total), signedSize(g.total),
			sizeStr(p.t.base.anon), sizeStr(p.t.peak.anon), signedSize(g.anon))
	}
	tw.Flush()
	if r.downMatch != "" {
		fmt.Fprintf(out, "\nDownload: %s\n", r.downMatch)
	}
	if r.rangeCheck != "" {
		fmt.Fprintln(out, r.rangeCheck)
	}

	fmt.Fprintln(out, "\nTargets:")
	for _, p := range []struct {
		name string
		t    transfer
	}{{"upload", r.up}, {"download", r.down}} {
		for _, base := range []struct {
			name string
			took time.Duration
		}{{"cp", r.cp}, {"cp + fsync", r.cpSync}} {
			ok := p.t.took > 0 && base.took > 0 && p.t.took.Seconds() <= targetFileSlowdown*base.took.Seconds()
			fmt.Fprintf(out, "  %s within %gx of %s's time: %s (%s)\n", p.name, targetFileSlowdown, base.name, verdict(ok), times(p.t.took, base.took))
		}
	}
	for _, p := range []struct {
		name string
		t    transfer
	}{{"upload", r.up}, {"download", r.down}} {
		g := p.t.growth()
		ok := p.t.took > 0 && g.total >= 0 && g.anon >= 0 && g.total < targetFileRSSGrowth && g.anon < targetFileRSSGrowth
		fmt.Fprintf(out, "  daemon memory growth < %s during the %s: %s (VmRSS %s, anon %s)\n",
			sizeStr(targetFileRSSGrowth), p.name, verdict(ok), signedSize(g.total), signedSize(g.anon))
	}

	switch {
	case r.shutdownErr != nil:
		fmt.Fprintf(out, "\nShutdown: %v (after %s)\n", r.shutdownErr, r.shutdown.Round(time.Millisecond))
	default:
		fmt.Fprintf(out, "\nShutdown: the daemon exited %s after SIGTERM\n", r.shutdown.Round(time.Millisecond))
	}
	if r.daemonLog != "" {
		fmt.Fprintf(out, "Daemon log (level warn, last lines):\n%s\n", indent(r.daemonLog))
	}
}

// times is how many times base's duration took is, "-" when either is unknown.
func times(took, base time.Duration) string {
	if took <= 0 || base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", took.Seconds()/base.Seconds())
}

// signedSize is a growth in MiB with its sign; -1 means unknown.
func signedSize(b int64) string {
	if b == -1 {
		return "unknown"
	}
	return fmt.Sprintf("%+.1f MiB", float64(b)/(1<<20))
}
