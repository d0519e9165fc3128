// Package console is Blueline's web dashboard, served by the daemon under
// /dashboard/ on the API listener: the host's health, API keys,
// conversations with live updates, the outbox, webhooks and their
// deliveries, the sandbox, and the simulator.
//
// It has no rules of its own. Every read and write goes through the API's
// or the admin socket's handlers, in process, acting for the signed-in
// session (server.WithCaller): a session sees and may do exactly what a key
// of its owner with every scope may. Pages are html/template rendered on
// the server; one small script (static/console.js) adds live updates and
// copy buttons, and everything works without it.
package console

import (
	"context"
	"embed"
	"fmt"
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

	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/sse"
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
	// LinkTTL is how long a login link works (default 5 minutes).
	LinkTTL time.Duration
	Version string
	Started time.Time
	// Health are the daemon's readiness checks (workers, each line's
	// bridge); nil shows none.
	Health func(context.Context) []server.Check
	// TLS describes the certificates; nil when the API is plain HTTP.
	TLS func() string
	// StreamsPerSession is how many live chat streams one session may
	// hold open at once, StreamLifetime how long each lasts before the
	// browser reconnects: the API's limits for keys ([limits]
	// streams_per_key and stream_lifetime).
	StreamsPerSession int
	StreamLifetime    time.Duration
}

// Console serves the dashboard.
type Console struct {
	opts   Options
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	logins *loginLimiter
	now    func() time.Time
	closed chan struct{} // closed by Close: live streams end
	// streams counts each session's open live streams.
	streams *sse.Slots

	closeOnce  sync.Once
	mu         sync.RWMutex
	api, admin http.Handler // set by Connect
}

// New returns a console; Connect gives it the handlers it acts through.
func New(opts Options) (*Console, error) {
	if opts.LinkTTL == 0 {
		opts.LinkTTL = 5 * time.Minute
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, log: opts.Log, pages: pages, logins: newLoginLimiter(), now: time.Now,
		closed: make(chan struct{}), streams: sse.NewSlots(opts.StreamsPerSession)}
	c.mux = c.routes()
	return c, nil
}

// Connect gives the console the API's and the admin socket's handlers.
// They are built from the server the console is mounted in, hence after New.
func (c *Console) Connect(api, admin http.Handler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.api, c.admin = api, admin
}

// Close ends the live streams, so that the API's server can shut down
// without waiting for browsers to leave.
func (c *Console) Close() {
	c.closeOnce.Do(func() { close(c.closed) })
}

func (c *Console) handlers() (api, admin http.Handler) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.api, c.admin
}

func (c *Console) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /dashboard/static/{name}", c.static)
	m.HandleFunc("GET /dashboard/login", c.loginPage)
	m.HandleFunc("POST /dashboard/login", c.signIn)
	m.HandleFunc("POST /dashboard/logout", c.signedIn(c.logout))
	m.HandleFunc("GET /dashboard/{$}", c.signedIn(c.overview))
	m.HandleFunc("GET /dashboard/keys", c.signedIn(c.keys))
	m.HandleFunc("POST /dashboard/keys", c.signedIn(c.createKey))
	m.HandleFunc("POST /dashboard/keys/{id}/revoke", c.signedIn(c.revokeKey))
	m.HandleFunc("GET /dashboard/chats", c.signedIn(c.chats))
	m.HandleFunc("GET /dashboard/chats/{id}", c.signedIn(c.chat))
	m.HandleFunc("GET /dashboard/chats/{id}/live", c.signedIn(c.chatLive))
	m.HandleFunc("POST /dashboard/chats/{id}/reply", c.signedIn(c.reply))
	m.HandleFunc("GET /dashboard/outbox", c.signedIn(c.outbox))
	m.HandleFunc("GET /dashboard/webhooks", c.signedIn(c.webhooks))
	m.HandleFunc("POST /dashboard/webhooks", c.signedIn(c.createWebhook))
	m.HandleFunc("GET /dashboard/webhooks/{id}", c.signedIn(c.webhook))
	m.HandleFunc("POST /dashboard/webhooks/{id}/delete", c.signedIn(c.deleteWebhook))
	m.HandleFunc("POST /dashboard/webhooks/{id}/test", c.signedIn(c.testWebhook))
	m.HandleFunc("POST /dashboard/deliveries/{id}/redeliver", c.signedIn(c.redeliver))
	m.HandleFunc("GET /dashboard/sandbox", c.signedIn(c.sandbox))
	m.HandleFunc("POST /dashboard/sandbox", c.signedIn(c.startSandbox))
	m.HandleFunc("GET /dashboard/simulator", c.signedIn(c.simulator))
	m.HandleFunc("POST /dashboard/simulator/{what}", c.signedIn(c.simulate))
	m.HandleFunc("/dashboard/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", nil, page{Title: "Not found", Error: "There is no page " + r.URL.Path + "."})
	})
	return m
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
	c.mux.ServeHTTP(w, r)
}

var crossOrigin = http.NewCrossOriginProtection()

// staticPath is where the console's own script and style are served,
// and nothing else: not a file anyone uploads (those are at /files/).
const staticPath = "/dashboard/static/"

// static serves the embedded script and style, by their exact names only;
// they change only with the binary, so a browser may keep them for a day.
func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
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

func formatTime(ms int64) string {
	if ms == 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05 UTC")
}

func formatAgo(now time.Time, ms int64) string {
	if ms == 0 {
		return "never"
	}
	d := now.Sub(time.UnixMilli(ms)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
