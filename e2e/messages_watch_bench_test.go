package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/bridge/messages/typedstream"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/testkit"
)

// The Messages watcher, measured on the real daemon over a real chat.db:
//
//	go test -run '^$' -bench 'BenchmarkMessages(WatchLatency|FirstStart|IdleCPU)' -benchtime 1x -timeout 60m ./e2e
//
// BenchmarkMessagesWatchLatency times a row's way from its commit in
// chat.db to its webhook, for a new message and for an edit.
// BenchmarkMessagesFirstStart imports a chat.db of 1,000,000 messages as
// history, then starts again over it with 10 new rows.
// BenchmarkMessagesIdleCPU measures the CPU the daemon uses watching that
// database while nothing happens.
//
// Environment, for quick runs:
//
//	BLUELINE_BENCH_ROWS=100000   messages in the big chat.db (1,000,000)
//	BLUELINE_BENCH_IDLE=10s      idle window of BenchmarkMessagesIdleCPU (60s)
//	BLUELINE_BENCH_SAMPLES=50    rows of each kind in WatchLatency (200)
//	BLUELINE_BENCH_KEEP_DB=PATH  FirstStart copies its db.bolt there, to inspect
//	BLUELINE_BENCH_SHAPE=dm2000  the big chat.db as issue 28 measured it (writeDMChatDB)
//
// The big chat.db takes a while to build: it is kept in the system's
// temporary folder (blueline-bench/), under a name that changes with the
// schema, the generator, the row count and the day (its dates are relative
// to now), and copied from there for each run.

func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func benchEnvDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// hookClock is an HTTPS webhook receiver that notes when each delivery
// arrived, by event and message GUID.
type hookClock struct {
	srv *httptest.Server
	mu  sync.Mutex
	at  map[string]time.Time // event ‖ " " ‖ guid
	n   int
}

func newHookClock(b *testing.B) *hookClock {
	hc := &hookClock{at: map[string]time.Time{}}
	hc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var ev struct {
			Event string `json:"event"`
			Data  struct {
				GUID string `json:"guid"`
			} `json:"data"`
		}
		err := json.NewDecoder(r.Body).Decode(&ev)
		hc.mu.Lock()
		hc.n++
		if err == nil {
			key := ev.Event + " " + ev.Data.GUID
			if _, seen := hc.at[key]; !seen {
				hc.at[key] = now
			}
		}
		hc.mu.Unlock()
	}))
	b.Cleanup(hc.srv.Close)
	return hc
}

// arrived is when the first delivery of event for guid arrived.
func (hc *hookClock) arrived(event, guid string) (time.Time, bool) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	t, ok := hc.at[event+" "+guid]
	return t, ok
}

func (hc *hookClock) count() int {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return hc.n
}

// webhookTOML lets a daemon deliver to hc.
func (hc *hookClock) webhookTOML(b *testing.B) string {
	ca := filepath.Join(b.TempDir(), "ca.pem")
	writeFile(b, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hc.srv.Certificate().Raw})))
	return "[limits]\nrequests_per_hour = 0\n[webhooks]\nallow_private_networks = true\nca_file = " + strconv.Quote(ca) + "\n"
}

// macLineTOML is the [[lines]] table of a Messages line reading chatDB,
// with the default watch and poll.
func macLineTOML(b *testing.B, chatDB string) string {
	return fmt.Sprintf("\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nosascript = \"/bin/false\"\nhelper_port = %d\n",
		macLine, chatDB, freeTCPPort(b))
}

// loggedDaemon is a test daemon whose log the benchmark reads.
type loggedDaemon struct {
	*testDaemon
	b   *testing.B
	log *testkit.LogBuffer
}

// newLoggedDaemon writes a test daemon's configuration without starting it.
func newLoggedDaemon(b *testing.B, extra string) *loggedDaemon {
	dir := b.TempDir()
	ld := &loggedDaemon{testDaemon: &testDaemon{t: b, cfgPath: filepath.Join(dir, "blueline.toml"), dataDir: filepath.Join(dir, "data")},
		b: b, log: &testkit.LogBuffer{}}
	writeFile(b, ld.cfgPath, testConfig(ld.dataDir, extra))
	b.Cleanup(ld.stop)
	return ld
}

