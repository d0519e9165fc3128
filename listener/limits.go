package listener

// Limits on what one client can make the daemon hold, for an API that may
// face the internet: the size of a request's head, the number of open
// connections, and how long a request body may stop arriving. Timeouts on
// the head (ReadHeaderTimeout) and on idle connections (IdleTimeout) are
// set where the http.Server is built.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
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

// Limits are what Limit holds a listener's connections to.
type Limits struct {
	// Max is the most connections open at once (less than 1 means 1).
	Max int
	// TrustedProxies are the reverse proxies in front of the daemon: each
	// of their connections may carry any client, so they are not held to
	// one address's share.
	TrustedProxies []netip.Prefix
	// Log records refused connections at debug level; nil records none.
	Log *slog.Logger
}

// unauthenticatedTimeout is how long a connection taken from the reserve
// has to authenticate, and how long the body of a request that has not
// authenticated may take to arrive. The console's sign-in form, the one
// body read before authenticating, is a few hundred bytes.
const unauthenticatedTimeout = 5 * time.Second

// Limit returns a listener that keeps at most l.Max of ln's connections
// open at once. At the cap, Accept waits until one of them is closed; new
// connections wait meanwhile in the kernel's accept queue
// (the listen backlog: somaxconn, 128 by default on macOS, 4096 on recent
// Linux), and when that is full the kernel drops or refuses them. Clients
// then see a slow connect or a timeout, and the daemon keeps its memory and
// file descriptors. Closing the listener ends a waiting Accept.
//
// Below the cap, a connection is unauthenticated until a request on it
// carries a valid credential (see Authenticated), and unauthenticated
// connections, which anyone can open, may not take it all:
//   - They hold at most the open share, Max less a quarter (the reserve).
//     When the open share is full, a new connection is taken from the
//     reserve, and closed after unauthenticatedTimeout unless it has
//     authenticated by then: an API client or a signed-in browser still
//     gets in, and so does GET /healthz, answered within that time.
//   - One address (an IPv6 /64: one host's usual allotment) holds at most
//     perAddress of them, and at most an eighth of the reserve; a trusted
//     proxy's connections are not counted by address.
//
// A connection for which there is no room is closed at once, unread.
//
// Its connections also serve BodyIdleTimeout: while a request body is read
// over HTTP/1.1, each read from the socket extends the read deadline.
func Limit(ln net.Listener, l Limits) net.Listener {
	n := max(l.Max, 1)
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reserve := n / 4
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}),
		proxies: l.TrustedProxies, log: log,
		openShare: n - reserve, reserve: reserve, perAddress: perAddress(n), reservePerAddress: max(1, reserve/8),
		byAddr: map[netip.Addr]*addrShare{}}
}

// perAddress is how many unauthenticated connections one address may hold
// under a cap of n: a sixteenth, but at least 8 (a browser opens up to six
// to one host), or n when that is less.
func perAddress(n int) int { return max(min(8, n), n/16) }

type limitListener struct {
	net.Listener
	slots     chan struct{} // one value per open connection
	closed    chan struct{}
	closeOnce sync.Once
	proxies   []netip.Prefix
	log       *slog.Logger

	openShare, reserve, perAddress, reservePerAddress int

	mu       sync.Mutex
	open     int // unauthenticated connections in the open share
	reserved int // unauthenticated connections taken from the reserve
	byAddr   map[netip.Addr]*addrShare
}

// addrShare counts one address's unauthenticated connections.
type addrShare struct{ open, reserved int }

// The states of a connection, as its listener counts it.
const (
	connOpen     = iota // unauthenticated, in the open share
	connReserved        // unauthenticated, from the reserve, on a timer
	connTrusted         // authenticated: counted by the cap only
	connDone            // closed, or closing because its time in the reserve ran out
)

func (l *limitListener) Accept() (net.Conn, error) {
	for {
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
		lc := &limitConn{Conn: c, l: l}
		lc.addr, lc.byAddr = l.addrOf(c.RemoteAddr())
		if l.admit(lc) {
			return lc, nil
		}
		l.log.Debug("connection refused: no room for another unauthenticated connection from its address",
			"remote", c.RemoteAddr().String())
		c.Close()
		<-l.slots
	}
}

