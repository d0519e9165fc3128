// Package console is Blueline's web dashboard, served by the daemon under
// /dashboard/ on the API listener: the host's health, API keys,
// conversations with live updates, the outbox, webhooks and their
// deliveries, the sandbox, and the simulator.
//
// It has no rules of its own. Every read and write goes through the API's
// or the admin socket's handlers, in process, acting for the signed-in
// session (server.WithCaller): a session sees and may do exactly what a key
// of its owner with every scope may. Pages are html/template rendered on
// the server; one small script (static/console.js) adds live updates, copy
// buttons and local times, and everything works without it.
package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/sse"
	"github.com/blueline-app/blueline/storage"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the console.
type Options struct {
	DB  *storage.DB
	Log *slog.Logger
	// BaseURL is the API's public base URL, which login links start with;
	// an https:// one means browsers reach the console over HTTPS.
	BaseURL string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For or
	// Forwarded header names the client; none when empty.
	TrustedProxies []netip.Prefix
	SessionTTL     time.Duration
	Version        string
	Started        time.Time
	// Health are the daemon's readiness checks (workers, each line's
	// bridge); nil shows none.
	Health func(context.Context) []api.Check
	// TLS describes the certificates; nil when the API is plain HTTP.
	TLS func() string
	// API and Admin are the API's handler and the admin socket's, which
	// the console's pages act through, in process.
	API, Admin http.Handler
	// StreamsPerSession is how many live chat streams one session may
	// hold open at once, StreamLifetime how long each lasts before the
	// browser reconnects: the API's limits for keys ([limits]
	// streams_per_key and stream_lifetime).
	StreamsPerSession int
	StreamLifetime    time.Duration
	// Dev is `serve --dev`, which every page shows in a banner: webhooks
	// may reach this machine's own networks.
	Dev bool
}

// Console serves the dashboard.
type Console struct {
	opts   Options
	log    *slog.Logger
	pages  map[string]*template.Template
	router *httprouter.Router
	logins *loginLimiter
	now    func() time.Time
	closed chan struct{} // closed by Close: live streams end
	// streams counts each session's open live streams.
	streams *sse.Slots

	closeOnce sync.Once
}

// New returns a console.
func New(opts Options) (*Console, error) {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, log: opts.Log, pages: pages, logins: newLoginLimiter(), now: time.Now,
		closed: make(chan struct{}), streams: sse.NewSlots(opts.StreamsPerSession)}
	c.router = c.routes()
	return c, nil
}

// Close ends the live streams, so that the API's server can shut down
// without waiting for browsers to leave.
func (c *Console) Close() {
	c.closeOnce.Do(func() { close(c.closed) })
}

func (c *Console) routes() *httprouter.Router {
	r := httprouter.New()
	// Unknown paths are pages that do not exist, not paths to correct.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// A page's GET answers HEAD too, as net/http's patterns did.
	get := func(path string, h http.HandlerFunc) {
		r.HandlerFunc(http.MethodGet, path, h)
		r.HandlerFunc(http.MethodHead, path, h)
	}
	get("/dashboard/static/:name", c.static)
	get("/dashboard/login", c.loginPage)
	r.HandlerFunc(http.MethodPost, "/dashboard/login", c.signIn)
	r.HandlerFunc(http.MethodPost, "/dashboard/logout", c.signedIn(c.logout))
	get("/dashboard/", c.signedIn(c.overview))
	get("/dashboard/keys", c.signedIn(c.keys))
	r.HandlerFunc(http.MethodPost, "/dashboard/keys", c.signedIn(c.createKey))
	r.HandlerFunc(http.MethodPost, "/dashboard/keys/:id/revoke", c.signedIn(c.revokeKey))
	get("/dashboard/chats", c.signedIn(c.chats))
	get("/dashboard/chats/:id", c.signedIn(c.chat))
	get("/dashboard/chats/:id/live", c.signedIn(c.chatLive))
	r.HandlerFunc(http.MethodPost, "/dashboard/chats/:id/reply", c.signedIn(c.reply))
	r.HandlerFunc(http.MethodPost, "/dashboard/chats/:id/resume", c.signedIn(c.resumeAgents))
	get("/dashboard/outbox", c.signedIn(c.outbox))
	get("/dashboard/approvals", c.signedIn(c.approvals))
	r.HandlerFunc(http.MethodPost, "/dashboard/approvals/:id/approve", c.signedIn(c.answerDraft(true)))
	r.HandlerFunc(http.MethodPost, "/dashboard/approvals/:id/decline", c.signedIn(c.answerDraft(false)))
	get("/dashboard/webhooks", c.signedIn(c.webhooks))
	r.HandlerFunc(http.MethodPost, "/dashboard/webhooks", c.signedIn(c.createWebhook))
	get("/dashboard/webhooks/:id", c.signedIn(c.webhook))
	r.HandlerFunc(http.MethodPost, "/dashboard/webhooks/:id/delete", c.signedIn(c.deleteWebhook))
	r.HandlerFunc(http.MethodPost, "/dashboard/webhooks/:id/test", c.signedIn(c.testWebhook))
	r.HandlerFunc(http.MethodPost, "/dashboard/deliveries/:id/redeliver", c.signedIn(c.redeliver))
	get("/dashboard/blocked", c.signedIn(c.blocked))
	r.HandlerFunc(http.MethodPost, "/dashboard/blocked", c.signedIn(c.blockContact))
	r.HandlerFunc(http.MethodPost, "/dashboard/blocked/remove", c.signedIn(c.unblockContact))
	get("/dashboard/sandbox", c.signedIn(c.sandbox))
	r.HandlerFunc(http.MethodPost, "/dashboard/sandbox", c.signedIn(c.startSandbox))
	get("/dashboard/simulator", c.signedIn(c.simulator))
	r.HandlerFunc(http.MethodPost, "/dashboard/simulator/:what", c.signedIn(c.simulate))
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", nil, page{Title: "Not found", Error: "There is no page " + r.URL.Path + "."})
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusMethodNotAllowed, "error", nil, page{Title: "Not allowed", Error: r.Method + " is not allowed on " + r.URL.Path + "."})
	})
	return r
}

