package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

// fakeMetrics records the routes requests are counted under.
type fakeMetrics struct {
	mu     sync.Mutex
	routes []string
	codes  []int
}

func (m *fakeMetrics) ObserveRequest(route string, code int, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes = append(m.routes, route)
	m.codes = append(m.codes, code)
}

func (m *fakeMetrics) Handler() http.Handler { return http.NotFoundHandler() }

func newTestServer(t *testing.T, opts server.Options) (*httptest.Server, *storage.DB) {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := server.New(db, nil, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, db
}

func get(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	r := apitest.Client{TB: t}.Call(method, url, "", nil)
	return r.Status, r.Body
}

func TestReadyzReportsFailingChecks(t *testing.T) {
	var mu sync.Mutex
	lineOK := true
	ts, db := newTestServer(t, server.Options{Ready: func(context.Context) []api.Check {
		mu.Lock()
		defer mu.Unlock()
		return []api.Check{
			{Name: "delivery", OK: true},
			{Name: "line +15550000001", OK: lineOK, Reason: "its messages bridge stopped", Info: "advanced features: helper not connected"},
		}
	}})
	code, body := get(t, "GET", ts.URL+"/readyz")
	want := map[string]any{"status": "ready", "checks": map[string]any{
		"storage":           map[string]any{"ok": true},
		"delivery":          map[string]any{"ok": true},
		"line +15550000001": map[string]any{"ok": true, "info": "advanced features: helper not connected"},
	}}
	if code != 200 || !jsonEqual(body, want) {
		t.Fatalf("ready: %d %v", code, body)
	}

	mu.Lock()
	lineOK = false
	mu.Unlock()
	code, body = get(t, "GET", ts.URL+"/readyz")
	want["status"] = "not_ready"
	want["checks"].(map[string]any)["line +15550000001"] = map[string]any{"ok": false, "reason": "its messages bridge stopped",
		"info": "advanced features: helper not connected"}
	if code != 503 || !jsonEqual(body, want) {
		t.Fatalf("a line down: %d %v", code, body)
	}

	db.Close()
	code, body = get(t, "GET", ts.URL+"/readyz")
	storageCheck, _ := body["checks"].(map[string]any)["storage"].(map[string]any)
	if code != 503 || storageCheck["ok"] != false || storageCheck["reason"] == "" {
		t.Fatalf("storage closed: %d %v", code, body)
	}
	// Alive all the same.
	if code, body := get(t, "GET", ts.URL+"/healthz"); code != 200 || body["status"] != "ok" {
		t.Fatalf("healthz: %d %v", code, body)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Requests are counted by route pattern, never by raw path.
func TestRequestMetricsByRoute(t *testing.T) {
	m := &fakeMetrics{}
	ts, _ := newTestServer(t, server.Options{Metrics: m})
	for _, r := range []struct{ method, path string }{
		{"GET", "/healthz"},
		{"HEAD", "/readyz"},
		{"GET", "/files/file_abc?expires=1&signature=x"},
		{"GET", "/v1/messages"},
		{"GET", "/no/such/route"},
		{"PUT", "/v1/messages"},
		{"OPTIONS", "/v1/messages"},
	} {
		get(t, r.method, ts.URL+r.path)
	}
	want := []string{"GET /healthz", "HEAD /readyz", "GET /files/:id", "GET /v1/messages", "unmatched", "unmatched", "preflight"}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Equal(m.routes, want) {
		t.Fatalf("routes counted:\n%q\nwant\n%q", m.routes, want)
	}
	if codes := []int{m.codes[0], m.codes[1], m.codes[3], m.codes[4], m.codes[5], m.codes[6]}; !slices.Equal(codes, []int{200, 200, 401, 404, 405, 204}) {
		t.Fatalf("status codes counted: %v", m.codes)
	}
}