// addrOf is the address a connection counts against, and whether it is
// counted by address at all (not for a trusted proxy's).
func (l *limitListener) addrOf(a net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, true // not IP: all such count as one address
	}
	ip := ap.Addr().Unmap()
	for _, p := range l.proxies {
		if p.Contains(ip) {
			return ip, false
		}
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return ip, true
}

// admit finds c a place in the open share or the reserve.
func (l *limitListener) admit(c *limitConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	share := &addrShare{}
	if c.byAddr {
		if share = l.byAddr[c.addr]; share == nil {
			share = &addrShare{}
		}
		if share.open+share.reserved >= l.perAddress {
			return false
		}
	}
	switch {
	case l.open < l.openShare:
		l.open++
		share.open++
		c.state = connOpen
	case l.reserved < l.reserve && (!c.byAddr || share.reserved < l.reservePerAddress):
		l.reserved++
		share.reserved++
		c.state = connReserved
		c.timer = time.AfterFunc(unauthenticatedTimeout, c.expire)
	default:
		return false
	}
	if c.byAddr {
		l.byAddr[c.addr] = share
	}
	return true
}

// leave takes c out of the unauthenticated counts; l.mu is held.
func (l *limitListener) leave(c *limitConn) {
	switch c.state {
	case connOpen:
		l.open--
	case connReserved:
		l.reserved--
		c.timer.Stop()
	default:
		return
	}
	if share := l.byAddr[c.addr]; c.byAddr && share != nil {
		if c.state == connOpen {
			share.open--
		} else {
			share.reserved--
		}
		if share.open+share.reserved == 0 {
			delete(l.byAddr, c.addr)
		}
	}
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
	l        *limitListener
	addr     netip.Addr
	byAddr   bool // counted against addr (not a trusted proxy's)
	freeOnce sync.Once
	// body, while a request body is read over HTTP/1.1, is that body:
	// each Read then first moves the read deadline to what the body
	// allows (see idleBody.deadline). Any other deadline set on the
	// connection (by net/http or a handler) clears it.
	body atomic.Pointer[idleBody]

	// Guarded by l.mu.
	state int
	timer *time.Timer // ends a reserved connection's time
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.freeOnce.Do(func() {
		c.l.mu.Lock()
		c.l.leave(c)
		c.state = connDone
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// authenticate moves c out of the unauthenticated counts, for good.
func (c *limitConn) authenticate() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state == connOpen || c.state == connReserved {
		c.l.leave(c)
		c.state = connTrusted
	}
}

// expire closes a connection from the reserve that has not authenticated
// in time.
func (c *limitConn) expire() {
	c.l.mu.Lock()
	expired := c.state == connReserved
	if expired {
		c.l.leave(c)
		c.state = connDone // authenticating now changes nothing
	}
	c.l.mu.Unlock()
	if expired {
		c.Close()
	}
}

func (c *limitConn) Read(p []byte) (int, error) {
	if b := c.body.Load(); b != nil {
		c.Conn.SetReadDeadline(b.deadline(time.Now()))
	}
	return c.Conn.Read(p)
}

func (c *limitConn) SetDeadline(t time.Time) error {
	c.body.Store(nil)
	return c.Conn.SetDeadline(t)
}

func (c *limitConn) SetReadDeadline(t time.Time) error {
	c.body.Store(nil)
	return c.Conn.SetReadDeadline(t)
}

// extendReads arms the per-read deadline of b until the next deadline set.
func (c *limitConn) extendReads(b *idleBody) { c.body.Store(b) }

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

// limitConnOf is the Limit connection r came on, under TLS or not; nil if
// there is none (no ConnContext, another listener).
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
// its response the client is answered by stalled (the API answers 408
// request_timeout) and the connection is closed. A slow body that keeps
// moving is never cut off, however long it takes: the clock restarts with
// every read from the socket. idle <= 0 turns it off.
//
// Over HTTP/1.1 on a Limit connection (with ConnContext set), the
// connection extends its read deadline before each read from the socket,
// so a chunked body whose one large chunk trickles in counts as moving.
// Otherwise (HTTP/2, or another listener) each Read of the body extends the
// read deadline through http.ResponseController; an HTTP/2 body's Read
// returns with whatever has arrived, so that is as fine-grained.
//
// A request that has not authenticated (see Authenticated) also has
// unauthenticatedTimeout in all for its body, however it keeps arriving:
// anyone can send one, and the one such body the daemon reads, the
// console's sign-in form, is small.
//
// The handler's answer once its read has failed (it sees a read error,
// whatever it makes of it) is dropped, so that stalled answers instead;
// stalled is called after the handler returns, for every body cut off (see
// Stall.Answered). A body the handler leaves unread, net/http reads on (at
// most 256 KiB) to keep the connection: that gets one more idle interval in
// all, within the same total.
func BodyIdleTimeout(next http.Handler, idle time.Duration, stalled func(http.ResponseWriter, *http.Request, Stall)) http.Handler {
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
		inProcess, _ := r.Context().Value(inProcessKey{}).(bool)
		if !inProcess {
			b.until.Store(time.Now().Add(unauthenticatedTimeout).UnixNano())
		}
		if c := limitConnOf(r); c != nil && r.ProtoMajor == 1 && !inProcess {
			c.extendReads(b)
		} else {
			b.rc = rc
		}
		iw := &idleWriter{ResponseWriter: w, body: b}
		r2 := r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
		r2.Body = b
		next.ServeHTTP(iw, r2)

		// What net/http reads after us gets one fixed deadline (setting it
		// also stops the connection extending its own): none at all after
		// a stall, as the connection closes after the answer.
		switch {
		case b.stalled.Load():
			rc.SetReadDeadline(time.Now())
		case !b.done.Load() && r.ProtoMajor == 1:
			rc.SetReadDeadline(b.deadline(time.Now()))
		}
		if !b.stalled.Load() {
			return
		}
		s := Stall{Idle: idle, Answered: iw.wrote}
		if b.cut.Load() {
			s.Total = unauthenticatedTimeout
		}
		stalled(w, r, s)
	})
}

