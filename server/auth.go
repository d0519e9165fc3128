package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/listener"
	"github.com/blueline-app/blueline/storage"
)

// apiKeyKey carries the request's API key in its context.
type apiKeyKey struct{}

const (
	keyPrefix  = "sk_live_"
	keyLen     = 40 // random base62 characters after the prefix: ~238 bits
	base62     = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	maxKeySize = 128
)

// NewKey mints a key: k with a fresh ID, hint and hash, and the secret,
// which is shown once and stored only as its SHA-256.
func NewKey(k storage.Key) (_ storage.Key, secret string) {
	secret = keyPrefix + randomBase62(keyLen)
	sum := sha256.Sum256([]byte(secret))
	k.ID, k.Hint, k.Hash = storage.NewID("key_"), keyPrefix+"…"+secret[len(secret)-4:], sum[:]
	return k, secret
}

// randomBase62 returns n characters from crypto/rand.
func randomBase62(n int) string {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(base62))))
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		b[i] = base62[k.Int64()]
	}
	return string(b)
}

var (
	errMissingKey = httpapi.Unauthenticated("missing_api_key", "No API key given. Send it as Authorization: Bearer sk_live_…")
	errInvalidKey = httpapi.Unauthenticated(httpapi.InvalidKeyCode, "The API key is invalid, malformed or revoked.")
)

// authenticate finds the key a request carries.
func (s *Server) authenticate(r *http.Request) (storage.Key, error) {
	k, err := s.keyFor(r.Context(), r.Header.Get("Authorization"))
	if err == nil {
		listener.Authenticated(r)
	}
	return k, err
}

// keyFor finds the key of an Authorization header's value h.
func (s *Server) keyFor(ctx context.Context, h string) (storage.Key, error) {
	if h == "" {
		return storage.Key{}, errMissingKey
	}
	scheme, secret, ok := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(secret, keyPrefix) || len(secret) > maxKeySize {
		return storage.Key{}, errInvalidKey
	}
	// Looking the key up by its hash means no secret is ever compared byte
	// by byte; storage compares the stored hash in constant time.
	sum := sha256.Sum256([]byte(secret))
	k, err := s.db.KeyByHash(ctx, sum[:])
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Key{}, errInvalidKey
	}
	return k, err
}

func hasScope(k storage.Key, scope string) bool { return slices.Contains(k.Scopes, scope) }

// anyScope is the scope of a route that every valid key may call.
const anyScope = ""

func apiKey(ctx context.Context) storage.Key {
	k, _ := ctx.Value(apiKeyKey{}).(storage.Key)
	return k
}

// checkLineAccess applies line restrictions and the sandbox's owner rule.
func checkLineAccess(k storage.Key, l storage.Line) error {
	if l.IsSandbox {
		if k.Owner == "" {
			return httpapi.Forbidden("sandbox_requires_owner",
				"The sandbox line needs a key tied to an owner; create one with `blueline keys create --owner NAME`.")
		}
		return nil
	}
	if len(k.LineIDs) > 0 && !slices.Contains(k.LineIDs, l.ID) {
		return httpapi.Forbidden("line_not_accessible", "This API key cannot use line %s.", l.Handle)
	}
	return nil
}

// ParseScopes turns "all" or a comma-separated list into scopes, refusing
// names that are not scopes.
func ParseScopes(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return slices.Clone(api.Scopes), nil
	}
	var out []string
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		if !slices.Contains(api.Scopes, sc) {
			return nil, fmt.Errorf("unknown scope %q (scopes: all, %s)", sc, strings.Join(api.Scopes, ", "))
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}
