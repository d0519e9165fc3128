package route

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
)

// NotHereCodes are the codes of the API's 404s that say what the request
// names is not on this node: it may be on another.
var NotHereCodes = []string{"line_not_found", "chat_not_found", "message_not_found", "outbox_item_not_found", "file_not_found", "webhook_not_found"}

// notHere reports whether an answer says what the request names is not on
// the node that answered: a "not here" 404, or for a signed download URL
// a 403 download_url_invalid (each node signs its own files' URLs).
func notHere(kind, status int, body []byte) bool {
	code, _ := errorCode(body)
	switch status {
	case http.StatusNotFound:
		return slices.Contains(NotHereCodes, code)
	case http.StatusForbidden:
		return kind == kindDownload && code == "download_url_invalid"
	}
	return false
}

// kinds of routed requests.
const (
	kindLine     = iota + 1 // a line, or an ID of a line's
	kindLines               // GET /v1/lines: merged
	kindDownload            // a signed download URL: forwarded, or redirected when large
)

// routed are the line-scoped routes, by "METHOD path".
var routed = map[string]int{
	"GET /v1/lines":                kindLines,
	"GET /v1/chats":                kindLine,
	"GET /v1/messages":             kindLine,
	"POST /v1/messages":            kindLine,
	"POST /v1/audio-messages":      kindLine,
	"POST /v1/voice-notes":         kindLine,
	"GET /v1/reactions":            kindLine,
	"POST /v1/reactions":           kindLine,
	"GET /v1/typing":               kindLine,
	"POST /v1/typing":              kindLine,
	"GET /v1/receipts":             kindLine,
	"POST /v1/receipts":            kindLine,
	"GET /v1/outbox":               kindLine,
	"POST /v1/outbox/cancel":       kindLine,
	"POST /v1/edits":               kindLine,
	"POST /v1/unsends":             kindLine,
	"POST /v1/groups":              kindLine,
	"POST /v1/groups/rename":       kindLine,
	"POST /v1/groups/participants": kindLine,
	"POST /v1/groups/leave":        kindLine,
	"GET /v1/availability":         kindLine,
	"GET /v1/files":                kindLine, // a file's metadata: redirects to its signed URL
	// A webhook is made, listed and deleted on its line's node, which
	// shares it through the control plane with every node.
	"GET /v1/webhooks":    kindLine,
	"POST /v1/webhooks":   kindLine,
	"DELETE /v1/webhooks": kindLine,
	"GET /files/":         kindDownload,
	"HEAD /files/":        kindDownload,
}

// Routed reports whether r is a request the entry may send to another
// node.
func Routed(r *http.Request) bool { return kindOf(r) != 0 }

func kindOf(r *http.Request) int {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/files/"); ok && rest != "" && !strings.Contains(rest, "/") {
		p = "/files/"
	}
	return routed[r.Method+" "+p]
}

// EntryOptions configure an Entry.
type EntryOptions struct {
	Node      *fleet.Node
	Directory *fleet.Directory
	API       API
	Log       *slog.Logger
	// RetryAfter is the Retry-After of a 503 line_unavailable. Default 5s.
	RetryAfter time.Duration
	// ReadTimeout bounds a forwarded GET or HEAD, WriteTimeout a forwarded
	// POST (the forwarding budget). Defaults 10s and 25s.
	ReadTimeout, WriteTimeout time.Duration
	// Observe, when set, records each forward: the node, the outcome
	// ("answered", "down", "timeout", "too_large", "failed") and its
	// duration.
	Observe func(node, outcome string, d time.Duration)
}

// Entry is the entry side: it sends the line-scoped requests this node
// receives to the node of their line.
type Entry struct {
	o EntryOptions

	mu      sync.Mutex // one directory read at a time
	entries []fleet.LineEntry
	read    time.Time
}

// directoryCache is how long the directory, as last read, is used: a
// fraction of its TTL (a down node is told by Forward at once, or by
// UpdatedAt), so that a burst of routed requests reads KV once.
const directoryCache = time.Second

