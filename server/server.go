// Package server is Blueline's HTTP API: routing, authentication by API key
// and scope, line restrictions, the spec's error shape, pagination, CORS and
// rate limits. It also serves the local admin socket the CLI talks to.
package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/julienschmidt/httprouter"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/sse"
	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

// Options configure the server.
type Options struct {
	RequestsPerHour int   // per API key; 0 disables the limit
	MaxBodyBytes    int64 // largest JSON request body
	MaxAttempts     int   // delivery attempts per outbox item
	SandboxQuota    int   // sandbox sends per UTC day
	WebhookPolicy   webhook.Policy
	// Advanced reports whether a line's advanced features work right now
	// (a Messages line's need its helper connected); nil means as configured.
	Advanced func(storage.Line) bool
	// Capabilities says why each feature of a line cannot be used now
	// ("" when it can; see capabilities.go); nil, or a nil answer, means
	// by Advanced alone.
	Capabilities func(storage.Line) map[string]string
	// LineHealth is what a line's bridge has seen of its network (a
	// Messages line's chat.db); nil, or a nil answer, gives none.
	LineHealth func(storage.Line) *api.LineHealth
	// LineLatency is a line's latency over the last day; nil gives
	// nothing timed since the server's clock's now.
	LineLatency func(storage.Line) api.LineLatency
	// Availability asks a line's network whether a handle is reachable on
	// iMessage (GET /v1/availability); nil answers every handle as
	// reachable.
	Availability func(ctx context.Context, line storage.Line, handle string) (bool, error)
	// AvailabilityTTL is how long an availability answer is kept: 1 hour
	// when 0.
	AvailabilityTTL time.Duration
	// Now is the server's clock (edit and unsend windows, quotas); nil is
	// time.Now. Tests set it.
	Now func() time.Time
	// Guard is a line's Apple ID guard; nil means none (off, no caps) on
	// every line.
	Guard func(storage.Line) GuardPolicy
	// Ready lists readiness checks beyond the storage's for GET /readyz
	// (the workers, each line's bridge); nil means none.
	Ready func(context.Context) []api.Check
	// Metrics counts the API's requests; nil counts nothing.
	Metrics Metrics
	// BodyIdleTimeout cuts off a request body that stops arriving for
	// that long (see listener.BodyIdleTimeout); 0 never does.
	BodyIdleTimeout time.Duration
	// StreamsPerKey is how many event streams (GET /v1/events) one API
	// key may hold open at once ([limits] streams_per_key); more are
	// refused 429 too_many_streams.
	StreamsPerKey int
	// StreamLifetime is how long an event stream lasts before the server
	// ends it and the client resumes (Last-Event-ID): [limits]
	// stream_lifetime.
	StreamLifetime time.Duration
	// Search finds messages by their words (GET /v1/messages/search),
	// which answers 500 without it.
	Search Searcher
	// Events is where the event stream (GET /v1/events) reads; nil is the
	// daemon's own event log. In a fleet it is the fleet's events stream,
	// whose sequence is then the stream's position.
	Events EventLog
}

// Server serves the API.
type Server struct {
	db      *storage.DB
	files   FileStore
	opts    Options
	log     *slog.Logger
	limiter *limiter
	keyUse  *keyUse
	now     func() time.Time
	// availability keeps the networks' availability answers; lookups is
	// the guarded lines' budget of lookups that are not kept answers.
	availability *availabilityCache
	lookups      lookupBudget

	streams      *sse.Slots    // open event streams per key
	streamsDone  chan struct{} // closed by CloseStreams
	closeStreams sync.Once
}