// pathValue is the value of the route's :name segment.
func pathValue(r *http.Request, name string) string {
	return httprouter.ParamsFromContext(r.Context()).ByName(name)
}

// ServeHTTP serves the dashboard with its security headers. State-changing
// requests must come from the dashboard's own pages: Go's cross-origin
// protection refuses others before any handler runs, and each form also
// carries the session's CSRF token.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", c.contentSecurityPolicy(r))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == "/dashboard" {
		http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
		return
	}
	if err := crossOrigin.Check(r); err != nil {
		c.render(w, r, http.StatusForbidden, "error", nil, page{Title: "Refused", Error: "This request did not come from the dashboard's own pages."})
		return
	}
	c.router.ServeHTTP(w, r)
}

var crossOrigin = http.NewCrossOriginProtection()

// staticPath is where the console's own script and style are served,
// and nothing else: not a file anyone uploads (those are at /files/).
const staticPath = "/dashboard/static/"

// static serves the embedded script and style, by their exact names only;
// they change only with the binary, so a browser may keep them for a day.
func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	name := pathValue(r, "name")
	if name != "console.js" && name != "console.css" {
		c.render(w, r, http.StatusNotFound, "error", nil, page{Title: "Not found", Error: "There is no page " + r.URL.Path + "."})
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=86400")
	static, _ := fs.Sub(staticFS, "static")
	http.ServeFileFS(w, r, static, name)
}

// contentSecurityPolicy is the pages' policy. Scripts and styles may come
// from the console's two files only, named by their full URLs: 'self'
// would also admit anything else the origin serves, an uploaded file's
// download among them. The origin is the one the browser asked (its Host)
// and the public URL's, for a proxy that passes another Host on.
func (c *Console) contentSecurityPolicy(r *http.Request) string {
	var origins []string
	if validHost.MatchString(r.Host) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		origins = append(origins, scheme+"://"+strings.ToLower(r.Host))
	}
	if u, err := url.Parse(c.opts.BaseURL); err == nil && validHost.MatchString(u.Host) {
		if o := u.Scheme + "://" + strings.ToLower(u.Host); !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	sources := func(file string) string {
		var out []string
		for _, o := range origins {
			out = append(out, o+staticPath+file)
		}
		if out == nil {
			return "'none'"
		}
		return strings.Join(out, " ")
	}
	return "default-src 'none'; script-src " + sources("console.js") + "; style-src " + sources("console.css") +
		"; img-src 'self' data:; media-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

// validHost is a Host that can be written into the policy as it is: a
// name or an address, with a port or not. net/http lets through a few
// characters (";", ",", "'") that would change the policy's meaning.
var validHost = regexp.MustCompile(`^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// formatTime shows a time the same way on every page: a <time> element
// that the script rewrites in the browser's local time, with the UTC time
// it holds on hover (its title) and, without the script, as its text.
func formatTime(ms int64) template.HTML {
	if ms == 0 {
		return "—"
	}
	t := time.UnixMilli(ms).UTC()
	utc := t.Format("2006-01-02 15:04:05 UTC")
	return template.HTML(`<time datetime="` + t.Format("2006-01-02T15:04:05.000Z") + `" title="` + utc + `">` + utc + `</time>`)
}
