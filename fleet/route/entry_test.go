package route_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/fleet/route"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

const testSecret = "the-route-test-secret-0123456789"

type callerKey struct{}

// twoNodes starts node mac-a (an embedded NATS server alone) and mac-b
// (connected to it), each closed when the test ends.
func twoNodes(t *testing.T) (a, b *fleet.Node) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := fleet.Start(context.Background(), fleet.Options{Node: "mac-a", Secret: testSecret, Listen: "127.0.0.1:0",
		StoreDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = fleet.Start(context.Background(), fleet.Options{Node: "mac-b", Secret: testSecret, URL: strings.Replace(a.ClientURL(), "nats://",
		"nats://"+fleet.ClientUser+":"+fleet.ClientPassword(testSecret)+"@", 1), Replicas: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// seen is what mac-b's API saw of a forwarded request.
type seen struct {
	Caller        string `json:"caller"`
	Authorization string `json:"authorization"`
	RequestID     string `json:"request_id"`
	Idempotency   string `json:"idempotency"`
	Body          string `json:"body"`
}

// The entry forwards to the node of the line a request names, as the
// verified caller and never with the secret; a node whose entries are
// stale is down at once; a POST that times out is 504 outcome_unknown and
// is not retried, a GET that does 503.
func TestEntry(t *testing.T) {
	a, b := twoNodes(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	// mac-b's API: echoes what it saw, or hangs on "slow".
	var calls atomic.Int32
	release := make(chan struct{}) // a slow request hangs until the test ends
	t.Cleanup(func() { close(release) })
	bAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("slow")) || r.URL.Query().Get("slow") != "" {
			<-release
			return
		}
		k, _ := r.Context().Value(callerKey{}).(storage.Key)
		httpapi.WriteJSON(w, http.StatusCreated, seen{Caller: k.ID, Authorization: r.Header.Get("Authorization"),
			RequestID: httpapi.RequestID(r.Context()), Idempotency: r.Header.Get("Idempotency-Key"), Body: string(body)})
	})
	asCaller := func(ctx context.Context, k storage.Key) context.Context {
		return context.WithValue(ctx, callerKey{}, k)
	}
	if _, err := route.Serve(b, route.API{Routes: bAPI, AsCaller: asCaller}, 0, log); err != nil {
		t.Fatal(err)
	}
	// mac-b's line in the directory, as fresh as bClock says.
	var bStale atomic.Bool
	bDir, err := b.Directory(fleet.DirectoryOptions{
		Lines: func() []fleet.LineEntry {
			return []fleet.LineEntry{{Line: "ln_b", Handle: "+15550002001", Health: "ok"}}
		},
		Clock: func() time.Time {
			if bStale.Load() {
				return time.Now().Add(-time.Hour)
			}
			return time.Now()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bDir.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	// mac-a's API has no line: every line-scoped request is a "not here".
	aAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, log, httpapi.NotFound("line_not_found", "from", "No line on this server."))
	})
	aDir, err := a.Directory(fleet.DirectoryOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string // what Observe recorded, in order
	var mu sync.Mutex
	observe := func(node, outcome string, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		outcomes = append(outcomes, node+" "+outcome)
	}
	entry := route.NewEntry(route.EntryOptions{Node: a, Directory: aDir, Log: log, Observe: observe,
		WriteTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		API: route.API{Authenticate: func(r *http.Request) (storage.Key, error) {
			return storage.Key{ID: "key_1", Scopes: []string{"messages:write"}, Hash: []byte("never sent")}, nil
		}}})
	h := entry.Handler(aAPI)
	do := func(method, target, body string, header ...string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk_live_secret")
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		req = req.WithContext(httpapi.WithRequestID(req.Context(), "req_test"))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	send := `{"from":"+1 555 000 2001","to":"+15551110001","text":"hi"}`

	// Forwarded as the verified caller, never with the secret.
	testkit.Eventually(t, 5*time.Second, func() bool { return do("POST", "/v1/messages", send).Code == 201 })
	w := do("POST", "/v1/messages", send, "Idempotency-Key", "k1")
	var got seen
	json.Unmarshal(w.Body.Bytes(), &got)
	want := seen{Caller: "key_1", RequestID: "req_test", Idempotency: "k1", Body: send}
	if w.Code != 201 || got != want {
		t.Errorf("forwarded: %d %+v, want %+v", w.Code, got, want)
	}

	// A write that times out: 504 outcome_unknown, tried once.
	calls.Store(0)
	mu.Lock()
	if last := outcomes[len(outcomes)-1]; last != "mac-b answered" {
		t.Errorf("observed %q, want mac-b answered", last)
	}
	outcomes = nil
	mu.Unlock()
	w = do("POST", "/v1/messages", strings.Replace(send, "hi", "slow", 1))
	if w.Code != 504 || !strings.Contains(w.Body.String(), `"outcome_unknown"`) || !strings.Contains(w.Body.String(), "req_test") {
		t.Errorf("a write that timed out: %d %s", w.Code, w.Body)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the write reached mac-b %d times, want 1", n)
	}
	mu.Lock()
	if len(outcomes) != 1 || outcomes[0] != "mac-b timeout" {
		t.Errorf("observed %q, want one mac-b timeout", outcomes)
	}
	mu.Unlock()
	// A read that times out: the line is unavailable.
	w = do("GET", "/v1/chats?from=%2B15550002001&slow=1", "")
	if w.Code != 503 || !strings.Contains(w.Body.String(), `"line_unavailable"`) || w.Header().Get("Retry-After") == "" {
		t.Errorf("a read that timed out: %d %s", w.Code, w.Body)
	}

	// mac-b's entries go stale (a node that stopped refreshing: killed,
	// asleep): 503 at once, without asking it.
	bStale.Store(true)
	if err := bDir.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return do("POST", "/v1/messages", send).Code == 503 })
	calls.Store(0)
	w = do("POST", "/v1/messages", send)
	if w.Code != 503 || !strings.Contains(w.Body.String(), `"line_unavailable"`) || w.Header().Get("Retry-After") != "5" {
		t.Errorf("a stale node's line: %d %s (Retry-After %q)", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("a stale node was asked %d times", n)
	}

	// Other requests are the local API's alone.
	calls.Store(0)
	if w = do("POST", "/v1/sandbox", `{}`); w.Code == 503 || calls.Load() != 0 {
		t.Errorf("a route that is not routed: %d, forwarded %d times", w.Code, calls.Load())
	}
}
