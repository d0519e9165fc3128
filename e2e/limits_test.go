package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The daemon's protections for an API that faces the internet: request
// heads of at most 64 KiB, a cap on open connections, request bodies cut
// off when they stop arriving, and download ranges that never make a
// response larger than the file.

// limitsConn is a raw connection to the daemon's API, for requests no
// well-behaved client would send.
type limitsConn struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

func (td *testDaemon) dialAPI() *limitsConn {
	td.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(td.base, "http://"))
	if err != nil {
		td.t.Fatal(err)
	}
	td.t.Cleanup(func() { c.Close() })
	return &limitsConn{t: td.t, conn: c, br: bufio.NewReader(c)}
}

func (c *limitsConn) write(raw string) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.conn, raw); err != nil {
		c.t.Fatal(err)
	}
}

// read reads one response, within 10 s.
func (c *limitsConn) read() (*http.Response, []byte) {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, body
}

// closed reports whether the daemon closed the connection (EOF within 5 s).
func (c *limitsConn) closed() bool {
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	return err == io.EOF
}

// A request head (request line, header fields, blank line) of exactly
// 64 KiB is served; one byte more is answered 431.
func TestLimitsHeaderSize(t *testing.T) {
	td := startTestDaemon(t, "")
	head := func(n int) string {
		const start, end = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ", "\r\n\r\n"
		return start + strings.Repeat("p", n-len(start)-len(end)) + end
	}
	for _, c := range []struct{ size, want int }{{64 << 10, 200}, {64<<10 + 1, 431}, {1 << 20, 431}} {
		conn := td.dialAPI()
		conn.write(head(c.size))
		resp, body := conn.read()
		if resp.StatusCode != c.want {
			t.Errorf("head of %d bytes: %d %q, want %d", c.size, resp.StatusCode, body, c.want)
		}
		if c.want == 431 && !conn.closed() {
			t.Errorf("head of %d bytes: the connection stays open after the 431", c.size)
		}
	}
	// A client library's request with a large header passes too.
	r := td.call("GET", "/healthz", "", nil, "X-Large", strings.Repeat("l", 60<<10))
	if r.Status != 200 {
		t.Errorf("GET with a 60 KiB header: %d %s", r.Status, r.Raw)
	}
}

