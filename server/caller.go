package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/storage"
)

// callerKey carries the caller of an in-process request.
type callerKey struct{}

// WithCaller makes the API requests made with ctx act as k, without an
// Authorization header: the console calls the API this way for its signed-in
// user, so that every rule applies to it exactly as to a key. Only code in
// this process can set it; a request from the network never carries it.
//
// In-process callers are not held to the per-key request limit: a console
// page makes several requests, and the console's own sign-in is limited.
// Nor is their body held to the total time the listener gives one that has
// not authenticated, or its deadlines moved on the connection their context
// may name, which is another request's (listener.InProcess).
func WithCaller(ctx context.Context, k storage.Key) context.Context {
	return listener.InProcess(context.WithValue(ctx, callerKey{}, k))
}

func inProcessCaller(ctx context.Context) (storage.Key, bool) {
	k, ok := ctx.Value(callerKey{}).(storage.Key)
	return k, ok
}

// keyUse records when keys are used, at most once a minute per key, so
// that authenticating stays a read.
type keyUse struct {
	db   *storage.DB
	mu   sync.Mutex
	last map[string]time.Time
}

const keyUseResolution = time.Minute

func (u *keyUse) touch(ctx context.Context, k storage.Key, now time.Time) {
	u.mu.Lock()
	if now.Sub(u.last[k.ID]) < keyUseResolution || now.UnixMilli()-k.LastUsedAt < keyUseResolution.Milliseconds() {
		u.mu.Unlock()
		return
	}
	u.last[k.ID] = now
	u.mu.Unlock()
	// The request does not wait for the write: a lost touch costs a
	// minute of accuracy, never the request.
	go u.db.TouchKey(context.WithoutCancel(ctx), k.ID, now.UnixMilli())
}

// Dashboard is the console the API listener also serves, under
// /dashboard/; the admin socket hands out its login links.
type Dashboard interface {
	http.Handler
	// LoginLink returns a one-time link that signs its opener in as
	// owner ("" for the host's operator) until expiresAt (Unix ms).
	LoginLink(ctx context.Context, owner string) (link string, expiresAt int64, err error)
	// SetPassword sets the password for signing in without a link over
	// TLS; "" removes it.
	SetPassword(ctx context.Context, password string) error
}

// OwnerHeader, on the admin socket's API, makes a request act as that
// owner's key rather than as the host's operator.
const OwnerHeader = "Blueline-Owner"

// asHost serves the API on the admin socket: each request acts as a key
// with every scope and every line, with the owner OwnerHeader names (none
// by default). Only the daemon's user reaches the socket (adminsock.go).
func (s *Server) asHost(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := storage.Key{ID: "host", Label: "admin socket", Scopes: Scopes, Owner: strings.TrimSpace(r.Header.Get(OwnerHeader))}
		api.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), k)))
	})
}
