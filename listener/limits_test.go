package listener_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/testkit"
)

// limitedServer is a real http.Server set up as the daemon's API is: a
// Limit listener of maxConns, ConnContext, MaxHeaderBytes and
// BodyIdleTimeout around h, answering a stalled body with stalled. A
// request for /in-process is made InProcess, as the console's requests to
// the API are. With tlsOn it serves HTTPS with HTTP/2.
func limitedServer(t *testing.T, h http.Handler, maxConns int, idle time.Duration, tlsOn bool) *httptest.Server {
	t.Helper()
	limited := listener.BodyIdleTimeout(h, idle, stalled)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/in-process" {
			r = r.WithContext(listener.InProcess(r.Context()))
		}
		limited.ServeHTTP(w, r)
	}))
	ts.Listener = listener.Limit(ts.Listener, listener.Limits{Max: maxConns})
	ts.Config.ConnContext = listener.ConnContext
	ts.Config.MaxHeaderBytes = listener.MaxHeaderBytes
	ts.Config.ReadHeaderTimeout = 10 * time.Second
	if tlsOn {
		ts.EnableHTTP2 = true
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	return ts
}

// stalled answers a body cut off as the API does, in short: 408, the
// connection closing, and the Stall in the body, unless the handler's
// answer stands.
func stalled(w http.ResponseWriter, _ *http.Request, s listener.Stall) {
	if s.Answered {
		return
	}
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestTimeout)
	fmt.Fprintf(w, "idle %s, total %s", s.Idle, s.Total)
}

// counting answers with the number of body bytes it read, or 400 when
// reading failed (BodyIdleTimeout must replace that with stalled's 408). It
// takes every request as authenticated, as the API does one with a key.
func counting() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		listener.Authenticated(r)
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, "read failed: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
	})
}

func dial(t *testing.T, ts *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes a raw request and reads its response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// pending is the status of the answer to a request on a connection, read
// in the background: 0 if none came within 10 s.
type pending <-chan int

// answerOf reads the response to a request already written on c.
func answerOf(c net.Conn, br *bufio.Reader) pending {
	answered := make(chan int, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			answered <- 0
			return
		}
		answered <- resp.StatusCode
	}()
	return answered
}

// notYet fails the test if the answer has come.
func (p pending) notYet(t *testing.T, what string) {
	t.Helper()
	select {
	case code := <-p:
		t.Fatalf("%s was answered (%d)", what, code)
	default:
	}
}

// want waits for the answer, which must have the given status.
func (p pending) want(t *testing.T, status int, what string) {
	t.Helper()
	select {
	case code := <-p:
		if code != status {
			t.Fatalf("%s was answered %d, want %d", what, code, status)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not served", what)
	}
}

// headOfSize is a GET request whose head (request line, fields, blank
// line) is exactly n bytes.
func headOfSize(n int) string {
	const start, end = "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ", "\r\n\r\n"
	return start + strings.Repeat("a", n-len(start)-len(end)) + end
}

// The head limit is exactly HeaderLimit (64 KiB): net/http's 4096 bytes of
// slack are taken off MaxHeaderBytes. If net/http changes its slack, this
// fails.
func TestHeaderLimitExact(t *testing.T) {
	ts := limitedServer(t, counting(), 8, time.Second, false)
	for _, c := range []struct {
		size int
		want int
	}{
		{listener.HeaderLimit - 1000, 200},
		{listener.HeaderLimit, 200},
		{listener.HeaderLimit + 1, 431},
		{listener.HeaderLimit + 4096, 431},
	} {
		conn := dial(t, ts)
		resp, body := roundTrip(t, conn, bufio.NewReader(conn), headOfSize(c.size))
		if resp.StatusCode != c.want {
			t.Errorf("head of %d bytes: %d %q, want %d", c.size, resp.StatusCode, body, c.want)
		}
	}
}

// With a cap of 2, a third connection is not served until one of the two
// closes; then it is.
func TestLimitListenerHoldsConnectionsOverTheCap(t *testing.T) {
	var accepted atomic.Int32
	ts := httptest.NewUnstartedServer(counting())
	ts.Listener = listener.Limit(ts.Listener, listener.Limits{Max: 2})
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

	a, b := dial(t, ts), dial(t, ts)
	ra, rb := bufio.NewReader(a), bufio.NewReader(b)
	for _, c := range []struct {
		conn net.Conn
		br   *bufio.Reader
	}{{a, ra}, {b, rb}} {
		if resp, _ := roundTrip(t, c.conn, c.br, get); resp.StatusCode != 200 {
			t.Fatalf("one of the first two connections: %d", resp.StatusCode)
		}
	}

	third := dial(t, ts)
	if _, err := io.WriteString(third, get); err != nil {
		t.Fatal(err)
	}
	answered := answerOf(third, bufio.NewReader(third))
	// Give the server time to take the third, if it would: more requests
	// on the first connection, answered one after the other.
	for range 5 {
		if resp, _ := roundTrip(t, a, ra, get); resp.StatusCode != 200 {
			t.Fatalf("first connection, again: %d", resp.StatusCode)
		}
	}
	answered.notYet(t, "the third connection, with two open and a cap of 2,")
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections accepted, want 2", n)
	}

	b.Close()
	answered.want(t, 200, "the third connection, after one of the two closed,")
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections accepted, want 3", n)
	}
}