// directory reads the directory, or returns it as read less than
// directoryCache ago.
func (e *Entry) directory(ctx context.Context) ([]fleet.LineEntry, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.entries != nil && time.Since(e.read) < directoryCache {
		return e.entries, nil
	}
	entries, err := e.o.Directory.Lines(ctx)
	if err != nil {
		return nil, err
	}
	e.entries, e.read = entries, time.Now()
	return entries, nil
}

// NewEntry returns the entry side of node.
func NewEntry(o EntryOptions) *Entry {
	if o.RetryAfter <= 0 {
		o.RetryAfter = 5 * time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 10 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 25 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Entry{o: o}
}

// Handler serves the routed requests through next (the API's router) and
// the fleet; every other request goes to next alone.
func (e *Entry) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := kindOf(r)
		if kind == 0 {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := e.keepBody(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if kind == kindLines {
			e.lines(w, r, next)
			return
		}
		d := &decider{w: w, header: w.Header().Clone(), holdForbidden: kind == kindDownload}
		next.ServeHTTP(d, r)
		if !d.held {
			return
		}
		local := d.local()
		if !notHere(kind, local.Status, local.Body) {
			e.answer(w, local)
			return
		}
		code, param := errorCode(local.Body)
		e.elsewhere(w, r, body, kind, code, param, local)
	})
}

// keepBody reads r's body, when it fits in a forwarded request, and puts a
// copy back for the local API. ok is false when it does not (the request
// is answered locally, its body unread here).
func (e *Entry) keepBody(r *http.Request) (_ []byte, ok bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	limit := e.o.Node.MaxBody()
	b, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil || len(b) > limit {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), errReader{err}, r.Body), r.Body}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, true
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err == nil {
		return 0, io.EOF
	}
	return 0, r.err
}

// elsewhere answers a request the local API answered with a "not here"
// 404 (local): from the node of the line it names, else from the first
// other node that has what it names.
func (e *Entry) elsewhere(w http.ResponseWriter, r *http.Request, body []byte, kind int, code, param string, local fleet.Response) {
	for k, vs := range local.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			w.Header()[k] = vs
		}
	}
	var key *storage.Key
	if kind != kindDownload { // a download URL is its own credential
		k, err := e.o.API.Authenticate(r)
		if err != nil { // revoked in between: the local answer stands
			e.answer(w, local)
			return
		}
		key = &k
	}
	entries, err := e.directory(r.Context())
	if err != nil {
		e.o.Log.Warn("fleet: reading the line directory", "err", err)
		e.answer(w, local)
		return
	}
	req := fleet.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: requestHeader(r, key), Body: body}
	if r.Method == http.MethodPost {
		shareFiles(r.Context(), e.o.API.Files, req.Header, body)
	}

	if named := lineNamed(r, body, code, param); named != "" {
		// The request names a line: its node answers, or this one when
		// the line is here or nowhere (what it names is not on it).
		ent, ok := findLine(entries, named)
		if !ok || ent.Node == e.o.Node.Name() {
			e.answer(w, local)
			return
		}
		if !e.o.Directory.Up(ent) {
			e.unavailable(w, r, []fleet.LineEntry{ent})
			return
		}
		resp, err := e.forward(r, ent.Node, req)
		switch {
		case err == nil:
			e.answer(w, resp)
		case errors.Is(err, fleet.ErrNodeDown):
			e.unavailable(w, r, []fleet.LineEntry{ent})
		default:
			e.failed(w, r, ent.Node, err)
		}
		return
	}
	// An ID alone: ask each other node in turn.
	var down []fleet.LineEntry
	for _, node := range otherNodes(entries, e.o.Node.Name()) {
		lines := linesOf(entries, node)
		if !anyUp(e.o.Directory, lines) {
			down = append(down, lines...)
			continue
		}
		resp, err := e.forward(r, node, req)
		switch {
		case err == nil:
			if notHere(kind, resp.Status, resp.Body) {
				continue
			}
			e.answer(w, resp)
			return
		case errors.Is(err, fleet.ErrNodeDown):
			down = append(down, lines...)
		case errors.Is(err, fleet.ErrTooLarge) && kind == kindDownload:
			e.redirect(w, r, lines)
			return
		case errors.Is(err, fleet.ErrTimeout) && r.Method != http.MethodPost:
			down = append(down, lines...)
		default:
			e.failed(w, r, node, err)
			return
		}
	}
	if len(down) > 0 {
		e.unavailable(w, r, down)
		return
	}
	e.answer(w, local)
}