// With max_connections = 2, a third connection is not served while two are
// open, and is served as soon as one of them closes.
func TestLimitsMaxConnections(t *testing.T) {
	td := startTestDaemon(t, "[limits]\nmax_connections = 2\n")
	const get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	a, b := td.dialAPI(), td.dialAPI()
	for _, c := range []*limitsConn{a, b} {
		c.write(get)
		if resp, body := c.read(); resp.StatusCode != 200 {
			t.Fatalf("one of the first two connections: %d %s", resp.StatusCode, body)
		}
	}

	third := td.dialAPI() // the kernel completes the handshake: it waits to be accepted
	third.write(get)
	answered := make(chan string, 1)
	go func() {
		third.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(third.br, nil)
		if err != nil {
			answered <- err.Error()
			return
		}
		answered <- resp.Status
	}()
	// Requests answered one after another on the first connection give
	// the daemon every chance to serve the third, if it would.
	for range 5 {
		a.write(get)
		if resp, _ := a.read(); resp.StatusCode != 200 {
			t.Fatalf("first connection, again: %d", resp.StatusCode)
		}
	}
	select {
	case got := <-answered:
		t.Fatalf("the third connection got %q while two were open", got)
	default:
	}

	closedAt := time.Now()
	b.conn.Close()
	select {
	case got := <-answered:
		if got != "200 OK" {
			t.Fatalf("the third connection, once one closed: %s", got)
		}
		t.Logf("the third connection was served %s after the second closed", time.Since(closedAt).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the third connection was not served after one of the two closed")
	}
	// The first connection still works: closing one does not close others.
	a.write(get)
	if resp, _ := a.read(); resp.StatusCode != 200 {
		t.Errorf("first connection at the end: %d", resp.StatusCode)
	}
}

// With body_idle_timeout = "300ms", an upload or a JSON body that stops
// arriving is answered 408 request_timeout in the API's error shape, the
// connection closed and nothing stored; uploads that keep moving, a piece
// every 100 ms for 2 s, are stored whole.
func TestLimitsBodyIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	td := startTestDaemon(t, "[limits]\nbody_idle_timeout = \"300ms\"\n")
	key := td.key()
	auth := "Host: x\r\nAuthorization: Bearer " + key + "\r\n"

	stalled := []struct{ name, head, sent string }{
		{"upload", "POST /v1/files HTTP/1.1\r\n" + auth + "Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n",
			strings.Repeat("u", 30000)},
		{"chunked upload", "POST /v1/files HTTP/1.1\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n",
			"2710\r\n" + strings.Repeat("c", 5000)},
		{"message", "POST /v1/messages HTTP/1.1\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n",
			`{"from": "` + mainLine + `", "to": "` + alice + `", "text": "`},
	}
	for _, s := range stalled {
		t.Run("stalled "+s.name, func(t *testing.T) {
			t.Parallel()
			conn := td.dialAPI()
			start := time.Now()
			conn.write(s.head + s.sent)
			resp, raw := conn.read()
			took := time.Since(start)
			var body struct {
				Error     struct{ Type, Code, Message string } `json:"error"`
				RequestID string                               `json:"request_id"`
			}
			json.Unmarshal(raw, &body)
			if resp.StatusCode != 408 || body.Error.Code != "request_timeout" || body.Error.Type != "invalid_request_error" {
				t.Fatalf("answered %d %s, want 408 request_timeout", resp.StatusCode, raw)
			}
			if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") || body.RequestID != id {
				t.Errorf("request_id %q, X-Request-Id %q", body.RequestID, id)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("the 408 lost its CORS headers: %v", resp.Header)
			}
			if took < idle {
				t.Errorf("cut off after %s, before body_idle_timeout", took)
			}
			if !conn.closed() {
				t.Error("the connection stays open after the 408")
			}
		})
	}

	slow := []struct {
		name, head, tail string
		piece            string
	}{
		{"upload", "POST /v1/files HTTP/1.1\r\n" + auth + "Content-Length: 2000\r\n\r\n", "", strings.Repeat("s", 100)},
		{"chunked upload", "POST /v1/files HTTP/1.1\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n", "0\r\n\r\n",
			"64\r\n" + strings.Repeat("k", 100) + "\r\n"},
		// One 2,000-byte chunk arriving 100 bytes at a time.
		{"one-chunk upload", "POST /v1/files HTTP/1.1\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n7d0\r\n", "\r\n0\r\n\r\n",
			strings.Repeat("o", 100)},
	}
	for _, s := range slow {
		t.Run("slow "+s.name, func(t *testing.T) {
			t.Parallel()
			conn := td.dialAPI()
			conn.write(s.head)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			start := time.Now()
			for range 20 {
				<-tick.C
				conn.write(s.piece)
			}
			conn.write(s.tail)
			resp, raw := conn.read()
			var f struct {
				ID   string `json:"id"`
				Size int64  `json:"size"`
			}
			json.Unmarshal(raw, &f)
			if resp.StatusCode != 201 || f.Size != 2000 {
				t.Fatalf("a 2,000-byte upload over %s: %d %s", time.Since(start).Round(time.Millisecond), resp.StatusCode, raw)
			}
		})
	}

	t.Cleanup(func() {
		// After the subtests: only the three slow uploads were stored.
		if n := len(td.blobs()); n != 3 {
			t.Errorf("%d files stored, want the 3 slow uploads: %v", n, td.blobs())
		}
	})
}