// Close ends an Accept waiting for a slot; the connections keep what
// net/http looks for on a TCP connection (sendfile, half-close).
func TestLimitListenerCloseAndMethods(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := listener.Limit(inner, listener.Limits{Max: 1})
	c1, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	s1, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	if _, ok := s1.(io.ReaderFrom); !ok {
		t.Error("connection lost ReadFrom (sendfile)")
	}
	if _, ok := s1.(interface{ CloseWrite() error }); !ok {
		t.Error("connection lost CloseWrite")
	}

	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still waiting after Close")
	}
}

// A body that stops arriving is cut off after the idle interval, answered
// by stalled, and the connection closed; one that keeps moving is
// read to its end however long it takes, in a declared length or as
// chunks, one large chunk trickling in included.
func TestBodyIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := limitedServer(t, counting(), 8, idle, false)

	t.Run("stalled", func(t *testing.T) {
		conn := dial(t, ts)
		start := time.Now()
		resp, body := roundTrip(t, conn, bufio.NewReader(conn),
			"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("s", 100))
		took := time.Since(start)
		checkTimeout(t, resp, body)
		if took < idle {
			t.Errorf("cut off after %s, before the idle interval %s", took, idle)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("connection after the 408: read %d, %v; want it closed (EOF)", n, err)
		}
	})

	t.Run("stalled chunked", func(t *testing.T) {
		conn := dial(t, ts)
		resp, body := roundTrip(t, conn, bufio.NewReader(conn),
			"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n")
		checkTimeout(t, resp, body)
	})

	slow := []struct {
		name, head, tail string
		piece            func(i int) string
	}{
		{"declared length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n", "",
			func(int) string { return "0123456789" }},
		{"a chunk each time", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "0\r\n\r\n",
			func(int) string { return "a\r\n0123456789\r\n" }},
		// One chunk of 200 bytes arriving 10 at a time: a single Read of
		// the body waits for the whole chunk, so only a deadline moved by
		// each read from the socket keeps it alive.
		{"one trickling chunk", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nc8\r\n", "\r\n0\r\n\r\n",
			func(int) string { return "0123456789" }},
	}
	for _, s := range slow {
		t.Run("slow "+s.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, ts)
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			io.WriteString(conn, s.head)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			start := time.Now()
			for i := range 20 { // 2 s in all, over six idle intervals
				<-tick.C
				if _, err := io.WriteString(conn, s.piece(i)); err != nil {
					t.Fatalf("piece %d, %s in: %v", i, time.Since(start), err)
				}
			}
			resp, body := roundTrip(t, conn, bufio.NewReader(conn), s.tail)
			if resp.StatusCode != 200 || body != "200" {
				t.Fatalf("slow body of 200 bytes over %s: %d %q", time.Since(start), resp.StatusCode, body)
			}
		})
	}
}

