package main

import (
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseOptionsDefaults(t *testing.T) {
	o, err := parseOptions(nil, newSilentFlagSet())
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 10*time.Second || o.warmup != 2*time.Second || o.clients != 64 || o.big != 1_000_000 || o.small != 1000 ||
		o.gets != 2000 || o.seeders != 64 || o.drain != 2*time.Minute || o.workers != 0 || o.keep || o.files != 0 || o.out != os.Stdout {
		t.Errorf("defaults %+v", o)
	}
}

func TestParseOptionsFlags(t *testing.T) {
	o, err := parseOptions([]string{"-duration", "3s", "-warmup", "0s", "-clients", "2", "-big", "10", "-small", "5",
		"-gets", "4", "-seeders", "3", "-drain", "1s", "-workers", "7", "-keep", "-files", "2KiB"}, newSilentFlagSet())
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 3*time.Second || o.warmup != 0 || o.clients != 2 || o.big != 10 || o.small != 5 || o.gets != 4 ||
		o.seeders != 3 || o.drain != time.Second || o.workers != 7 || !o.keep || o.files != 2048 {
		t.Errorf("parsed %+v", o)
	}
	for _, args := range [][]string{
		{"-clients", "0"}, {"-small", "0"}, {"-big", "-1"}, {"-gets", "1"}, {"-seeders", "0"},
		{"-workers", "-1"}, {"-duration", "0s"}, {"-warmup", "-1s"}, {"extra"},
		{"-files", "12 parsecs"}, {"-nope"}, {"-clients", "many"},
	} {
		if _, err := parseOptions(args, newSilentFlagSet()); err == nil {
			t.Errorf("parseOptions(%q): no error", args)
		}
	}
	// The silent flag set does not print its usage on a bad flag.
	fs := newSilentFlagSet()
	if fs.ErrorHandling() != flag.ContinueOnError || fs.Output() != io.Discard {
		t.Error("newSilentFlagSet would print or exit")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"": 0, "1": 1, "512B": 512, "1kB": 1000, "2 KiB": 2048, "100MB": 100e6, "512MiB": 512 << 20,
		"1GiB": 1 << 30, "1gb": 1e9, "3TB": 3e12, "1TiB": 1 << 40,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"GiB", "0", "-1MiB", "1.5GiB", "12 parsecs", "9999999999TiB", "99999999999999999999"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestSmallFormatters(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234", -12: "-12"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	checks := []struct{ got, want string }{
		{ms(1500 * time.Microsecond), "1.50ms"},
		{cores(-1, time.Second), "-"},
		{cores(3, 2*time.Second), "1.50"},
		{sizeStr(-1), "unknown"},
		{sizeStr(3 << 20), "3.0 MiB"},
		{verdict(true), "PASS"},
		{verdict(false), "FAIL"},
		{indent("a\nb"), "  a\n  b"},
		{times(0, time.Second), "-"},
		{times(time.Second, 0), "-"},
		{times(3*time.Second, 2*time.Second), "1.50x"},
		{signedSize(-1), "unknown"},
		{signedSize(2 << 20), "+2.0 MiB"},
		{signedSize(-3 << 20), "-3.0 MiB"},
		{depthRange(pageStats{minDepth: -1}), "-"},
		{depthRange(pageStats{minDepth: 1000, maxDepth: 25000}), "1,000-25,000"},
		{writeRate(loadResult{written: -1}), "-"},
		{writeRate(loadResult{written: 2 << 20, window: 2 * time.Second}), "1.0 MiB/s, -"},
		{writeRate(loadResult{written: 4 << 20, window: time.Second, ok: 1024}), "4.0 MiB/s, 4.0 KiB/req"},
		{rss{-1, -1}.String(), "unknown"},
		{rss{1 << 20, -1}.String(), "1.0 MiB"},
		{rss{3 << 20, 1 << 20}.String(), "3.0 MiB (anon 1.0 MiB, file-backed 2.0 MiB)"},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: %q, want %q", i, c.got, c.want)
		}
	}
	if eta(100, 0) != 0 || eta(100, 10) != 10*time.Second {
		t.Errorf("eta: %s, %s", eta(100, 0), eta(100, 10))
	}
	if mib(-5) != -1 || mib(1<<21) != 2 {
		t.Errorf("mib: %v %v", mib(-5), mib(1<<21))
	}
	if msOf(2500*time.Microsecond) != 2.5 {
		t.Errorf("msOf = %v", msOf(2500*time.Microsecond))
	}
}

func TestPct(t *testing.T) {
	if pct(nil, 0.5) != 0 {
		t.Error("pct of nothing")
	}
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0: time.Millisecond, 0.5: 50 * time.Millisecond, 0.9: 90 * time.Millisecond,
		0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := pct(d, q); got != want {
			t.Errorf("pct(%v) = %s, want %s", q, got, want)
		}
	}
}