// Downloads honour one range, and a few disjoint ones as multipart; more
// than 8, overlapping ones, or ranges whose multipart response would be
// larger than the file get the whole file, 200. No answer is larger than
// the file.
func TestLimitsDownloadRanges(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	r := td.upload(key, data, "X-Filename", "letters.txt")
	if r.Status != 201 {
		t.Fatalf("upload: %d %s", r.Status, r.Raw)
	}
	url := r.Body["url"].(string)

	ranges := func(n, step, length int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("%d-%d", i*step, i*step+length-1))
		}
		return "bytes=" + strings.Join(parts, ",")
	}
	cases := []struct {
		name, header string
		want         int
		parts        int // of a multipart answer
	}{
		{"one range", "bytes=10-19", 206, 0},
		{"a suffix", "bytes=-100", 206, 0},
		{"two disjoint ranges", "bytes=0-2999,5000-7999", 206, 2},
		{"8 disjoint ranges", ranges(8, 1200, 1000), 206, 8},
		{"9 disjoint ranges", ranges(9, 1100, 1000), 200, 0},
		{"overlapping", "bytes=0-499,100-599", 200, 0},
		{"overlapping, out of order", "bytes=5000-9999,0-6000", 200, 0},
		{"the same byte 1,000 times", "bytes=" + strings.TrimSuffix(strings.Repeat("0-0,", 1000), ","), 200, 0},
		// 9,600 bytes of a 10,000-byte file, but with each part's headers
		// the multipart answer would be larger than the file.
		{"8 ranges outweighing the file", ranges(8, 1250, 1200), 200, 0},
		{"beyond the end", "bytes=20000-30000", 416, 0},
	}
	for _, c := range cases {
		resp, body := get(t, "GET", url, "Range", c.header)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d (%d bytes), want %d", c.name, resp.StatusCode, len(body), c.want)
			continue
		}
		if len(body) > len(data) {
			t.Errorf("%s: %d bytes answered for a file of %d", c.name, len(body), len(data))
		}
		switch {
		case c.want == 200 && !bytes.Equal(body, data):
			t.Errorf("%s: 200 without the whole file (%d bytes)", c.name, len(body))
		case c.header == "bytes=10-19" && (string(body) != string(data[10:20]) || resp.Header.Get("Content-Range") != "bytes 10-19/10000"):
			t.Errorf("%s: %q, Content-Range %q", c.name, body, resp.Header.Get("Content-Range"))
		case c.parts > 0:
			mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if n := bytes.Count(body, []byte("--"+params["boundary"]+"\r\n")); mt != "multipart/byteranges" || n != c.parts {
				t.Errorf("%s: %s with %d parts, want multipart/byteranges with %d", c.name, mt, n, c.parts)
			}
		}
	}
}

// BenchmarkSlowHeaders measures what 2,000 slow clients cost: each opens a
// connection and sends 30 KiB of a 60 KiB header, then nothing more. It
// reports the connections the daemon took in (the others wait in the
// kernel's accept queue), the growth of Go heap, goroutine stacks and RSS
// (the test process: the daemon runs in it, the clients add little), and how
// long a fresh request then waits for an answer. Each client connects from
// its own loopback address where it can (Linux routes all of 127/8 there),
// so that it measures a flood from many hosts: from one address, the
// daemon takes in only that address's share and refuses the rest at once.
// Run with
//
//	go test -run '^$' -bench BenchmarkSlowHeaders -benchtime 1x ./e2e
//
// "cap=1024" is the default max_connections; "cap=4096" takes all 2,000 in.
// Run each on its own (-bench 'BenchmarkSlowHeaders/cap=1024$') for an RSS
// figure that the other's high-water mark does not blur.
// BLUELINE_BENCH_HEAD_KIB=63 sends 63 KiB of each head instead of 30: the
// most a connection can be made to hold before its 431.
func BenchmarkSlowHeaders(b *testing.B) {
	const clients = 2000
	raiseFileLimit(b, 2*clients+1024) // both ends of each connection are in this process
	for _, maxConns := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("cap=%d", maxConns), func(b *testing.B) {
			for range b.N {
				slowHeaders(b, clients, maxConns)
			}
		})
	}
}