// The deadline ends with the body: a handler that works on for several
// idle intervals after reading its body keeps its context and answers, a
// handler that leaves the body unread answers too, and the connection
// serves the next request.
func TestBodyIdleTimeoutEndsWithTheBody(t *testing.T) {
	const idle = 200 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/unread" {
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
		case <-time.After(3 * idle):
			fmt.Fprint(w, n)
		}
	})
	for _, tlsOn := range []bool{false, true} {
		ts := limitedServer(t, h, 8, idle, tlsOn)
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conn := c
		if tlsOn { // HTTP/1.1 over TLS: the connection is found under tls.Conn
			conn = tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		}
		br := bufio.NewReader(conn)
		for i, req := range []string{
			"POST /work HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
			"POST /unread HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
			"POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
			"GET /work HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			resp, body := roundTrip(t, conn, br, req)
			want := map[int]string{0: "5", 1: "refused\n", 2: "3", 3: "0"}[i]
			if body != want || resp.Close {
				t.Errorf("tls %v, request %d on one connection: %d %q (close %v), want %q", tlsOn, i, resp.StatusCode, body, resp.Close, want)
			}
		}
	}
}

// A handler that began its response before the body stalled keeps it, to
// its end: stalled is told, and writes nothing.
func TestBodyIdleTimeoutAfterTheAnswer(t *testing.T) {
	const idle = 300 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "begun;")
		http.NewResponseController(w).Flush()
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			io.WriteString(w, " read failed")
		}
	})
	ts := limitedServer(t, h, 8, idle, false)
	conn := dial(t, ts)
	resp, body := roundTrip(t, conn, bufio.NewReader(conn),
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("s", 100))
	if resp.StatusCode != 200 || body != "begun; read failed" {
		t.Errorf("a response begun before the stall: %d %q, want the handler's 200", resp.StatusCode, body)
	}
}

// Over HTTP/2 the stream's deadline is moved by each Read of the body.
func TestBodyIdleTimeoutHTTP2(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := limitedServer(t, counting(), 8, idle, true)
	client := ts.Client()

	post := func(t *testing.T, write func(w *io.PipeWriter)) (*http.Response, string) {
		t.Helper()
		pr, pw := io.Pipe()
		go write(pw)
		req, _ := http.NewRequest("POST", ts.URL, pr)
		resp, err := client.Do(req)
		pr.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("served over %s, want HTTP/2", resp.Proto)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}

	t.Run("stalled", func(t *testing.T) {
		resp, body := post(t, func(w *io.PipeWriter) { w.Write([]byte(strings.Repeat("s", 100))) })
		checkTimeout(t, resp, body)
	})
	t.Run("slow", func(t *testing.T) {
		resp, body := post(t, func(w *io.PipeWriter) {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for range 20 {
				<-tick.C
				if _, err := w.Write([]byte("0123456789")); err != nil {
					return
				}
			}
			w.Close()
		})
		if resp.StatusCode != 200 || body != "200" {
			t.Fatalf("slow HTTP/2 body: %d %q", resp.StatusCode, body)
		}
	})
}

// A body whose request has not authenticated gets 5 s in all, however it
// keeps moving; once the request has authenticated, or for a request made
// in process, only the idle interval applies. Over HTTP/1.1 and HTTP/2
// alike.
func TestUnauthenticatedBodyTotal(t *testing.T) {
	const idle = 300 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/key" {
			listener.Authenticated(r)
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
	})
	for _, tlsOn := range []bool{false, true} {
		ts := limitedServer(t, h, 8, idle, tlsOn)
		for _, path := range []string{"/anonymous", "/key", "/in-process"} {
			t.Run(fmt.Sprintf("tls %v %s", tlsOn, path), func(t *testing.T) {
				t.Parallel()
				pr, pw := io.Pipe()
				go func() {
					tick := time.NewTicker(100 * time.Millisecond)
					defer tick.Stop()
					for range 65 { // 6.5 s, well within each idle interval
						<-tick.C
						if _, err := pw.Write([]byte("0123456789")); err != nil {
							return
						}
					}
					pw.Close()
				}()
				req, _ := http.NewRequest("POST", ts.URL+path, pr)
				start := time.Now()
				resp, err := ts.Client().Do(req)
				pr.Close()
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				took := time.Since(start)
				if path != "/anonymous" {
					if resp.StatusCode != 200 || string(body) != "650" {
						t.Errorf("%s: a body over %s: %d %q, want all 650 bytes", path, took, resp.StatusCode, body)
					}
					return
				}
				if resp.StatusCode != http.StatusRequestTimeout || string(body) != "idle 300ms, total 5s" {
					t.Errorf("an unauthenticated body still moving: %d %q, want 408 after 5 s", resp.StatusCode, body)
				}
				if took < 5*time.Second || took > 7*time.Second {
					t.Errorf("cut off after %s, want 5 s", took)
				}
			})
		}
	}
}

