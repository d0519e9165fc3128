package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

const cookieName = "blueline_session"

// token returns 32 random bytes, URL-safe: login links and session cookies.
func token() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenHash(t string) []byte {
	sum := sha256.Sum256([]byte(t))
	return sum[:]
}

// SignIns hands out the ways into the console: one-time login links and
// the password. The admin socket gives them out (admin.Dashboard); the
// console checks them when a browser signs in.
type SignIns struct {
	db      *storage.DB
	baseURL string
	linkTTL time.Duration
}

// LinkTTL is how long a login link works.
const LinkTTL = 5 * time.Minute

// NewSignIns makes the console's sign-ins over db; links start with
// baseURL, the API's public base URL.
func NewSignIns(db *storage.DB, baseURL string) *SignIns {
	return &SignIns{db: db, baseURL: baseURL, linkTTL: LinkTTL}
}

// LoginLink returns a one-time link that signs its opener in as owner.
func (c *SignIns) LoginLink(ctx context.Context, owner string) (string, int64, error) {
	t := token()
	expires := time.Now().Add(c.linkTTL).UnixMilli()
	if err := c.db.CreateLoginLink(ctx, tokenHash(t), owner, expires); err != nil {
		return "", 0, err
	}
	// The token rides in the query, never the path: request logs carry
	// paths, not queries.
	return strings.TrimSuffix(c.baseURL, "/") + "/dashboard/login?token=" + url.QueryEscape(t), expires, nil
}

// SetPassword stores the password's bcrypt hash; "" removes it.
func (c *SignIns) SetPassword(ctx context.Context, password string) error {
	if password == "" {
		return c.db.SetConsolePassword(ctx, nil)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash the dashboard password: %w", err)
	}
	return c.db.SetConsolePassword(ctx, hash)
}

type sessionKey struct{}

func currentSession(ctx context.Context) storage.Session {
	s, _ := ctx.Value(sessionKey{}).(storage.Session)
	return s
}

// caller is the API key a session acts as: every scope, every line, and
// the session's owner, so that the API's owner and line rules apply.
func caller(s storage.Session) storage.Key {
	return storage.Key{ID: s.ID, Label: "dashboard", Scopes: api.Scopes, Owner: s.Owner}
}

// signedIn lets a request through with a valid session (and, for a POST,
// the session's CSRF token); others go to the login page.
func (c *Console) signedIn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.session(r)
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusUnauthorized, "error", nil, page{Title: "Signed out", Error: "Your session has ended: sign in again."})
			return
		}
		listener.Authenticated(r)
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.CSRF)) != 1 {
				c.render(w, r, http.StatusForbidden, "error", &s, page{Title: "Refused", Error: "The form's security token is missing or stale: reload the page and try again."})
				return
			}
		}
		ctx := context.WithValue(r.Context(), sessionKey{}, s)
		h(w, r.WithContext(server.WithCaller(ctx, caller(s))))
	}
}

func (c *Console) session(r *http.Request) (storage.Session, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" || len(ck.Value) > 100 {
		return storage.Session{}, false
	}
	s, err := c.opts.DB.SessionByHash(r.Context(), tokenHash(ck.Value), c.now().UnixMilli())
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			c.log.Error("dashboard session lookup", "err", err)
		}
		return storage.Session{}, false
	}
	return s, true
}

// startSession creates a session and sets its cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, owner, via string) error {
	t := token()
	now := c.now()
	s := storage.Session{ID: storage.NewID("ses_"), Owner: owner, CSRF: token(), Via: via,
		CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(c.opts.SessionTTL).UnixMilli()}
	if err := c.opts.DB.CreateSession(r.Context(), tokenHash(t), s); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/dashboard/", HttpOnly: true,
		Secure: c.secure(r), SameSite: http.SameSiteStrictMode, Expires: time.UnixMilli(s.ExpiresAt)})
	listener.Authenticated(r)
	c.log.Info("dashboard sign-in", "session_id", s.ID, "owner", owner, "via", via, "client", c.client(r))
	return nil
}

// secure reports whether the browser reached the console over HTTPS:
// served under TLS, or with an https:// public URL (a TLS proxy in front).
// The session cookie is then Secure.
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(c.opts.BaseURL, "https://")
}

// loginPage shows how to sign in; with a link's token it offers to sign in
// with it. Using the token takes a POST, which only the page's button
// makes: a link previewer that fetches the URL, or a mail scanner that
// also runs the page's script, does not spend it.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	hash, err := c.opts.DB.ConsolePassword(r.Context())
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.render(w, r, http.StatusOK, "login", nil, page{Title: "Sign in", Data: map[string]any{
		"Token":    r.URL.Query().Get("token"),
		"Password": hash != nil && c.passwordAllowed(r),
	}})
}

// passwordAllowed: a password crosses the network only inside TLS (the
// daemon's own, or a trusted proxy's in front of an https:// public URL),
// or stays on this host.
func (c *Console) passwordAllowed(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	peer := c.peer(r)
	if c.trusted(peer) && strings.HasPrefix(c.opts.BaseURL, "https://") {
		return true
	}
	return c.client(r).IsLoopback()
}

// signInBodyLimit is the largest sign-in form read: the longest password
// (1024 bytes) form-encoded at three bytes each, with room to spare. The
// form comes from anyone, before any credential is checked.
const signInBodyLimit = 4 << 10