// forward sends req to node within the forwarding budget.
func (e *Entry) forward(r *http.Request, node string, req fleet.Request) (fleet.Response, error) {
	budget := e.o.ReadTimeout
	if r.Method == http.MethodPost {
		budget = e.o.WriteTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), budget)
	defer cancel()
	start := time.Now()
	resp, err := e.o.Node.Forward(ctx, node, req)
	if e.o.Observe != nil {
		outcome := "answered"
		switch {
		case err == nil:
		case errors.Is(err, fleet.ErrNodeDown):
			outcome = "down"
		case errors.Is(err, fleet.ErrTimeout):
			outcome = "timeout"
		case errors.Is(err, fleet.ErrTooLarge):
			outcome = "too_large"
		default:
			outcome = "failed"
		}
		e.o.Observe(node, outcome, time.Since(start))
	}
	return resp, err
}

// answer writes resp to w, over the entry's own headers.
func (e *Entry) answer(w http.ResponseWriter, resp fleet.Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		if !hopHeader(k) {
			h[k] = vs
		}
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// unavailable answers 503 line_unavailable for lines whose node is down.
func (e *Entry) unavailable(w http.ResponseWriter, r *http.Request, lines []fleet.LineEntry) {
	var handles, nodes []string
	for _, l := range lines {
		if !slices.Contains(handles, l.Handle) {
			handles = append(handles, l.Handle)
		}
		if !slices.Contains(nodes, l.Node) {
			nodes = append(nodes, l.Node)
		}
	}
	err := httpapi.Unavailable("line_unavailable",
		"Line %s is on node %s of the fleet, which is not answering now; nothing was done. Try again later.",
		strings.Join(handles, ", "), strings.Join(nodes, ", "))
	if len(handles) > 1 {
		err = httpapi.Unavailable("line_unavailable",
			"What this request names may be on lines %s (nodes %s of the fleet), which are not answering now; nothing was done. Try again later.",
			strings.Join(handles, ", "), strings.Join(nodes, ", "))
	}
	err.RetryAfter = httpapi.RetrySeconds(e.o.RetryAfter)
	httpapi.WriteError(w, r, e.o.Log, err)
}

// failed answers a forward that did not come back: a POST that timed out
// is 504 outcome_unknown (never retried elsewhere), anything else 503.
func (e *Entry) failed(w http.ResponseWriter, r *http.Request, node string, err error) {
	e.o.Log.Warn("fleet: forwarding a request", "method", r.Method, "path", r.URL.Path, "node", node,
		"request_id", httpapi.RequestID(r.Context()), "err", err)
	if errors.Is(err, fleet.ErrTimeout) {
		if r.Method == http.MethodPost {
			msg := "Node %s of the fleet, which serves this request's line, did not answer in time: the request may or may not have been done (request %s). Check before sending it again"
			if r.Header.Get("Idempotency-Key") != "" {
				msg += ", or send it again with the same Idempotency-Key"
			}
			httpapi.WriteError(w, r, e.o.Log, &httpapi.Error{Status: http.StatusGatewayTimeout, Type: "api_error", Code: "outcome_unknown",
				Message: fmt.Sprintf(msg+".", node, httpapi.RequestID(r.Context()))})
			return
		}
		e.unavailable(w, r, []fleet.LineEntry{{Node: node, Handle: "of node " + node}})
		return
	}
	if errors.Is(err, fleet.ErrTooLarge) {
		httpapi.WriteError(w, r, e.o.Log, httpapi.Unavailable("response_too_large",
			"The answer of node %s of the fleet is too large to forward; ask that node.", node))
		return
	}
	if r.Context().Err() != nil {
		return // the client left
	}
	httpapi.WriteError(w, r, e.o.Log, err)
}

// redirect answers a download too large to forward with the owning node's
// public URL.
func (e *Entry) redirect(w http.ResponseWriter, r *http.Request, lines []fleet.LineEntry) {
	for _, l := range lines {
		if l.BaseURL != "" {
			http.Redirect(w, r, strings.TrimSuffix(l.BaseURL, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			return
		}
	}
	httpapi.WriteError(w, r, e.o.Log, httpapi.Unavailable("response_too_large",
		"The file is stored on another node of the fleet, too large to forward, and that node has no public URL to redirect to."))
}

// errorCode reads the code and param of an API error body.
func errorCode(body []byte) (code, param string) {
	var b struct {
		Error struct {
			Code  string `json:"code"`
			Param string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return "", ""
	}
	return b.Error.Code, b.Error.Param
}

// lineParams are where a request names its line.
var lineParams = []string{"from", "line", "line_id"}

// namedLine is the value of the parameter param of r (query, then JSON
// body); "" when it has none.
func namedLine(r *http.Request, body []byte, param string) string {
	if param == "" {
		return ""
	}
	if v := r.URL.Query().Get(param); v != "" {
		return v
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	var v string
	json.Unmarshal(fields[param], &v)
	return v
}

// lineNamed is the line r names: the parameter a line_not_found names,
// else the first of lineParams it has; "" for none.
func lineNamed(r *http.Request, body []byte, code, param string) string {
	if code == "line_not_found" {
		if v := namedLine(r, body, param); v != "" {
			return v
		}
	}
	for _, p := range lineParams {
		if v := namedLine(r, body, p); v != "" {
			return v
		}
	}
	return ""
}

// findLine finds the entry of a line named by its ln_ ID or its handle.
func findLine(entries []fleet.LineEntry, named string) (fleet.LineEntry, bool) {
	if named == "" {
		return fleet.LineEntry{}, false
	}
	match := func(l fleet.LineEntry) bool { return l.Line == named }
	if !strings.HasPrefix(named, "ln_") {
		h, err := handle.Normalize(named)
		if err != nil {
			return fleet.LineEntry{}, false
		}
		match = func(l fleet.LineEntry) bool { return l.Handle == h }
	}
	i := slices.IndexFunc(entries, match)
	if i < 0 {
		return fleet.LineEntry{}, false
	}
	return entries[i], true
}

// otherNodes are the nodes of the directory but self, by name.
func otherNodes(entries []fleet.LineEntry, self string) []string {
	var out []string
	for _, l := range entries {
		if l.Node != self && !slices.Contains(out, l.Node) {
			out = append(out, l.Node)
		}
	}
	slices.Sort(out)
	return out
}

func linesOf(entries []fleet.LineEntry, node string) []fleet.LineEntry {
	var out []fleet.LineEntry
	for _, l := range entries {
		if l.Node == node {
			out = append(out, l)
		}
	}
	return out
}

// anyUp reports whether a node refreshed any of its lines within the TTL.
func anyUp(d *fleet.Directory, lines []fleet.LineEntry) bool {
	return slices.ContainsFunc(lines, d.Up)
}

// decider passes the local API's answer through, unless it is a 404: that
// one is held, to be answered from elsewhere.
type decider struct {
	w      http.ResponseWriter
	header http.Header
	status int
	hold   bool // hold every answer, not only a 404
	// holdForbidden holds a 403 too.
	holdForbidden bool
	held          bool
	body          bytes.Buffer
}

func (d *decider) Header() http.Header { return d.header }

func (d *decider) WriteHeader(code int) {
	if d.status != 0 {
		return
	}
	d.status = code
	if d.hold || code == http.StatusNotFound || d.holdForbidden && code == http.StatusForbidden {
		d.held = true
		return
	}
	h := d.w.Header()
	for k, vs := range d.header {
		h[k] = vs
	}
	d.w.WriteHeader(code)
}

func (d *decider) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	if d.held {
		return d.body.Write(p)
	}
	return d.w.Write(p)
}

func (d *decider) Flush() {
	if !d.held && d.status != 0 {
		http.NewResponseController(d.w).Flush()
	}
}

func (d *decider) Unwrap() http.ResponseWriter { return d.w }

// local is the held answer.
func (d *decider) local() fleet.Response {
	return fleet.Response{Status: d.status, Header: d.header, Body: d.body.Bytes()}
}