// One address holds at most its share of the unauthenticated connections
// (8 of 16); once the open share is full (12), a connection from the
// reserve is closed after 5 s unless it authenticates.
func TestLimitListenerShares(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/key" {
			listener.Authenticated(r)
		}
	})
	ts := limitedServer(t, h, 16, time.Second, false)
	from := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Skipf("cannot connect from %s (only Linux routes all of 127/8 to loopback): %v", ip, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// open counts the connections from ip the server has not closed.
	flood := func(ip string, n int) *atomic.Int32 {
		var open atomic.Int32
		for range n {
			c := from(ip)
			open.Add(1)
			go func() {
				io.Copy(io.Discard, c)
				open.Add(-1)
			}()
		}
		return &open
	}
	a := flood("127.0.0.1", 12)
	b := flood("127.0.0.3", 6)
	get := func(c net.Conn, path string) {
		t.Helper()
		if resp, _ := roundTrip(t, c, bufio.NewReader(c), "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	authed := from("127.0.0.2")
	get(authed, "/key") // from the reserve, and authenticated
	testkit.Eventually(t, 2*time.Second, func() bool { return a.Load() == 8 && b.Load() == 5 })
	testkit.Eventually(t, 10*time.Second, func() bool { return b.Load() == 4 })
	get(authed, "/key")
}

// checkTimeout asserts stalled's answer for a body idle for 300ms, with
// the connection closing.
func checkTimeout(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusRequestTimeout || body != "idle 300ms, total 0s" {
		t.Fatalf("stalled body answered %d %q, want 408 %q", resp.StatusCode, body, "idle 300ms, total 0s")
	}
	if resp.ProtoMajor == 1 && !resp.Close {
		t.Errorf("408 without Connection: close (%v)", resp.Header)
	}
}

// With TLS on, LimitConnections caps the HTTP port (challenges and
// redirects) as well as the HTTPS one, and the redirect server refuses
// heads over 64 KiB too. Nothing is obtained here: the CA does not exist.
func TestTLSLimitConnections(t *testing.T) {
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone.Close() // nothing listens there
	tl, err := listener.ListenTLS(listener.TLSOptions{
		Domains: []string{"limits.blueline.test"}, CA: "https://" + gone.Addr().String() + "/dir",
		HTTPListen: "127.0.0.1:0", HTTPSListen: "127.0.0.1:0", StorageDir: t.TempDir(),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tl.LimitConnections(listener.Limits{Max: 1})
	tl.Serve(&http.Server{Handler: counting(), MaxHeaderBytes: listener.MaxHeaderBytes})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tl.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	dialHTTP := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", tl.HTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// An unknown challenge token is answered 404 on a connection kept open.
	const challenge = "GET /.well-known/acme-challenge/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
	a, ra := dialHTTP()
	if resp, _ := roundTrip(t, a, ra, challenge); resp.StatusCode != 404 || resp.Close {
		t.Fatalf("challenge: %d (close %v)", resp.StatusCode, resp.Close)
	}

	b, rb := dialHTTP()
	io.WriteString(b, "GET /v1/lines HTTP/1.1\r\nHost: limits.blueline.test\r\n\r\n")
	answered := answerOf(b, rb)
	for range 5 {
		if resp, _ := roundTrip(t, a, ra, challenge); resp.StatusCode != 404 {
			t.Fatalf("challenge again: %d", resp.StatusCode)
		}
	}
	answered.notYet(t, "a second connection to the HTTP port, with a cap of 1,")
	a.Close()
	answered.want(t, http.StatusPermanentRedirect, "the second connection, once the first closed,")

	c, rc := dialHTTP()
	if resp, _ := roundTrip(t, c, rc, headOfSize(listener.HeaderLimit+1)); resp.StatusCode != 431 {
		t.Errorf("redirect server, head of 64 KiB + 1: %d, want 431", resp.StatusCode)
	}
}
