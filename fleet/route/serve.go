package route

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
)

// API is what the daemon hands over of the API.
type API struct {
	// Routes is the API's router without the listener's middleware
	// (server.Server.Routes): the request ID and the access log are the
	// entry's.
	Routes http.Handler
	// AsCaller makes requests made with ctx act as k (server.WithCaller).
	AsCaller func(ctx context.Context, k storage.Key) context.Context
	// Authenticate finds the key a request carries, without counting it
	// ((*server.Server).Authenticate).
	Authenticate func(r *http.Request) (storage.Key, error)
	// Files is the node's file store, for the files a message sent from
	// another node's line attaches (files.go); nil shares none.
	Files Files
}

// Headers a forwarded request carries besides the client's: the verified
// caller and the entry's request ID. Never taken from a client's request.
const (
	hdrCaller    = "Blueline-Fleet-Caller"
	hdrRequestID = "Blueline-Fleet-Request-Id"
)

// Forwarded are the client's headers a forwarded request keeps: what the
// API reads of a request besides its key. Authorization never travels.
var Forwarded = []string{
	"Content-Type", "Idempotency-Key", "X-Filename", "Accept",
	"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since",
}

// caller is the key record that travels with a forwarded request.
type caller struct {
	ID      string   `json:"id"`
	Label   string   `json:"label,omitempty"`
	Scopes  []string `json:"scopes"`
	LineIDs []string `json:"line_ids,omitempty"`
	Owner   string   `json:"owner,omitempty"`
	// Agent carries the agent rules (server's rule 9) to the line's node.
	Agent bool `json:"agent,omitempty"`
}

func callerOf(k storage.Key) caller {
	return caller{ID: k.ID, Label: k.Label, Scopes: k.Scopes, LineIDs: k.LineIDs, Owner: k.Owner, Agent: k.Agent}
}

func (c caller) key() storage.Key {
	return storage.Key{ID: c.ID, Label: c.Label, Scopes: c.Scopes, LineIDs: c.LineIDs, Owner: c.Owner, Agent: c.Agent}
}

// Serve answers the requests other nodes forward to node, through api, at
// most maxConcurrent at a time (0: fleet's default). Stop the returned
// server (or close the node) to stop.
func Serve(node *fleet.Node, api API, maxConcurrent int, log *slog.Logger) (*fleet.Server, error) {
	return node.Serve(serveHandler(api, node.MaxBody(), log), maxConcurrent)
}

func serveHandler(api API, limit int, log *slog.Logger) fleet.Handler {
	fetch := &http.Client{}
	return func(ctx context.Context, req fleet.Request) fleet.Response {
		ctx = httpapi.WithRequestID(ctx, req.Header.Get(hdrRequestID))
		if raw := req.Header.Get(hdrCaller); raw != "" {
			var c caller
			if err := json.Unmarshal([]byte(raw), &c); err != nil || c.ID == "" {
				log.Warn("fleet: a forwarded request's caller is unreadable", "path", req.Path, "err", err)
				return fleet.Response{Status: http.StatusInternalServerError}
			}
			ctx = api.AsCaller(ctx, c.key())
		}
		adoptFiles(ctx, api.Files, fetch, req.Header, log)
		target := req.Path
		if req.Query != "" {
			target += "?" + req.Query
		}
		r, err := http.NewRequestWithContext(ctx, req.Method, target, bytes.NewReader(req.Body))
		if err != nil {
			return fleet.Response{Status: http.StatusBadRequest}
		}
		for _, h := range Forwarded {
			if vs := req.Header.Values(h); len(vs) > 0 {
				r.Header[h] = vs
			}
		}
		r.ContentLength = int64(len(req.Body))
		r.RemoteAddr = "fleet"
		rec := &recorder{header: http.Header{}, limit: limit}
		api.Routes.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		log.Debug("fleet: forwarded request", "method", req.Method, "path", req.Path, "status", rec.status,
			"request_id", req.Header.Get(hdrRequestID))
		return fleet.Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
	}
}

// recorder keeps a response, up to limit+1 bytes of body: one over limit is
// too large to forward (fleet refuses it), and the handler's writes fail
// from there so that it stops (a large download is not read to its end).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if room := r.limit + 1 - r.body.Len(); len(p) > room {
		r.body.Write(p[:max(room, 0)])
		return max(room, 0), errTooLarge
	}
	return r.body.Write(p)
}

func (r *recorder) Flush() {}

var errTooLarge = &fleet.TooLargeError{What: "response"}

// requestHeader is what a forwarded request carries of r: the headers of
// Forwarded, the caller's key record (when one is given) and the request ID.
func requestHeader(r *http.Request, k *storage.Key) http.Header {
	h := http.Header{}
	for _, name := range Forwarded {
		if vs := r.Header.Values(name); len(vs) > 0 {
			h[name] = vs
		}
	}
	if k != nil {
		b, _ := json.Marshal(callerOf(*k))
		h.Set(hdrCaller, string(b))
	}
	h.Set(hdrRequestID, httpapi.RequestID(r.Context()))
	return h
}

// hopHeaders are response headers not copied from a forwarded answer: the
// entry's own, or the connection's.
func hopHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "X-Request-Id", "Content-Length", "Connection", "Transfer-Encoding":
		return true
	}
	return strings.HasPrefix(name, "Blueline-Fleet-")
}