func TestTransferFigures(t *testing.T) {
	tr := transfer{took: 2 * time.Second, base: rss{10 << 20, 4 << 20}, peak: rss{30 << 20, 5 << 20}}
	if got := tr.rate(64 << 20); got != 32 {
		t.Errorf("rate = %v MiB/s, want 32", got)
	}
	if g := tr.growth(); g.total != 20<<20 || g.anon != 1<<20 {
		t.Errorf("growth = %+v", g)
	}
	if g := (transfer{base: rss{-1, -1}, peak: rss{5, 5}}).growth(); g.total != -1 || g.anon != -1 {
		t.Errorf("growth of unknowns = %+v", g)
	}
	if math.IsNaN(tr.rate(0)) {
		t.Error("rate of nothing is NaN")
	}
}

// fullReport is a message run that reached every stage.
func fullReport() *report {
	o := options{duration: 2 * time.Second, warmup: 500 * time.Millisecond, clients: 4, small: 1000, big: 20000, gets: 4}
	lats := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}
	return &report{
		opts:          o,
		workers:       2,
		seed:          seedStats{messages: 21000, took: 3 * time.Second, seeders: 8},
		dbAfterSeed:   5 << 20,
		dbAfterLoad:   6 << 20,
		rssAfterStart: rss{40 << 20, 10 << 20},
		rssAfterLoad:  rss{-1, -1},
		pages: []pageStats{
			{name: "1,000 msgs", size: 1000, first: lats[:2], walk: lats[2:], minDepth: 500, maxDepth: 550, walkedAll: 1000, restarts: 1},
			{name: "20,000 msgs", size: 20000, first: lats, walk: lats, minDepth: -1, failed: 2, firstErr: "HTTP 500: boom",
				anomalies: []string{"first page has 3 messages, want 50"}},
		},
		loads: []loadResult{
			{name: "hello-world handler", clients: 4, window: 2 * time.Second, ok: 40000, lats: lats, daemonCPU: -1, benchCPU: 1.5,
				written: -1, machineBusy: -1, machineSteal: -1},
			{name: "blueline daemon", clients: 4, window: 2 * time.Second, ok: 10000, failed: 3, firstErr: "HTTP 429: slow",
				lats: lats, daemonCPU: 2, benchCPU: 1, written: 10 << 20, machineBusy: 3.5, machineSteal: 0.1},
		},
		drain:     drainResult{items: 10000, took: 1500 * time.Millisecond, done: true, lastStatus: "sent", delivered: 10000},
		fsync:     syncProbe{n: 200, p50: time.Millisecond, p99: 3 * time.Millisecond, max: 4 * time.Millisecond},
		shutdown:  120 * time.Millisecond,
		daemonLog: "level=WARN msg=one\nlevel=WARN msg=two",
	}
}

func TestReportPrint(t *testing.T) {
	var b strings.Builder
	fullReport().print(&b)
	out := b.String()
	for _, want := range []string{
		"=== Blueline bench:",
		"Seeded 21,000 messages (1,000 + 20,000) in 3s: 7,000 msg/s with 8 goroutines",
		"DB file: 5.0 MiB after seeding, 6.0 MiB at the end",
		"Daemon RSS after start:         40.0 MiB (anon 10.0 MiB, file-backed 30.0 MiB)",
		"Daemon RSS after the POST load: unknown",
		"POST /v1/messages: 4 clients, 2s measured after 500ms warm-up (201s only); daemon delivery workers: 2",
		"20,000", "5,000", // the two rates
		"5.0 MiB/s, 1.0 KiB/req",
		"Disk, just before the daemon's load: 4 KiB write + fsync p50 1.00ms, p99 3.00ms, max 4.00ms (200 rounds)",
		"Machine during the blueline daemon window: 1.75 of",
		"first failure on blueline daemon: HTTP 429: slow",
		"Outbox backlog: all 10,000 accepted items sent 1.5s after the load ended (last item sent)",
		"Delivery throughput: 2,500 items/s",
		"GET /v1/messages limit=50: 4 sequential requests per chat",
		"500-550",
		"1,000 msgs: a walk from the top listed 1,000 messages, then restarted (1 restarts)",
		"20,000 msgs: 2 failed requests; first: HTTP 500: boom",
		"20,000 msgs: WRONG LISTING: first page has 3 messages, want 50",
		"POST >= 10,000 req/s: FAIL (5,000 req/s)",
		"GET median < 2.00ms on 1,000 msgs: FAIL (2.00ms)",
		"GET median < 2.00ms on 20,000 msgs: FAIL",
		"Shutdown: the daemon exited 120ms after SIGTERM",
		"Daemon log (level warn, last lines):\n  level=WARN msg=one\n  level=WARN msg=two",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hello-world handler window") {
		t.Error("machine figures printed for a load without them")
	}
}

