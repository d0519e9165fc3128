package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/client/api"
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

// hostKeyID is the ID of the key the admin socket's requests act as.
const hostKeyID = "host"

// AsHost is api (the API's handler: Handler, or in a fleet the routed
// one) for the admin socket: each request acts as a key with every scope
// and every line, with the owner api.OwnerHeader names (none by default).
// Only the daemon's user reaches the socket (package adminsock).
func AsHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := storage.Key{ID: hostKeyID, Label: "admin socket", Scopes: api.Scopes, Owner: strings.TrimSpace(r.Header.Get(api.OwnerHeader))}
		h.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), k)))
	})
}
