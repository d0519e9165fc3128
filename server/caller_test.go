package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// inProcess makes a request as the console does: no Authorization header,
// the caller in the context.
func (e *apiEnv) inProcess(caller storage.Key, method, path string) (int, map[string]any) {
	e.t.Helper()
	req := httptest.NewRequestWithContext(server.WithCaller(context.Background(), caller), method, path, nil)
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	var body map[string]any
	json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, body
}

func errCodeOf(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// An in-process caller is held to the line and owner rules of the key it
// acts as, but not to the per-key request limit.
func TestInProcessCaller(t *testing.T) {
	opts := defaultOptions()
	opts.RequestsPerHour = 1
	e := newAPI(t, opts)
	operator := storage.Key{ID: "ses_x", Scopes: api.Scopes}
	for range 3 {
		if code, body := e.inProcess(operator, "GET", "/v1/lines"); code != 200 {
			t.Fatalf("in process, GET /v1/lines: %d %v", code, body)
		}
	}
	if code, body := e.inProcess(operator, "GET", "/v1/chats?from=%2B15550000000"); code != 403 || errCodeOf(body) != "sandbox_requires_owner" {
		t.Errorf("no owner, the sandbox's chats: %d %v, want 403 sandbox_requires_owner", code, body)
	}
	restricted := storage.Key{ID: "ses_y", Scopes: api.Scopes, LineIDs: []string{e.lines[smsLine].ID}}
	if code, body := e.inProcess(restricted, "GET", "/v1/chats?from=%2B15550000001"); code != 403 || errCodeOf(body) != "line_not_accessible" {
		t.Errorf("a line the caller may not use: %d %v, want 403 line_not_accessible", code, body)
	}
	readOnly := storage.Key{ID: "ses_z", Scopes: []string{"lines:read"}}
	if code, body := e.inProcess(readOnly, "GET", "/v1/chats?from=%2B15550000001"); code != 403 || errCodeOf(body) != "insufficient_scope" {
		t.Errorf("a scope the caller lacks: %d %v, want 403 insufficient_scope", code, body)
	}
	// Over the network, the same limit holds for a key: the second request
	// in the hour is refused.
	key := e.key(keyOpts{})
	e.call("GET", "/v1/lines", key, nil)
	if r := e.call("GET", "/v1/lines", key, nil); r.Status != 429 {
		t.Errorf("a key's second request with a limit of 1 an hour: %d, want 429", r.Status)
	}
}

// A key records when it was last used, to the minute, without the request
// waiting for the write.
func TestKeyLastUsed(t *testing.T) {
	e := newAPI(t, defaultOptions())
	key := e.key(keyOpts{})
	lastUsed := func() int64 {
		keys, err := e.db.Keys(context.Background())
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys: %v %v", keys, err)
		}
		return keys[0].LastUsedAt
	}
	if got := lastUsed(); got != 0 {
		t.Fatalf("a new key was last used at %d", got)
	}
	before := time.Now().UnixMilli()
	if r := e.call("GET", "/v1/lines", key, nil); r.Status != 200 {
		t.Fatalf("GET /v1/lines: %d", r.Status)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return lastUsed() >= before })
	// An unknown key touches nothing.
	if r := e.call("GET", "/v1/lines", "sk_live_nope", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("an unknown key: %d", r.Status)
	}
}
