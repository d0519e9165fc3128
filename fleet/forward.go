package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Request is an HTTP request forwarded to the node that serves its line.
type Request struct {
	Method string
	Path   string
	Query  string // the raw query, without "?"
	Header http.Header
	Body   []byte
}

// Response is the serving node's answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Handler serves a forwarded request. ctx ends at the forwarding node's
// deadline (or the server's Stop). A panic becomes a 500.
type Handler func(ctx context.Context, req Request) Response

// Errors of Forward, to match with errors.Is.
var (
	// ErrNodeDown: nobody serves the node's subject right now (its daemon
	// or server is stopped, or it left the fleet). Nothing was done there;
	// the API answers 503 line_unavailable with Retry-After.
	ErrNodeDown = errors.New("fleet: the node is down")
	// ErrTimeout: the node did not answer within the deadline. It may be
	// slow, asleep or cut off, and may have done the request: the outcome
	// is unknown, so never retry a non-idempotent request elsewhere.
	ErrTimeout = errors.New("fleet: the node did not answer in time; the outcome is unknown")
	// ErrTooLarge: a request or response does not fit in one NATS message
	// (see TooLargeError). Bodies are never split into chunks.
	ErrTooLarge = errors.New("fleet: too large to forward")
)

// TooLargeError says which side did not fit, and the limit.
type TooLargeError struct {
	What  string // "request" or "response"
	Size  int    // the body's size, when known (0 if not)
	Limit int    // the largest body that fits
}

func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("fleet: the %s body (%d bytes) is larger than the %d bytes a forwarded %s can carry", e.What, e.Size, e.Limit, e.What)
	}
	return fmt.Sprintf("fleet: the %s body is larger than the %d bytes a forwarded %s can carry", e.What, e.Limit, e.What)
}

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// DefaultForwardTimeout bounds Forward when ctx has no deadline.
const DefaultForwardTimeout = 30 * time.Second

// maxServeTimeout caps the deadline a forwarded request asks for.
const maxServeTimeout = 10 * time.Minute

// headerRoom is what MaxBody keeps of NATS's max payload for the subject
// and headers.
const headerRoom = 64 << 10

// Headers of a forwarded request and its response. HTTP headers travel as
// "Http-" + their canonical name.
const (
	hdrMethod  = "Bl-Method"
	hdrPath    = "Bl-Path"
	hdrQuery   = "Bl-Query"
	hdrTimeout = "Bl-Timeout-Ms"
	hdrStatus  = "Bl-Status"
	hdrError   = "Bl-Error"
	hdrHTTP    = "Http-"
)

// MaxBody is the largest body, of a request or of a response, that Forward
// carries: NATS's max payload (1 MiB by default, the server's setting) less
// room for the headers. Larger ones are refused with a TooLargeError.
func (n *Node) MaxBody() int { return int(n.nc.MaxPayload()) - headerRoom }

// Server answers the requests forwarded to this node.
type Server struct {
	sub    *nats.Subscription
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Stop stops taking requests and waits for those under way.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.sub.Unsubscribe()
		s.wg.Wait()
		s.cancel()
	})
}