// start starts the daemon, logging at info level into ld.log (and to
// stderr with -v).
func (ld *loggedDaemon) start() {
	ld.t.Helper()
	cfg, err := config.Load(ld.cfgPath)
	if err != nil {
		ld.t.Fatal(err)
	}
	var w io.Writer = ld.log
	if testing.Verbose() {
		w = io.MultiWriter(ld.log, os.Stderr)
	}
	ld.d, err = daemon.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(w, nil)))
	if err != nil {
		ld.t.Fatal(err)
	}
	ld.base = "http://" + ld.d.Addr().String()
}

// waitLog waits for the n-th log line (from 1) containing msg and returns it.
func (ld *loggedDaemon) waitLog(within time.Duration, msg string, n int) string {
	ld.t.Helper()
	var line string
	waitCount(ld.b, within, func() bool {
		found := 0
		for l := range strings.Lines(ld.log.String()) {
			if strings.Contains(l, "msg=\""+msg+"\"") || strings.Contains(l, "msg="+msg+" ") {
				if found++; found == n {
					line = strings.TrimSpace(l)
					return true
				}
			}
		}
		return false
	})
	return line
}

// waitSearchIndex waits until the full-text index has taken in a first
// start's import, by a scan that waited for the import, or from the feed
// when the scan came first (logged once caught up), and returns that log
// line. It is built after the import, in 20 s or so for a million messages.
func (ld *loggedDaemon) waitSearchIndex() string {
	var built string
	waitCount(ld.b, 10*time.Minute, func() bool {
		for _, l := range append(ld.logLines("search index built"), ld.logLines("search index caught up")...) {
			if !strings.Contains(l, " messages=0 ") && !strings.Contains(l, " messages=10 ") {
				built = l
				return true
			}
		}
		return false
	})
	return built
}