// Stall is a request body BodyIdleTimeout cut off, as its stalled function
// is told of it.
type Stall struct {
	// Idle is the idle interval: nothing of the body came for that long.
	Idle time.Duration
	// Total, when not 0, is all the time the body had, still arriving when
	// it ran out: its request had not authenticated.
	Total time.Duration
	// Answered is set when the handler had begun its response before the
	// body stalled (none of the API's answers before reading it): that
	// response stands, and stalled must not write.
	Answered bool
}

type inProcessKey struct{}

// InProcess marks ctx as that of a request made within this process for a
// caller known already (the console calling the API for its signed-in
// user). Its context may still name the connection of the request that
// made it, whose deadlines are not BodyIdleTimeout's to move, and its body
// is not held to an unauthenticated request's total.
func InProcess(ctx context.Context) context.Context {
	return context.WithValue(ctx, inProcessKey{}, true)
}

// idleBody is a request body whose reads fail once it stops arriving.
type idleBody struct {
	io.ReadCloser
	idle time.Duration
	// rc, when set, is how each Read extends the read deadline; nil when
	// the connection does it.
	rc *http.ResponseController
	// until is when the body must be in (Unix ns) while its request has not
	// authenticated; 0 once it has.
	until   atomic.Int64
	done    atomic.Bool // EOF or an error was read
	stalled atomic.Bool // the error was a deadline
	cut     atomic.Bool // the deadline was until's
}

type bodyKey struct{}

// deadline is the read deadline a read of the body starting at now gets.
func (b *idleBody) deadline(now time.Time) time.Time {
	d := now.Add(b.idle)
	if u := b.until.Load(); u != 0 && u < d.UnixNano() {
		return time.Unix(0, u)
	}
	return d
}

// Authenticated records that r carries a valid credential (an API key, a
// console session): its connection leaves Limit's shares of
// unauthenticated connections for good, and its body is no longer held to
// the total time of an unauthenticated one (see BodyIdleTimeout). Call it
// before reading the body.
func Authenticated(r *http.Request) {
	if c := limitConnOf(r); c != nil {
		c.authenticate()
	}
	if b, ok := r.Context().Value(bodyKey{}).(*idleBody); ok {
		b.until.Store(0)
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	if b.rc != nil {
		if err := b.rc.SetReadDeadline(b.deadline(time.Now())); errors.Is(err, http.ErrNotSupported) {
			b.rc = nil
		}
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done.Store(true)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.stalled.Store(true)
			if u := b.until.Load(); u != 0 && time.Now().UnixNano() >= u {
				b.cut.Store(true)
			}
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
