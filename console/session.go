package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

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

// LoginLink returns a one-time link that signs its opener in as owner.
func (c *Console) LoginLink(ctx context.Context, owner string) (string, int64, error) {
	t := token()
	expires := c.now().Add(c.opts.LinkTTL).UnixMilli()
	if err := c.opts.DB.CreateLoginLink(ctx, tokenHash(t), owner, expires); err != nil {
		return "", 0, err
	}
	// The token rides in the query, never the path: request logs carry
	// paths, not queries.
	return strings.TrimSuffix(c.opts.BaseURL, "/") + "/dashboard/login?token=" + url.QueryEscape(t), expires, nil
}

// SetPassword stores the password's bcrypt hash; "" removes it.
func (c *Console) SetPassword(ctx context.Context, password string) error {
	if password == "" {
		return c.opts.DB.SetConsolePassword(ctx, nil)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash the dashboard password: %w", err)
	}
	return c.opts.DB.SetConsolePassword(ctx, hash)
}

type sessionKey struct{}

func currentSession(ctx context.Context) storage.Session {
	s, _ := ctx.Value(sessionKey{}).(storage.Session)
	return s
}

// caller is the API key a session acts as: every scope, every line, and
// the session's owner, so that the API's owner and line rules apply.
func caller(s storage.Session) storage.Key {
	return storage.Key{ID: s.ID, Label: "dashboard", Scopes: server.Scopes, Owner: s.Owner}
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
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, Expires: time.UnixMilli(s.ExpiresAt)})
	c.log.Info("dashboard sign-in", "session_id", s.ID, "owner", owner, "via", via)
	return nil
}

// loginPage shows how to sign in; with a link's token it offers to sign in
// with it. Using the token takes a POST: a link previewer that fetches the
// URL does not spend it.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	hash, err := c.opts.DB.ConsolePassword(r.Context())
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	c.render(w, r, http.StatusOK, "login", nil, page{Title: "Sign in", Data: map[string]any{
		"Token":    r.URL.Query().Get("token"),
		"Password": hash != nil && passwordAllowed(r),
	}})
}

// passwordAllowed: a password crosses the network only inside TLS, or
// stays on this host.
func passwordAllowed(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// signIn signs in with a login link's token or the password.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	client := clientIP(r)
	if wait := c.logins.blocked(client, c.now()); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		c.render(w, r, http.StatusTooManyRequests, "login", nil, page{Title: "Sign in",
			Error: fmt.Sprintf("Too many failed sign-ins: try again in %s.", wait.Round(time.Second))})
		return
	}
	refuse := func(msg string) {
		c.logins.failed(client, c.now())
		c.log.Warn("dashboard sign-in refused", "client", client)
		c.render(w, r, http.StatusUnauthorized, "login", nil, page{Title: "Sign in", Error: msg})
	}
	if t := r.PostFormValue("token"); t != "" {
		owner, err := c.opts.DB.UseLoginLink(r.Context(), tokenHash(t), c.now().UnixMilli())
		if errors.Is(err, storage.ErrNotFound) {
			refuse("This login link is unknown, used or expired: run `blueline dashboard` for a new one.")
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
	hash, err := c.opts.DB.ConsolePassword(r.Context())
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if hash == nil || !passwordAllowed(r) {
		refuse("Signing in with a password needs HTTPS and a password set with `blueline dashboard password`.")
		return
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(r.PostFormValue("password"))) != nil {
		refuse("Wrong password.")
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
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loginLimiter slows guessing: after maxFailures failed sign-ins from one
// address within loginWindow, that address waits until the oldest failure
// leaves the window; all addresses together get maxFailuresAll.
type loginLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time // "" holds every address's
}

const (
	loginWindow    = 15 * time.Minute
	maxFailures    = 5
	maxFailuresAll = 50
)

func newLoginLimiter() *loginLimiter { return &loginLimiter{failures: map[string][]time.Time{}} }

func (l *loginLimiter) blocked(client string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	for key, limit := range map[string]int{client: maxFailures, "": maxFailuresAll} {
		recent := l.recent(key, now)
		if len(recent) >= limit {
			wait = max(wait, recent[len(recent)-limit].Add(loginWindow).Sub(now))
		}
	}
	return wait
}

func (l *loginLimiter) failed(client string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range []string{client, ""} {
		l.failures[key] = append(l.recent(key, now), now)
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