// logLines returns the log lines containing msg.
func (ld *loggedDaemon) logLines(msg string) []string {
	var out []string
	for l := range strings.Lines(ld.log.String()) {
		if strings.Contains(l, msg) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// cursor is the Messages line's saved chat.db position.
func (ld *loggedDaemon) cursor() (int64, bool) {
	ld.t.Helper()
	pos, saved, err := ld.d.BridgeCursor(context.Background(), macLine)
	if err != nil {
		ld.t.Fatal(err)
	}
	return pos, saved
}

// BenchmarkMessagesWatchLatency times how long a row takes from its commit
// in chat.db to its webhook's arrival at a local receiver (the receiver's
// clock), with the default settings (folder watched, 1 s poll): a new
// inbound message (message.received) and an edit of one
// (message.edited). Each row waits for its webhook before the next, after
// a pause that varies, so that rows do not come in step with the poll.
func BenchmarkMessagesWatchLatency(b *testing.B) {
	samples := benchEnvInt(b, "BLUELINE_BENCH_SAMPLES", 200)
	const contact = "+15551230001"
	hc := newHookClock(b)
	home := b.TempDir()
	b.Setenv("HOME", home)
	dir := filepath.Join(home, "Library", "Messages")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	fx := chatdbtest.New(b, dir)
	chat := fx.DirectChat("imessage", contact)
	td := startTestDaemon(b, macLineTOML(b, fx.Path())+hc.webhookTOML(b))
	key := td.key()
	r := td.call("POST", "/v1/webhooks", key, map[string]any{"from": macLine, "url": hc.srv.URL + "/h",
		"events": []string{"message.received", "message.edited"}})
	if r.Status != 201 {
		b.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Raw)
	}
	wait := func(event, guid string, since time.Time) time.Duration {
		var at time.Time
		waitCount(b, 30*time.Second, func() bool {
			var ok bool
			at, ok = hc.arrived(event, guid)
			return ok
		})
		return at.Sub(since)
	}
	// One row first, unmeasured: the first scan and the first HTTPS
	// connection.
	_, guid := fx.Insert(chatdbtest.Msg{Chat: chat, From: contact, Text: "warm-up"})
	wait("message.received", guid, time.Now())

	var created, edited []time.Duration
	rng := rand.New(rand.NewPCG(1, 1))
	pause := func() { time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond) }
	b.ResetTimer()
	for range b.N {
		for i := range samples {
			pause()
			_, guid := fx.Insert(chatdbtest.Msg{Chat: chat, From: contact, Text: "ping " + strconv.Itoa(i)})
			committed := time.Now()
			created = append(created, wait("message.received", guid, committed))
			pause()
			fx.Edit(guid, "ping "+strconv.Itoa(i)+", edited", time.Now())
			committed = time.Now()
			edited = append(edited, wait("message.edited", guid, committed))
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(median(created)), "new-p50-ms")
	b.ReportMetric(ms(pctile(created, 0.99)), "new-p99-ms")
	b.ReportMetric(ms(slices.Max(created)), "new-max-ms")
	b.ReportMetric(ms(median(edited)), "edit-p50-ms")
	b.ReportMetric(ms(pctile(edited, 0.99)), "edit-p99-ms")
	b.ReportMetric(ms(slices.Max(edited)), "edit-max-ms")
	b.ReportMetric(0, "ns/op")
}

// bigChatDBVersion names what writeBigChatDB writes: change it whenever
// its rows change, so that no copy cached before is used.
const bigChatDBVersion = "1"

// bigChatDB puts in dir a chat.db of n message rows (see writeBigChatDB),
// copied from the cache in the system's temporary folder, which it first
// fills when needed, and returns its path.
func bigChatDB(b *testing.B, dir string, n int) string {
	b.Helper()
	sum := sha256.Sum256([]byte(chatdbtest.Schema + "\x00" + bigChatDBVersion))
	day := time.Now().Format("20060102")
	cacheDir := filepath.Join(os.TempDir(), "blueline-bench")
	shape := os.Getenv("BLUELINE_BENCH_SHAPE")
	write := chatdbtest.WriteLongUsed
	switch shape {
	case "":
	case "dm2000":
		write = writeDMChatDB
	default:
		b.Fatalf("BLUELINE_BENCH_SHAPE=%q: want dm2000, or nothing", shape)
	}
	prefix := fmt.Sprintf("chatdb-%s%d-", shape, n)
	cached := filepath.Join(cacheDir, prefix+hex.EncodeToString(sum[:6])+"-"+day+".db")
	path := filepath.Join(dir, "chat.db")
	if err := copyFile(cached, path); err == nil {
		b.Logf("big chat.db: %d rows, from the cache %s", n, cached)
		return path
	}
	start := time.Now()
	build := b.TempDir()
	fx := chatdbtest.New(b, build)
	write(fx, n)
	fx.Checkpoint() // the whole database in the main file: it can be copied alone
	b.Logf("big chat.db: %d rows built in %s", n, time.Since(start).Round(time.Millisecond))
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		b.Fatal(err)
	}
	// Yesterday's copies (and other versions of this size) are stale.
	old, _ := filepath.Glob(filepath.Join(cacheDir, prefix+"*.db"))
	for _, f := range old {
		os.Remove(f)
	}
	tmp := cached + ".tmp"
	if err := copyFile(fx.Path(), tmp); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, cached); err != nil {
		b.Fatal(err)
	}
	if err := copyFile(cached, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// dirSize is the bytes the files under dir take on the disk.
func dirSize(b *testing.B, dir string) int64 { return dirSizeExcept(b, dir, "") }

// dirSizeExcept is dirSize without the files whose names begin with skip
// (a SQLite file with its -wal and -shm).
func dirSizeExcept(b *testing.B, dir, skip string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if skip != "" && strings.HasPrefix(d.Name(), skip) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(to)
		return err
	}
	return out.Close()
}

// writeDMChatDB fills fx with n message rows in the shape issue 28 was
// measured on: 2,000 one-to-one iMessage chats used evenly, short plain
// texts (1 to 5 words, in the text column), a third of them ours, dates
// over two years in order.
func writeDMChatDB(fx *chatdbtest.Fixture, n int) {
	rng := rand.New(rand.NewPCG(20261126, uint64(n)))
	words := strings.Fields("ok yes no maybe see you soon tomorrow tonight call me later lunch dinner coffee thanks")
	var chats []chatdbtest.ChatRef
	var addrs []string
	fx.Batch(func() {
		for i := range 2000 {
			addr := fmt.Sprintf("+1555%07d", 3000000+i*7)
			addrs = append(addrs, addr)
			chats = append(chats, fx.DirectChat("imessage", addr))
		}
	})
	first := time.Now().Add(-730 * 24 * time.Hour)
	step := 730 * 24 * time.Hour / time.Duration(n+1)
	const batch = 20000
	for start := 0; start < n; start += batch {
		fx.Batch(func() {
			for i := start; i < min(start+batch, n); i++ {
				c := rng.IntN(len(chats))
				t := make([]string, 1+rng.IntN(5))
				for j := range t {
					t[j] = words[rng.IntN(len(words))]
				}
				m := chatdbtest.Msg{Chat: chats[c], Date: first.Add(time.Duration(i) * step), Text: strings.Join(t, " ")}
				if rng.IntN(3) == 0 {
					m.IsSent = true
				} else {
					m.From = addrs[c]
				}
				fx.Insert(m)
			}
		})
	}
}

