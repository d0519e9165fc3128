package server

// Limits on what one client can make the daemon hold, for an API that may
// face the internet: the size of a request's head, the number of open
// connections, and how long a request body may stop arriving. Timeouts on
// the head (ReadHeaderTimeout) and on idle connections (IdleTimeout) are
// set where the http.Server is built.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HeaderLimit is the most bytes a request's head may take over HTTP/1.1:
// the request line and the header fields, with their line ends and the
// blank line that ends them. One byte more is answered 431 (Request Header
// Fields Too Large, in net/http's plain text) and the connection closed.
const HeaderLimit = 64 << 10

// MaxHeaderBytes is the http.Server.MaxHeaderBytes that enforces
// HeaderLimit. net/http reads up to MaxHeaderBytes + 4096 bytes of a head
// ("bufio slop", Server.initialReadLimitSize) before it answers 431, so the
// 4096 are taken off here: a head of exactly HeaderLimit bytes is read, one
// of HeaderLimit+1 is refused (TestHeaderLimitExact pins this). Over HTTP/2
// net/http counts decoded fields instead, name + value + 32 bytes each,
// against MaxHeaderBytes + 320: much the same limit.
const MaxHeaderBytes = HeaderLimit - 4096

// LimitListener returns a listener that keeps at most n of ln's connections
// open at once (n < 1 means 1). At the cap, Accept waits until one of them
// is closed; new connections wait meanwhile in the kernel's accept queue
// (the listen backlog: somaxconn, 128 by default on macOS, 4096 on recent
// Linux), and when that is full the kernel drops or refuses them. Clients
// then see a slow connect or a timeout, and the daemon keeps its memory and
// file descriptors. Closing the listener ends a waiting Accept.
//
// Its connections also serve BodyIdleTimeout: while a request body is read
// over HTTP/1.1, each read from the socket extends the read deadline.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max(n, 1)), closed: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one value per open connection
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed. It keeps the methods net/http
// looks for on a *net.TCPConn: ReadFrom (sendfile for downloads) and
// CloseWrite (a response to a refused request is not lost to a reset).
type limitConn struct {
	net.Conn
	free     func()
	freeOnce sync.Once
	// idle, in nanoseconds, is set while a request body is read: each Read
	// then first moves the read deadline to now + idle. Any other deadline
	// set on the connection (by net/http or a handler) clears it.
	idle atomic.Int64
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.freeOnce.Do(c.free)
	return err
}

func (c *limitConn) Read(p []byte) (int, error) {
	if d := c.idle.Load(); d > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(time.Duration(d)))
	}
	return c.Conn.Read(p)
}

func (c *limitConn) SetDeadline(t time.Time) error {
	c.idle.Store(0)
	return c.Conn.SetDeadline(t)
}

func (c *limitConn) SetReadDeadline(t time.Time) error {
	c.idle.Store(0)
	return c.Conn.SetReadDeadline(t)
}

// extendReads arms the per-read deadline until the next deadline set.
func (c *limitConn) extendReads(idle time.Duration) { c.idle.Store(int64(idle)) }

func (c *limitConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it lets BodyIdleTimeout find
// the connection of an HTTP/1.1 request.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// limitConnOf is the LimitListener connection r came on, under TLS or
// not; nil if there is none (no ConnContext, another listener).
func limitConnOf(r *http.Request) *limitConn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitConn)
	return lc
}

// BodyIdleTimeout cuts off a request body that stops arriving: when no byte
// of it comes for idle, reading it fails, and unless the handler had begun
// its response the client is answered 408 request_timeout and the
// connection is closed. A slow body that keeps moving is never cut off,
// however long it takes: the clock restarts with every read from the
// socket. idle <= 0 turns it off.
//
// Over HTTP/1.1 on a LimitListener connection (with ConnContext set), the
// connection extends its read deadline before each read from the socket,
// so a chunked body whose one large chunk trickles in counts as moving.
// Otherwise (HTTP/2, or another listener) each Read of the body extends the
// read deadline through http.ResponseController; an HTTP/2 body's Read
// returns with whatever has arrived, so that is as fine-grained.
//
// The handler's error for the failed read (it sees a read error, whatever
// it makes of it) is dropped and replaced with the 408. A body the handler
// leaves unread, net/http reads on (at most 256 KiB) to keep the connection:
// that gets one more idle interval in all.
func BodyIdleTimeout(next http.Handler, idle time.Duration, log *slog.Logger) http.Handler {
	if idle <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		b := &idleBody{ReadCloser: r.Body, idle: idle}
		if c := limitConnOf(r); c != nil && r.ProtoMajor == 1 {
			c.extendReads(idle)
		} else {
			b.rc = rc
		}
		iw := &idleWriter{ResponseWriter: w, body: b}
		r2 := r.WithContext(r.Context())
		r2.Body = b
		next.ServeHTTP(iw, r2)

		// What net/http reads after us gets one fixed deadline (setting it
		// also stops the connection extending its own): none at all after
		// a stall, as the connection closes after the answer.
		switch {
		case b.stalled.Load():
			rc.SetReadDeadline(time.Now())
		case !b.done.Load() && r.ProtoMajor == 1:
			rc.SetReadDeadline(time.Now().Add(idle))
		}
		if !b.stalled.Load() {
			return
		}
		id := w.Header().Get("X-Request-Id")
		log.Debug("request body stalled", "method", r.Method, "path", r.URL.Path, "request_id", id, "idle", idle)
		if iw.wrote {
			return // too late: the handler's response stands (none of ours answers before reading)
		}
		h := w.Header()
		for k := range h {
			if k != "X-Request-Id" && !strings.HasPrefix(k, "Access-Control-") {
				delete(h, k)
			}
		}
		h.Set("Connection", "close")
		writeError(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)), log, &Error{
			Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: "request_timeout",
			Message: fmt.Sprintf("The request body stopped arriving: nothing came for %s ([limits] body_idle_timeout). "+
				"Nothing was done; send the request again on a new connection.", idle)})
	})
}

// idleBody is a request body whose reads fail once it stops arriving.
type idleBody struct {
	io.ReadCloser
	idle time.Duration
	// rc, when set, is how each Read extends the read deadline; nil when
	// the connection does it.
	rc      *http.ResponseController
	done    atomic.Bool // EOF or an error was read
	stalled atomic.Bool // the error was the idle deadline
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	if b.rc != nil {
		if err := b.rc.SetReadDeadline(time.Now().Add(b.idle)); errors.Is(err, http.ErrNotSupported) {
			b.rc = nil
		}
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done.Store(true)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.stalled.Store(true)
		}
		if b.rc != nil && err == io.EOF {
			b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// idleWriter drops what the handler writes once its body has stalled, so
// that BodyIdleTimeout answers instead.
type idleWriter struct {
	http.ResponseWriter
	body  *idleBody
	wrote bool // the handler's response began before the body stalled
}

func (w *idleWriter) drop() bool { return !w.wrote && w.body.stalled.Load() }

func (w *idleWriter) WriteHeader(code int) {
	if w.drop() {
		return
	}
	if code >= 200 {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *idleWriter) Write(p []byte) (int, error) {
	if w.drop() {
		return len(p), nil
	}
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

// ReadFrom keeps a download's way to sendfile.
func (w *idleWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.drop() {
		return io.Copy(io.Discard, r)
	}
	w.wrote = true
	return io.Copy(w.ResponseWriter, r)
}

func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