func TestReportPrintVariants(t *testing.T) {
	r := fullReport()
	r.fsync = syncProbe{err: errors.New("no disk")}
	r.drain = drainResult{items: 10, err: "GET /v1/outbox: HTTP 500"}
	r.shutdownErr = errors.New("killed")
	r.loads[1].ok = 30000
	r.pages = r.pages[:1]
	r.pages[0].first = []time.Duration{time.Millisecond}
	r.pages[0].walk = []time.Duration{time.Millisecond}
	var b strings.Builder
	r.print(&b)
	out := b.String()
	for _, want := range []string{
		"Disk: no disk",
		"Outbox backlog: could not follow it: GET /v1/outbox: HTTP 500",
		"POST >= 10,000 req/s: PASS (15,000 req/s)",
		"GET median < 2.00ms on 1,000 msgs: PASS (1.00ms)",
		"Shutdown: killed (after 120ms)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Delivery throughput") {
		t.Error("a throughput printed for a drain that could not be followed")
	}

	r.drain = drainResult{items: 10, took: time.Second, lastStatus: "pending", delivered: 4}
	r.shutdownErr, r.shutdown = nil, 4*time.Second
	b.Reset()
	r.print(&b)
	for _, want := range []string{
		"Outbox backlog: NOT drained 1s after the load ended: about 4 of 10 items sent (last item pending)",
		"Shutdown: SLOW: the daemon took 4s to exit after SIGTERM",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}

	// A run that failed before measuring anything still prints.
	b.Reset()
	(&report{rssAfterStart: rss{-1, -1}, rssAfterLoad: rss{-1, -1}, dbAfterSeed: -1, dbAfterLoad: -1}).print(&b)
	if out := b.String(); !strings.Contains(out, "DB file: unknown after seeding, unknown at the end") || strings.Contains(out, "Seeded") ||
		strings.Contains(out, "POST /v1/messages") {
		t.Errorf("empty report:\n%s", out)
	}
}

func TestMessageResults(t *testing.T) {
	rs := messageResults(fullReport())
	if len(rs) != 5 {
		t.Fatalf("%d results, want 2 loads, 2 chats and the drain: %+v", len(rs), rs)
	}
	want := []string{"POST hello-world handler", "POST blueline daemon", "GET 1,000 msgs", "GET 20,000 msgs", "outbox drain"}
	for i, r := range rs {
		if r.Name != want[i] {
			t.Errorf("result %d: %q, want %q", i, r.Name, want[i])
		}
	}
	if got := figures(rs[1].Metrics, registry[3].Metrics); got != "5,000 req/s, 2 ms/p50, 4 ms/p99, 3 non-201" {
		t.Errorf("daemon load figures %q", got)
	}
	if rs[2].Err != "" || rs[3].Err == "" {
		t.Errorf("errors: %q, %q; want only the failing chat's", rs[2].Err, rs[3].Err)
	}
	if rs[4].Metrics[0].Value != 2500 || rs[4].Err != "" {
		t.Errorf("drain %+v", rs[4])
	}
	r := fullReport()
	r.drain.done = false
	if rs := messageResults(r); rs[4].Err == "" {
		t.Error("an undrained outbox is not an error")
	}
	r.drain.err = "lost"
	if rs := messageResults(r); len(rs) != 4 {
		t.Errorf("a drain that could not be followed has a result: %+v", rs)
	}
}

func fullFilesReport() *filesReport {
	return &filesReport{
		size:          64 << 20,
		cp:            500 * time.Millisecond,
		cpSync:        time.Second,
		rssAfterStart: rss{40 << 20, 10 << 20},
		up:            transfer{took: 1500 * time.Millisecond, base: rss{40 << 20, 10 << 20}, peak: rss{50 << 20, 12 << 20}, daemonCPU: 0.75},
		down:          transfer{took: 3 * time.Second, base: rss{50 << 20, 12 << 20}, peak: rss{100 << 20, 60 << 20}, daemonCPU: -1},
		downSync:      200 * time.Millisecond,
		serve:         400 * time.Millisecond,
		downMatch:     "sha256 matches the source",
		rangeCheck:    "Range: bytes=1-2: 206",
		shutdown:      50 * time.Millisecond,
		daemonLog:     "level=WARN msg=x",
	}
}

