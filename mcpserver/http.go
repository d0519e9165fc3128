package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
)

// Path is where the API's listener serves MCP.
const Path = "/mcp"

// inProcessBase is the base URL of the in-process API: never dialled.
const inProcessBase = "http://blueline.in-process"

// HandlerOptions configure the streamable HTTP endpoint.
type HandlerOptions struct {
	// API is the API's HTTP handler, which every tool call is served by,
	// in process (required).
	API http.Handler
	// AllowPrivateURLs, RequestsPerHour, SandboxQuota and Version are as
	// in Options.
	AllowPrivateURLs bool
	RequestsPerHour  int
	SandboxQuota     int
	Version          string
	// MaxBodyBytes bounds an MCP request's body; 0 is the SDK's default.
	MaxBodyBytes int64
	Log          *slog.Logger
	// CheckKey tells whether the key of an Authorization header's value
	// may make API requests that need scopes now (Options.Check); nil
	// checks nothing first.
	CheckKey func(ctx context.Context, authorization string, scopes ...string) error
}

// Handler serves MCP over streamable HTTP. It expects requests that were
// authenticated already (server.Server mounts it behind the key check):
// each tool call acts as the request's own bearer key, through the API, so
// the key's scopes, lines, rate limit and quotas hold exactly as for a
// direct API call. It is stateless: no session outlives its request, a
// session cannot be taken over with another key, and nothing is kept per
// client. Local file paths are never attached over HTTP (the files are the
// daemon host's, not the agent's).
type Handler struct {
	h         http.Handler
	done      chan struct{}
	closeOnce sync.Once
}

// NewHandler returns the endpoint.
func NewHandler(opts HandlerOptions) *Handler {
	h := &Handler{done: make(chan struct{})}
	rt := InProcess(opts.API)
	hc := &http.Client{Transport: rt}
	var check func(ctx context.Context, req *mcp.CallToolRequest, scopes ...string) error
	if opts.CheckKey != nil {
		check = func(ctx context.Context, req *mcp.CallToolRequest, scopes ...string) error {
			var authorization string
			if req.Extra != nil && req.Extra.Header != nil {
				authorization = req.Extra.Header.Get("Authorization")
			}
			return opts.CheckKey(ctx, authorization, scopes...)
		}
	}
	srv := New(Options{
		Client: func(extra *mcp.RequestExtra) (*client.Client, error) {
			key := ""
			if extra != nil && extra.Header != nil {
				_, key, _ = strings.Cut(extra.Header.Get("Authorization"), " ")
			}
			if key == "" {
				return nil, errors.New("no API key: send Authorization: Bearer sk_live_…")
			}
			return client.New(inProcessBase, client.WithAPIKey(strings.TrimSpace(key)), client.WithHTTPClient(hc),
				client.WithUserAgent("blueline-mcp/"+opts.Version)), nil
		},
		Check:            check,
		AllowPrivateURLs: opts.AllowPrivateURLs,
		RequestsPerHour:  opts.RequestsPerHour,
		SandboxQuota:     opts.SandboxQuota,
		Version:          opts.Version,
		Done:             h.done,
	})
	h.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// Every request carries its bearer key, which a page that rebinds
		// a name to loopback cannot have; refusing Host names other than
		// localhost would break a reverse proxy in front of the daemon.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        opts.MaxBodyBytes,
		Logger:                     opts.Log,
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// Close ends the waits in progress (each answers that Blueline is shutting
// down), so that the API's server can shut down without waiting for them.
func (h *Handler) Close() { h.closeOnce.Do(func() { close(h.done) }) }

// InProcess is an http.RoundTripper that serves requests with h in this
// process, without a network hop. The answer streams: its body is read as
// the handler writes it (an event stream included), and closing it ends
// the handler's request.
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	r := req.Clone(ctx)
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "in-process"
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				pw.CloseWithError(fmt.Errorf("in-process handler panicked: %v", v))
				w.writeHeader(http.StatusInternalServerError)
				return
			}
			w.writeHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &pipeBody{PipeReader: pr, cancel: cancel}, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the handler's ResponseWriter: the header is sent when the
// handler writes it (or its first byte), the body through a pipe, each
// write handed to the reader as it comes (so Flush has nothing to do).
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header // the header as it was when sent
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational answers are not passed on
	}
	w.writeHeader(code)
}

func (w *pipeWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush lets handlers that flush (event streams) run: writes are never
// buffered here.
func (w *pipeWriter) Flush() { w.writeHeader(http.StatusOK) }

// pipeBody is the answer's body: closing it ends the handler's request.
type pipeBody struct {
	*io.PipeReader
	cancel func()
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(errors.New("in-process answer closed"))
}