// signIn signs in with a login link's token or the password. A valid
// link always signs in: failures count against the address they come
// from, and only slow down more failures and passwords. The body has
// little room, and (like every request without a credential, see
// listener.BodyIdleTimeout) a few seconds in all to arrive.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, signInBodyLimit)
	if err := r.ParseForm(); err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		c.render(w, r, status, "login", nil, page{Title: "Sign in", Error: "The sign-in form could not be read."})
		return
	}
	client := failureKey(c.client(r))
	now := c.now()
	tooMany := func(wait time.Duration) {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		c.render(w, r, http.StatusTooManyRequests, "login", nil, page{Title: "Sign in",
			Error: fmt.Sprintf("Too many failed sign-ins: try again in %s, or sign in with a new link from `blueline dashboard`.", wait.Round(time.Second))})
	}
	refuse := func(msg string, password bool) {
		c.logins.failed(client, password, now)
		c.log.Warn("dashboard sign-in refused", "client", client)
		c.render(w, r, http.StatusUnauthorized, "login", nil, page{Title: "Sign in", Error: msg})
	}
	if t := r.PostFormValue("token"); t != "" {
		// A link is 256 random bits, never guessed: it is tried whatever
		// failed before, so that no flood of failures can lock it out.
		owner, err := c.opts.DB.UseLoginLink(r.Context(), tokenHash(t), now.UnixMilli())
		if errors.Is(err, storage.ErrNotFound) {
			if wait := c.logins.blocked(client, false, now); wait > 0 {
				tooMany(wait)
				return
			}
			refuse("This login link is unknown, used or expired: run `blueline dashboard` for a new one.", false)
			return
		}
		if err == nil {
			err = c.startSession(w, r, owner, "link")
		}
		if err != nil {
			c.fail(w, r, nil, err)
			return
		}
		http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
		return
	}
	if wait := c.logins.blocked(client, true, now); wait > 0 {
		tooMany(wait)
		return
	}
	hash, err := c.opts.DB.ConsolePassword(r.Context())
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if hash == nil || !c.passwordAllowed(r) {
		refuse("Signing in with a password needs HTTPS and a password set with `blueline dashboard password`.", true)
		return
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(r.PostFormValue("password"))) != nil {
		refuse("Wrong password.", true)
		return
	}
	if err := c.startSession(w, r, "", "password"); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	s := currentSession(r.Context())
	if _, err := c.opts.DB.RevokeSessions(r.Context(), s.ID); err != nil {
		c.fail(w, r, &s, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/dashboard/", HttpOnly: true,
		Secure: c.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

// peer is the address the request's connection comes from.
func (c *Console) peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (c *Console) trusted(a netip.Addr) bool {
	return slices.ContainsFunc(c.opts.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// client is the address of the browser a request comes from: the
// connection's, or when that is a trusted proxy, the address it says it
// forwards for. Walking the hops from the nearest, each trusted proxy's
// word is taken for the one before it; the first address not of a trusted
// proxy is the client (an address a client wrote at the far end itself is
// never reached). Forwarded is read when present, else X-Forwarded-For.
func (c *Console) client(r *http.Request) netip.Addr {
	addr := c.peer(r)
	if !c.trusted(addr) {
		return addr
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0 && c.trusted(addr); i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break // what a trusted proxy would not write: stop at the proxy
		}
		addr = a
	}
	return addr
}

// forwardedFor lists the client addresses a request's proxies recorded,
// the farthest first.
func forwardedFor(h http.Header) []string {
	var hops []string
	if fwd := h.Values("Forwarded"); len(fwd) > 0 {
		for _, v := range fwd {
			for elem := range strings.SplitSeq(v, ",") {
				for pair := range strings.SplitSeq(elem, ";") {
					k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(k, "for") {
						hops = append(hops, strings.Trim(v, `"`))
					}
				}
			}
		}
		return hops
	}
	for _, v := range h.Values("X-Forwarded-For") {
		for hop := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(hop))
		}
	}
	return hops
}

// parseHop reads one hop's address: an IP, with a port or not, IPv6 in
// brackets when it has one (Forwarded always brackets it).
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a.Unmap(), err == nil
}

// failureKey is what failures are counted by: the address, and for IPv6
// its /64, which one host usually has all of.
func failureKey(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// loginLimiter slows guessing: after maxFailures failed sign-ins from one
// address within loginWindow, that address waits until the oldest failure
// leaves the window, for its next failure or password. Wrong passwords
// from all addresses together get maxPasswordFailures, which holds back
// the password only: a link is always tried, and a valid one always signs
// in, so no flood of failures locks the operator out.
type loginLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time // by address; "" holds the passwords'
	// sweepAt is the number of addresses at which those whose failures
	// have all left the window are dropped (it doubles with the live ones).
	sweepAt int
}

const (
	loginWindow         = 15 * time.Minute
	maxFailures         = 5
	maxPasswordFailures = 50
)

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{failures: map[string][]time.Time{}, sweepAt: 1024}
}

// blocked is how long client must wait before its next attempt, with the
// password or not.
func (l *loginLimiter) blocked(client string, password bool, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	limits := map[string]int{client: maxFailures}
	if password {
		limits[""] = maxPasswordFailures
	}
	var wait time.Duration
	for key, limit := range limits {
		recent := l.recent(key, now)
		if len(recent) >= limit {
			wait = max(wait, recent[len(recent)-limit].Add(loginWindow).Sub(now))
		}
	}
	return wait
}

func (l *loginLimiter) failed(client string, password bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := []string{client}
	if password {
		keys = append(keys, "")
	}
	for _, key := range keys {
		l.failures[key] = append(l.recent(key, now), now)
	}
	if len(l.failures) >= l.sweepAt {
		for key := range l.failures {
			l.recent(key, now)
		}
		l.sweepAt = max(1024, 2*len(l.failures))
	}
}

// recent drops failures older than the window; l.mu is held.
func (l *loginLimiter) recent(key string, now time.Time) []time.Time {
	f := l.failures[key]
	i := 0
	for i < len(f) && now.Sub(f[i]) >= loginWindow {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(l.failures, key)
		return nil
	}
	l.failures[key] = f
	return f
}