func TestFilesReportPrint(t *testing.T) {
	var b strings.Builder
	fullFilesReport().print(&b)
	out := b.String()
	for _, want := range []string{
		"=== Blueline bench, files:",
		"File: 64.0 MiB (67,108,864 bytes) of random bytes",
		"Daemon RSS after start: 40.0 MiB (anon 10.0 MiB, file-backed 30.0 MiB)",
		"upload: POST /v1/files", "3.00x", "1.50x", "0.50",
		"fsync of its copy, which took 200ms of it.",
		"Daemon RSS, sampled every 20ms",
		"+10.0 MiB", "+2.0 MiB", "+48.0 MiB",
		"Download: sha256 matches the source",
		"Range: bytes=1-2: 206",
		"upload within 2x of cp's time: FAIL (3.00x)",
		"upload within 2x of cp + fsync's time: PASS (1.50x)",
		"download within 2x of cp + fsync's time: FAIL (3.00x)",
		"daemon memory growth < 32.0 MiB during the upload: PASS (VmRSS +10.0 MiB, anon +2.0 MiB)",
		"daemon memory growth < 32.0 MiB during the download: FAIL (VmRSS +50.0 MiB, anon +48.0 MiB)",
		"Shutdown: the daemon exited 50ms after SIGTERM",
		"Daemon log (level warn, last lines):\n  level=WARN msg=x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}

	// A run that stopped early: dashes and unknowns, not zeros.
	r := &filesReport{size: 1 << 20, rssAfterStart: rss{-1, -1}, shutdownErr: errors.New("never started")}
	for _, tr := range []*transfer{&r.up, &r.down} {
		tr.base, tr.peak, tr.daemonCPU = rss{-1, -1}, rss{-1, -1}, -1
	}
	b.Reset()
	r.print(&b)
	out = b.String()
	for _, want := range []string{"Daemon RSS after start: unknown", "upload within 2x of cp's time: FAIL (-)", "VmRSS unknown", "Shutdown: never started"} {
		if !strings.Contains(out, want) {
			t.Errorf("the early report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Download:") {
		t.Error("a download verdict without a download")
	}
}

func TestFilesResults(t *testing.T) {
	rs := filesResults(fullFilesReport())
	if len(rs) != 3 || rs[0].Name != "cp + fsync" || rs[1].Name != "upload" || rs[2].Name != "download" {
		t.Fatalf("results %+v", rs)
	}
	if got := figures(rs[1].Metrics, registry[4].Metrics); got != "1.5 s, 42.7 MiB/s, 1.5 x-cp+fsync, 10 rss-MiB, 2 anon-MiB" {
		t.Errorf("upload figures %q", got)
	}
	if got := figures(rs[0].Metrics, registry[4].Metrics); got != "1 s, 64 MiB/s" {
		t.Errorf("cp figures %q", got)
	}
	// Unmeasured parts are left out.
	r := fullFilesReport()
	r.cpSync, r.down.took = 0, 0
	r.up.base.anon = -1
	rs = filesResults(r)
	if len(rs) != 1 || rs[0].Name != "upload" {
		t.Fatalf("results %+v", rs)
	}
	if got := figures(rs[0].Metrics, registry[4].Metrics); got != "1.5 s, 42.7 MiB/s, 10 rss-MiB" {
		t.Errorf("partial upload figures %q", got)
	}
}

func TestProcFigures(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	if r := rssOf(pid); r.total <= 0 || r.anon <= 0 || r.anon > r.total {
		t.Errorf("rssOf(self) = %+v", r)
	}
	if r := rssOf(-5); r.total != -1 || r.anon != -1 {
		t.Errorf("rssOf(no such process) = %+v", r)
	}
	if c := procCPU(0); c < 0 {
		t.Errorf("procCPU(self) = %v", c)
	}
	if c := procCPU(pid); c < 0 {
		t.Errorf("procCPU(pid) = %v", c)
	}
	if procCPU(-1) != -1 || procCPU(1<<30) != -1 {
		t.Error("procCPU of no process is not -1")
	}
	busy, steal := machineCPU()
	if busy <= 0 || steal < 0 {
		t.Errorf("machineCPU = %v, %v", busy, steal)
	}
	if procWriteBytes(-1) != -1 || procWriteBytes(1<<30) != -1 {
		t.Error("procWriteBytes of no process is not -1")
	}
	if _, err := os.Stat("/proc/self/io"); err == nil {
		if w := procWriteBytes(pid); w < 0 {
			t.Errorf("procWriteBytes(self) = %d", w)
		}
	}
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, make([]byte, 1234), 0o600)
	if fileSize(p) != 1234 || fileSize(p+".missing") != -1 {
		t.Errorf("fileSize: %d %d", fileSize(p), fileSize(p+".missing"))
	}
}

func TestProbeSync(t *testing.T) {
	p := probeSync(t.TempDir(), 5)
	if p.err != nil || p.n != 5 || p.p50 <= 0 || p.p50 > p.p99 || p.p99 > p.max {
		t.Errorf("probeSync = %+v", p)
	}
	if p := probeSync(filepath.Join(t.TempDir(), "missing"), 5); p.err == nil {
		t.Error("probeSync in a missing folder: no error")
	}
}