func slowHeaders(b *testing.B, clients, maxConns int) {
	td := startTestDaemon(b, fmt.Sprintf("[limits]\nmax_connections = %d\n", maxConns))
	addr := strings.TrimPrefix(td.base, "http://")
	// Half of a 60 KiB header: the request is never finished.
	sent := benchEnvInt(b, "BLUELINE_BENCH_HEAD_KIB", 30)
	half := append([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: "), bytes.Repeat([]byte("h"), sent<<10)...)

	before, goroutines := slowMem(), runtime.NumGoroutine()
	start := time.Now()
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range clients {
		d := net.Dialer{Timeout: 10 * time.Second}
		if runtime.GOOS == "linux" {
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 1, byte(i>>8), byte(i))}
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			b.Fatalf("connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		// An error is a connection the daemon closed at once, finding no
		// room for its address: not one it holds.
		c.Write(half)
	}
	opened := time.Since(start)

	// Each connection taken in has its goroutine; wait for them, then for
	// the heap to settle (the daemon reading what was sent). All within
	// ReadHeaderTimeout (10 s), after which the daemon drops them.
	want := min(clients, maxConns)
	deadline := time.Now().Add(8 * time.Second)
	for runtime.NumGoroutine()-goroutines < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	after := slowMem()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		next := slowMem()
		settled := next.heap < after.heap+256<<10
		after = next
		if settled {
			break
		}
	}
	taken := runtime.NumGoroutine() - goroutines
	measuredAt := time.Since(start)

	// A fresh request now: answered at once below the cap; at the cap it
	// waits in the accept queue behind the slow ones until their heads
	// time out (10 s).
	freshStart := time.Now()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(td.base + "/healthz")
	fresh := time.Since(freshStart)
	status := "no answer: " + fmt.Sprint(err)
	if err == nil {
		status = resp.Status
		resp.Body.Close()
	}

	heap, stack := growth(after.heap, before.heap), growth(after.stack, before.stack)
	b.ReportMetric(float64(taken), "conns-taken")
	b.ReportMetric(heap, "heap-MiB")
	b.ReportMetric(stack, "stack-MiB")
	if after.rss > 0 {
		b.ReportMetric(growth(after.rss, before.rss), "rss-MiB")
	}
	if taken > 0 {
		b.ReportMetric((heap+stack)*1024/float64(taken), "heap+stack-KiB/conn")
	}
	b.ReportMetric(fresh.Seconds(), "fresh-request-s")
	b.ReportMetric(0, "ns/op")
	b.Logf("max_connections %d: %d connections opened, %d KiB of head each, in %s; %d taken in (measured %s after the first); "+
		"growth: heap %.1f MiB, stacks %.1f MiB, RSS %.1f MiB (from %.1f); a fresh GET /healthz: %s after %s",
		maxConns, clients, sent, opened.Round(time.Millisecond), taken, measuredAt.Round(time.Millisecond),
		heap, stack, growth(after.rss, before.rss), mib(before.rss), status, fresh.Round(time.Millisecond))
}

type slowSample struct{ heap, stack, rss uint64 }

func slowMem() slowSample {
	debug.FreeOSMemory() // a GC, and freed memory back to the system: RSS is what is in use
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _, _, _ := procStatus()
	return slowSample{heap: ms.HeapInuse, stack: ms.StackInuse, rss: rss}
}

// raiseFileLimit raises the soft limit on open files to at least n, as far
// as the hard limit allows (macOS shells start at 256).
func raiseFileLimit(b *testing.B, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = min(n, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < n {
		b.Skipf("open files limited to %d (hard limit); %d needed", lim.Cur, n)
	}
}