// historyMessages counts the rows of the big chat.db that the first start
// imports: messages, not tapbacks, ours only when sent.
func historyMessages(b testing.TB, path string) int {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM message WHERE associated_message_type = 0 AND item_type = 0
		AND (is_from_me = 0 OR is_sent = 1)`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// rawWriter writes rows into an existing chat.db, as Messages would, for a
// database chatdbtest did not create in this run (the cached copy).
type rawWriter struct {
	b  *testing.B
	db *sql.DB
}

func newRawWriter(b *testing.B, path string) *rawWriter {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return &rawWriter{b: b, db: db}
}

// insertInbound adds an inbound text from the member of the database's
// first one-to-one chat, and returns its GUID and the member's address.
func (w *rawWriter) insertInbound(text string) (guid, from string) {
	var chatID, handleID int64
	if err := w.db.QueryRow(`SELECT c.ROWID, chj.handle_id, c.chat_identifier FROM chat c JOIN chat_handle_join chj ON chj.chat_id = c.ROWID
		WHERE c.style = 45 ORDER BY c.ROWID LIMIT 1`).Scan(&chatID, &handleID, &from); err != nil {
		w.b.Fatal(err)
	}
	guid = strings.ToUpper(fmt.Sprintf("%08x-0000-4000-8000-%012x", rand.Uint32(), rand.Uint64()&0xffffffffffff))
	date := chatdbtest.AppleNanos(time.Now())
	tx, err := w.db.Begin()
	if err != nil {
		w.b.Fatal(err)
	}
	defer tx.Rollback()
	res, err := tx.Exec(`INSERT INTO message (guid, text, attributedBody, handle_id, service, account, date, date_read, date_delivered,
		is_from_me, is_sent, is_delivered, is_finished, part_count) VALUES (?, ?, ?, ?, 'iMessage', 'E:me@example.com', ?, 0, 0, 0, 0, 1, 1, 1)`,
		guid, text, typedstream.Encode(text), handleID, date)
	if err != nil {
		w.b.Fatal(err)
	}
	rowID, _ := res.LastInsertId()
	if _, err := tx.Exec("INSERT INTO chat_message_join (chat_id, message_id, message_date) VALUES (?, ?, ?)", chatID, rowID, date); err != nil {
		w.b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		w.b.Fatal(err)
	}
	return guid, from
}

// memSample is the process's memory at one moment.
type memSample struct {
	heapInuse, heapSys, sys uint64 // runtime.MemStats
	rss, hwm, anon, file    uint64 // /proc/self/status, bytes; 0 where unknown
}

// memNow reads the memory after a GC.
func memNow() memSample {
	runtime.GC()
	runtime.GC() // what sync.Pools held survives one GC
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := memSample{heapInuse: ms.HeapInuse, heapSys: ms.HeapSys, sys: ms.Sys}
	s.rss, s.hwm, s.anon, s.file = procStatus()
	return s
}

// procStatus reads this process's VmRSS, VmHWM, RssAnon and RssFile (Linux
// only).
func procStatus() (rss, hwm, anon, file uint64) { return procStatusIn("/proc/self/status") }

// procStatusOf is procStatus of the process pid.
func procStatusOf(pid int) (rss, hwm, anon, file uint64) {
	return procStatusIn(fmt.Sprintf("/proc/%d/status", pid))
}

func procStatusIn(path string) (rss, hwm, anon, file uint64) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			hwm = kb << 10
		case "RssAnon":
			anon = kb << 10
		case "RssFile":
			file = kb << 10
		}
	}
	return
}

// resetPeakRSS restarts VmHWM from the current RSS (Linux 4.0 and later).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// heapPeak samples the live heap (no stop of the world) until stopped, and
// returns its peak.
func heapPeak() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, out := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-out }
}

// anonPeak samples the process's anonymous resident memory (RssAnon:
// the heap, stacks, the runtime's own; not the mapped files) until
// stopped, and returns its peak; 0 where unknown.
func anonPeak() (stop func() uint64) {
	done, out := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			_, _, anon, _ := procStatus()
			peak = max(peak, anon)
			select {
			case <-done:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-out }
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

func growth(after, before uint64) float64 { return (float64(after) - float64(before)) / (1 << 20) }

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readSyscalls is the process's count of read system calls so far (Linux
// only: /proc/self/io), -1 where unknown.
func readSyscalls() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for l := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(l, "syscr:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// bigMac is a simulated Mac whose chat.db holds the big history: it
// returns the database's path.
func bigMac(b *testing.B) string {
	home := b.TempDir()
	b.Setenv("HOME", home)
	dir := filepath.Join(home, "Library", "Messages")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	return bigChatDB(b, dir, benchEnvInt(b, "BLUELINE_BENCH_ROWS", 1_000_000))
}

// BenchmarkMessagesFirstStart starts the daemon for the first time over a
// chat.db of 1,000,000 messages (see writeBigChatDB): it imports them as
// history, without one webhook event. It reports the time until the import
// is logged as finished, the memory that took (heap: live objects at their
// peak, and in use after a GC; the process's RSS at its peak and after,
// with its anonymous part), then the time a second start over the same
// database, with 10 new rows, takes to report them.
func BenchmarkMessagesFirstStart(b *testing.B) {
	for range b.N {
		b.StopTimer()
		chatDB := bigMac(b)
		want := historyMessages(b, chatDB)
		hc := newHookClock(b)
		ld := newLoggedDaemon(b, macLineTOML(b, chatDB)+hc.webhookTOML(b))

		before := memNow()
		resetPeakRSS()
		peak, anonPeak := heapPeak(), anonPeak()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime(b)
		ld.start()
		// A webhook registered as the line starts: the import must send
		// it nothing.
		key := ld.key()
		if r := ld.call("POST", "/v1/webhooks", key, map[string]any{"from": macLine, "url": hc.srv.URL + "/h",
			"events": []string{"message.received", "message.sent"}}); r.Status != 201 {
			b.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Raw)
		}
		done := ld.waitLog(30*time.Minute, "imported the Messages history", 1)
		took, cpu := time.Since(start), cpuTime(b)-cpu0
		b.StopTimer()
		heapTop, anonTop := peak(), anonPeak()
		_, hwm, _, _ := procStatus()
		after := memNow()
		// (A benchmark's log is cut after 10 lines.)
		b.Logf("%s", done)
		if progress := ld.logLines("importing the Messages history"); len(progress) > 0 {
			b.Logf("%d progress lines, the last: %s", len(progress), progress[len(progress)-1])
		}
		if !strings.Contains(done, fmt.Sprintf("messages=%d ", want)) {
			b.Errorf("imported %q, want %d messages", done, want)
		}
		b.ReportMetric(took.Seconds(), "import-s")
		// CPU is steadier than time on a shared machine.
		b.ReportMetric(cpu.Seconds(), "import-cpu-s")
		b.ReportMetric(float64(want)/took.Seconds(), "msgs/s")
		b.ReportMetric(growth(heapTop, before.heapInuse), "heap-peak-MiB")
		b.ReportMetric(growth(after.heapInuse, before.heapInuse), "heap-after-MiB")
		b.ReportMetric(growth(after.sys, before.sys), "go-sys-MiB")
		if before.rss != 0 {
			b.ReportMetric(growth(hwm, before.rss), "rss-peak-MiB")
			b.ReportMetric(growth(after.rss, before.rss), "rss-after-MiB")
			b.ReportMetric(growth(after.anon, before.anon), "rss-anon-after-MiB")
			b.ReportMetric(mib(anonTop), "rss-anon-peak-MiB")
		}
		b.Logf("memory before: heap %.1f MiB, Go sys %.1f MiB, RSS %.1f MiB (anon %.1f, file %.1f); "+
			"after: heap %.1f MiB (peak %.1f), Go sys %.1f MiB, RSS %.1f MiB (anon %.1f, file %.1f, peak %.1f)",
			mib(before.heapInuse), mib(before.sys), mib(before.rss), mib(before.anon), mib(before.file),
			mib(after.heapInuse), mib(heapTop), mib(after.sys), mib(after.rss), mib(after.anon), mib(after.file), mib(hwm))

		// The cursor is saved at the database's end; a few polls pass.
		var cursor int64
		waitCount(b, 10*time.Second, func() bool {
			var saved bool
			cursor, saved = ld.cursor()
			return saved
		})
		time.Sleep(3 * time.Second)
		if hc.count() != 0 {
			b.Errorf("the import sent %d webhook events", hc.count())
		}

		// Second start: 10 new rows while the daemon was stopped.
		ld.stop()
		w := newRawWriter(b, chatDB)
		var guids []string
		var from string
		for i := range 10 {
			var g string
			g, from = w.insertInbound("after the restart " + strconv.Itoa(i))
			guids = append(guids, g)
		}
		b.StartTimer()
		start = time.Now()
		ld.start()
		opened := time.Since(start)
		waitCount(b, time.Minute, func() bool {
			pos, _ := ld.cursor()
			return pos >= cursor+10
		})
		again := time.Since(start)
		b.StopTimer()
		waitCount(b, 10*time.Second, func() bool {
			var got []string
			for _, m := range ld.call("GET", "/v1/messages?from="+macLine+"&to="+url.QueryEscape(from)+"&limit=10", key, nil).Data() {
				got = append(got, m["guid"].(string))
			}
			slices.Reverse(got)
			return slices.Equal(got, guids)
		})
		if n := len(ld.logLines("imported the Messages history")); n != 1 {
			b.Errorf("the history was imported %d times", n)
		}
		// The full-text index (search.db) is built after the import, by a
		// scan that waited for it or from the feed when the scan came
		// first (logged when caught up): the data folder is measured
		// once it is, and the history's own store alone.
		b.Logf("%s", ld.waitSearchIndex())
		data := dirSize(b, ld.dataDir)
		history := dirSizeExcept(b, ld.dataDir, "search.db")
		b.ReportMetric(mib(uint64(data)), "data-MiB")
		b.ReportMetric(float64(data)/float64(want), "bytes/msg")
		b.ReportMetric(float64(history)/float64(want), "history-bytes/msg")
		b.ReportMetric(float64(data-history)/float64(want), "search-bytes/msg")
		b.ReportMetric(again.Seconds()*1000, "restart-10-new-ms")
		b.ReportMetric(opened.Seconds()*1000, "restart-open-ms")
		b.Logf("second start: the daemon started in %s, the 10 new rows were stored %s later",
			opened.Round(time.Millisecond), (again - opened).Round(time.Millisecond))
		ld.stop()
		if keep := os.Getenv("BLUELINE_BENCH_KEEP_DB"); keep != "" {
			os.Remove(keep)
			if err := copyFile(filepath.Join(ld.dataDir, "db.bolt"), keep); err != nil {
				b.Error(err)
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMessagesIdleCPU measures the daemon watching the big chat.db
// while nothing happens, after its first start: the CPU time the whole
// process used over the window (default 60 s), and its read system calls.
func BenchmarkMessagesIdleCPU(b *testing.B) {
	window := benchEnvDuration(b, "BLUELINE_BENCH_IDLE", time.Minute)
	for range b.N {
		b.StopTimer()
		chatDB := bigMac(b)
		hc := newHookClock(b)
		ld := newLoggedDaemon(b, macLineTOML(b, chatDB)+hc.webhookTOML(b))
		ld.start()
		key := ld.key()
		if r := ld.call("POST", "/v1/webhooks", key, map[string]any{"from": macLine, "url": hc.srv.URL + "/h",
			"events": []string{"message.received", "message.sent", "message.edited", "message.delivered", "receipt.read"}}); r.Status != 201 {
			b.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Raw)
		}
		ld.waitLog(30*time.Minute, "imported the Messages history", 1)
		// Idle is once the search index has taken the history in.
		b.Logf("%s", ld.waitSearchIndex())
		// The scan after the import reads the change window once.
		settle := cpuTime(b)
		time.Sleep(5 * time.Second)
		b.Logf("the 5 s after the import: %s CPU", (cpuTime(b) - settle).Round(time.Millisecond))
		// The import left the heap large: the runtime would spend the
		// next minutes giving it back to the system, at up to 1% of a
		// core (its background scavenger). That is done now, so that the
		// window measures the watcher.
		debug.FreeOSMemory()

		cpu0, reads0 := cpuTime(b), readSyscalls()
		b.StartTimer()
		time.Sleep(window)
		b.StopTimer()
		cpu, reads := cpuTime(b)-cpu0, readSyscalls()-reads0
		per := float64(time.Minute) / float64(window)
		b.ReportMetric(float64(cpu.Milliseconds())*per, "cpu-ms-per-60s")
		b.ReportMetric(100*float64(cpu)/float64(window), "cpu-%")
		if reads0 >= 0 {
			b.ReportMetric(float64(reads)*per, "read-syscalls-per-60s")
		}
		if hc.count() != 0 {
			b.Errorf("%d webhook events while idle", hc.count())
		}
		ld.stop()
	}
	b.ReportMetric(0, "ns/op")
}
