package listener

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"
)

// certmagic's zap logs come out of slog with their level, logger name and
// fields as plain values.
func TestZapThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})
	zl := zap.New(slogCore{h}).Named("certmagic").Named("obtain").With(zap.String("identifier", "a.example"))
	zl.Debug("not shown")
	zl.Warn("renewing", zap.Error(errors.New("boom")), zap.Duration("remaining", 90*time.Second),
		zap.Strings("names", []string{"a.example", "b.example"}), zap.Int("attempt", 2))

	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("one JSON record expected, got %q: %v", buf.String(), err)
	}
	want := map[string]any{
		"level": "WARN", "msg": "renewing", "logger": "certmagic.obtain", "identifier": "a.example",
		"error": "boom", "remaining": float64(90 * time.Second), "names": []any{"a.example", "b.example"}, "attempt": float64(2),
	}
	for k, v := range want {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(t, v) {
			t.Errorf("%s = %s, want %s", k, g, mustJSON(t, v))
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Plain HTTP redirects to HTTPS on one of the domains, with the HTTPS port
// unless it is 443; unknown challenge tokens are 404, not redirected.
func TestToHTTPS(t *testing.T) {
	tests := []struct {
		port, method, target, host string
		status                     int
		location                   string
	}{
		{"443", "GET", "/v1/lines?limit=2", "a.example", 308, "https://a.example/v1/lines?limit=2"},
		{"443", "POST", "/v1/messages", "B.example:80", 308, "https://b.example/v1/messages"},
		{"8443", "GET", "/", "a.example:8080", 308, "https://a.example:8443/"},
		{"443", "GET", "/x", "evil.example", 308, "https://a.example/x"},
		{"443", "GET", "/x", "", 308, "https://a.example/x"},
		{"443", "GET", "/.well-known/acme-challenge/abc", "a.example", 404, ""},
	}
	for _, tt := range tests {
		s := &TLS{opts: TLSOptions{Domains: []string{"a.example", "b.example"}}, httpsPort: tt.port}
		r := httptest.NewRequest(tt.method, tt.target, nil)
		r.Host = tt.host
		w := httptest.NewRecorder()
		s.toHTTPS(w, r)
		if w.Code != tt.status || w.Header().Get("Location") != tt.location {
			t.Errorf("%s %s Host %q (https port %s): %d %q, want %d %q", tt.method, tt.target, tt.host, tt.port,
				w.Code, w.Header().Get("Location"), tt.status, tt.location)
		}
		if tt.status == http.StatusPermanentRedirect && w.Header().Get("Connection") != "close" {
			t.Errorf("%s %s: Connection %q, want close", tt.method, tt.target, w.Header().Get("Connection"))
		}
	}
}