// Serve answers the requests forwarded to this node (on
// "<prefix>.node.<node>.api"), each on its own goroutine, at most
// maxConcurrent at a time (more wait their turn; 0 means 64). It runs until
// Stop or the node closes.
func (n *Node) Serve(h Handler, maxConcurrent int) (*Server, error) {
	if maxConcurrent <= 0 {
		maxConcurrent = 64
	}
	base, cancel := context.WithCancel(context.Background())
	s := &Server{cancel: cancel}
	sem := make(chan struct{}, maxConcurrent)
	sub, err := n.nc.Subscribe(n.forwardSubject(n.opts.Node), func(m *nats.Msg) {
		sem <- struct{}{} // the callback goroutine waits: back-pressure
		s.wg.Add(1)
		go func() {
			defer func() { <-sem; s.wg.Done() }()
			n.serveOne(base, h, m)
		}()
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fleet: serving forwarded requests: %w", err)
	}
	// Many requests may wait in the subscription while a slow one runs.
	sub.SetPendingLimits(4096, 256<<20)
	// The local server has the subscription once Flush returns; the other
	// nodes learn of it over the routes a moment later (until then they
	// see this node as down).
	if err := n.nc.Flush(); err != nil {
		sub.Unsubscribe()
		cancel()
		return nil, fmt.Errorf("fleet: serving forwarded requests: %w", err)
	}
	s.sub = sub
	if !n.onClose(s.Stop) {
		s.Stop()
		return nil, errors.New("fleet: the node is closed")
	}
	return s, nil
}

func (n *Node) serveOne(base context.Context, h Handler, m *nats.Msg) {
	req := Request{
		Method: m.Header.Get(hdrMethod),
		Path:   m.Header.Get(hdrPath),
		Query:  m.Header.Get(hdrQuery),
		Header: http.Header{},
		Body:   m.Data,
	}
	for k, vs := range m.Header {
		if name, ok := strings.CutPrefix(k, hdrHTTP); ok {
			req.Header[http.CanonicalHeaderKey(name)] = vs
		}
	}
	timeout := DefaultForwardTimeout
	if ms, err := strconv.ParseInt(m.Header.Get(hdrTimeout), 10, 64); err == nil && ms > 0 {
		timeout = min(time.Duration(ms)*time.Millisecond, maxServeTimeout)
	}
	ctx, cancel := context.WithTimeout(base, timeout)
	defer cancel()

	resp := func() (resp Response) {
		defer func() {
			if p := recover(); p != nil {
				n.log.Error("fleet: a forwarded request's handler panicked", "method", req.Method, "path", req.Path, "panic", p)
				resp = Response{Status: http.StatusInternalServerError}
			}
		}()
		return h(ctx, req)
	}()
	if m.Reply == "" {
		return
	}
	out := nats.NewMsg(m.Reply)
	out.Header.Set(hdrStatus, strconv.Itoa(resp.Status))
	for k, vs := range resp.Header {
		out.Header[hdrHTTP+http.CanonicalHeaderKey(k)] = vs
	}
	out.Data = resp.Body
	if len(resp.Body) > n.MaxBody() {
		out = tooLargeReply(m.Reply, len(resp.Body))
	}
	err := m.RespondMsg(out)
	if errors.Is(err, nats.ErrMaxPayload) {
		err = m.RespondMsg(tooLargeReply(m.Reply, len(resp.Body)))
	}
	if err != nil {
		n.log.Warn("fleet: answering a forwarded request", "method", req.Method, "path", req.Path, "err", err)
	}
}

func tooLargeReply(subject string, size int) *nats.Msg {
	out := nats.NewMsg(subject)
	out.Header.Set(hdrError, "too_large")
	out.Header.Set("Bl-Size", strconv.Itoa(size))
	return out
}

// Forward sends req to node and returns its answer. The errors to tell
// apart: ErrNodeDown (nobody serves the node: at once, nothing done),
// ErrTimeout (no answer by ctx's deadline, DefaultForwardTimeout without
// one: outcome unknown), ErrTooLarge (a body over MaxBody), and ctx's own
// error when it was cancelled.
func (n *Node) Forward(ctx context.Context, node string, req Request) (Response, error) {
	if !namePattern.MatchString(node) {
		return Response{}, fmt.Errorf("fleet: forwarding to node %q: not a node name", node)
	}
	limit := n.MaxBody()
	if len(req.Body) > limit {
		return Response{}, &TooLargeError{What: "request", Size: len(req.Body), Limit: limit}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultForwardTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()

	m := nats.NewMsg(n.forwardSubject(node))
	m.Header.Set(hdrMethod, req.Method)
	m.Header.Set(hdrPath, req.Path)
	if req.Query != "" {
		m.Header.Set(hdrQuery, req.Query)
	}
	m.Header.Set(hdrTimeout, strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 1), 10))
	for k, vs := range req.Header {
		m.Header[hdrHTTP+http.CanonicalHeaderKey(k)] = vs
	}
	m.Data = req.Body

	start := time.Now()
	reply, err := n.nc.RequestMsgWithContext(ctx, m)
	switch {
	case err == nil:
	case errors.Is(err, nats.ErrNoResponders):
		return Response{}, fmt.Errorf("%w: nobody answers for node %q", ErrNodeDown, node)
	case errors.Is(err, nats.ErrMaxPayload):
		return Response{}, &TooLargeError{What: "request", Size: len(req.Body), Limit: limit}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return Response{}, fmt.Errorf("%w: node %q, after %s", ErrTimeout, node, time.Since(start).Round(time.Millisecond))
	default:
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		return Response{}, fmt.Errorf("fleet: forwarding to node %q: %w", node, err)
	}
	if reply.Header.Get(hdrError) == "too_large" {
		size, _ := strconv.Atoi(reply.Header.Get("Bl-Size"))
		return Response{}, &TooLargeError{What: "response", Size: size, Limit: limit}
	}
	status, err := strconv.Atoi(reply.Header.Get(hdrStatus))
	if err != nil {
		return Response{}, fmt.Errorf("fleet: node %q answered without a status", node)
	}
	resp := Response{Status: status, Header: http.Header{}, Body: reply.Data}
	for k, vs := range reply.Header {
		if name, ok := strings.CutPrefix(k, hdrHTTP); ok {
			resp.Header[http.CanonicalHeaderKey(name)] = vs
		}
	}
	return resp, nil
}