// New returns a server over db and files.
func New(db *storage.DB, files FileStore, opts Options, log *slog.Logger) *Server {
	if opts.Advanced == nil {
		opts.Advanced = func(l storage.Line) bool { return l.AdvancedFeatures }
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	return &Server{db: db, files: files, opts: opts, log: log, limiter: newLimiter(opts.RequestsPerHour),
		keyUse: &keyUse{db: db, last: map[string]time.Time{}}, now: now, streamsDone: make(chan struct{}),
		streams: sse.NewSlots(opts.StreamsPerKey), availability: newAvailabilityCache(opts.AvailabilityTTL)}
}

// apiHandler handles an authenticated request; an error it returns is
// answered in the spec's shape.
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// Handler is the API with Middleware around it: what the admin socket,
// the console and MCP call in process.
func (s *Server) Handler() http.Handler { return s.Middleware(s.Routes()) }

// Routes is the API's router (/v1, signed downloads, health), with CORS,
// without Middleware: the daemon mounts it beside the console and MCP, all
// under one Middleware.
func (s *Server) Routes() http.Handler {
	router := httprouter.New()
	router.RedirectTrailingSlash = false
	router.RedirectFixedPath = false
	router.HandleOPTIONS = false // preflight is answered by cors below
	router.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, s.log, httpapi.NotFound("route_not_found", "", "No route %s %s.", r.Method, r.URL.Path))
	})
	router.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, s.log, httpapi.MethodNotAllowed(r.Method, r.URL.Path, w.Header().Get("Allow")))
	})
	router.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		httpapi.WriteError(w, r, s.log, fmt.Errorf("panic: %v", v))
	}
	s.routes(patternRouter{router})
	return cors(router)
}

// Middleware is what every request of the API's listener passes through:
// an ID, the access log, the request metrics, and a body cut off when it
// stops arriving (inside the ID, so that the cut is logged and counted as
// the 408 it is answered with).
func (s *Server) Middleware(next http.Handler) http.Handler {
	return s.withRequestID(listener.BodyIdleTimeout(next, s.opts.BodyIdleTimeout, s.bodyStalled), s.opts.Metrics)
}

// api wraps a handler with authentication, the rate limit and a scope check.
func (s *Server) api(scope string, h apiHandler) httprouter.Handle {
	return s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return s.serveAPI(w, r, scope, h)
	})
}

// handle adapts h to the router; an error it returns is answered in the
// spec's shape.
func (s *Server) handle(h apiHandler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		if err := h(w, r); err != nil {
			httpapi.WriteError(w, r, s.log, err)
		}
	}
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, scope string, h apiHandler) error {
	key, inProcess := inProcessCaller(r.Context())
	if !inProcess {
		var err error
		if key, err = s.authenticate(r); err != nil {
			return err
		}
		s.keyUse.touch(r.Context(), key, s.now())
	}
	if ok, wait := s.limiter.allow(key.ID, s.now()); !inProcess && !ok {
		return s.errRateLimited(wait)
	}
	if scope != anyScope && !hasScope(key, scope) {
		return errInsufficientScope(scope)
	}
	return h(w, r.WithContext(context.WithValue(r.Context(), apiKeyKey{}, key)))
}

func (s *Server) errRateLimited(wait time.Duration) *httpapi.Error {
	return httpapi.TooManyRequests("rate_limit_exceeded", httpapi.RetrySeconds(wait), "This API key made more than %d requests in the last hour.", s.opts.RequestsPerHour)
}

func errInsufficientScope(scope string) *httpapi.Error {
	return httpapi.Forbidden("insufficient_scope", "This API key lacks the %s scope.", scope)
}

// withRequestID gives each request an ID, logs it and, when m is set,
// counts it.
func (s *Server) withRequestID(next http.Handler, m Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := httpapi.NewRequestID()
		w.Header().Set("X-Request-Id", id)
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(httpapi.WithRequestID(r.Context(), id)))
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"duration", time.Since(start), "request_id", id)
		if m != nil {
			observe(m, sw, r, start)
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	route  string // the route's pattern, set by the handle (metrics)
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom lets a download reach the connection's ReadFrom (sendfile)
// instead of being copied through a small buffer.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) { return io.Copy(w.ResponseWriter, r) }

// corsPolicy is what browsers may do cross-origin on a part of the API.
// Keys travel in a header, never in cookies, so any origin may call.
type corsPolicy struct {
	expose, allowHeaders string
}

var apiCORS = corsPolicy{
	expose:       "X-Request-Id, Retry-After, Location, Idempotent-Replayed, Content-Disposition, Content-Range, WWW-Authenticate",
	allowHeaders: "Authorization, Content-Type, Idempotency-Key, X-Filename, Range",
}

// answer sets the CORS headers and answers a preflight (an OPTIONS
// request), reporting whether it did.
func (p corsPolicy) answer(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", p.expose)
	if r.Method != http.MethodOptions {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", p.allowHeaders)
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// cors lets browser apps call the API.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !apiCORS.answer(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}
