package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

// Handles of the test lines, as in the end-to-end suite.
const (
	sandboxLine = "+15550000000"
	mainLine    = "+15550000001"
	smsLine     = "+15550000002"
	plainLine   = "+15550000003" // no advanced features
	alice       = "+15551110001"
	bob         = "+15551110002"
	carol       = "+15551110003"
)

// apiEnv is the API over real storage and a real file store in a temporary
// folder, served by httptest. Nothing delivers: outbox items stay pending.
type apiEnv struct {
	t     testing.TB
	db    *storage.DB
	recv  *delivery.Receiver
	base  string
	lines map[string]storage.Line // by handle
}

// defaultOptions are the daemon's defaults, with the test configuration's
// sandbox quota.
func defaultOptions() server.Options {
	return server.Options{MaxBodyBytes: 1 << 20, MaxAttempts: 3, SandboxQuota: 5}
}

func newAPI(t testing.TB, opts server.Options) *apiEnv {
	t.Helper()
	dir := t.TempDir()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	lines, err := db.SyncLines(ctx, []storage.Line{
		{Handle: sandboxLine, Label: "Sandbox", Service: "imessage", Bridge: "sim", AdvancedFeatures: true, IsSandbox: true},
		{Handle: mainLine, Label: "Main line", Service: "imessage", Bridge: "sim", AdvancedFeatures: true},
		{Handle: smsLine, Label: "SMS line", Service: "sms", Bridge: "sim"},
		{Handle: plainLine, Service: "imessage", Bridge: "sim"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	store, err := files.Open(ctx, filepath.Join(dir, "files"), db, files.Options{
		MaxUploadBytes: 10 << 20, URLTTL: time.Hour, BaseURL: "http://" + ts.Listener.Addr().String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	recv := delivery.NewReceiver(db, store)
	srv := server.New(db, recv, store, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	env := &apiEnv{t: t, db: db, recv: recv, base: ts.URL, lines: map[string]storage.Line{}}
	for _, l := range lines {
		env.lines[l.Handle] = l
	}
	return env
}

// keyOpts are the fields of an API key; nil Scopes means all.
type keyOpts struct {
	Scopes []string
	Lines  []string // handles
	Owner  string
}

// key stores an API key as `blueline keys create` does and returns its secret.
func (e *apiEnv) key(o keyOpts) string {
	e.t.Helper()
	secret := "sk_live_" + strings.TrimPrefix(storage.NewID("x_"), "x_") + strings.TrimPrefix(storage.NewID("x_"), "x_")
	sum := sha256.Sum256([]byte(secret))
	scopes := o.Scopes
	if scopes == nil {
		scopes = server.Scopes
	}
	var ids []string
	for _, h := range o.Lines {
		ids = append(ids, e.lines[h].ID)
	}
	k := storage.Key{ID: storage.NewID("key_"), Label: "test", Scopes: scopes, LineIDs: ids, Owner: o.Owner, Hash: sum[:], CreatedAt: time.Now().UnixMilli()}
	if err := e.db.CreateKey(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// inbound records a message a contact sent to line, in a one-to-one chat
// or, when chat is given, in that chat.
func (e *apiEnv) inbound(line, from, text string, chat ...bridge.Chat) storage.Message {
	e.t.Helper()
	c := sim.OneToOne(e.lines[line].Service, from)
	if len(chat) > 0 {
		c = chat[0]
	}
	res, err := e.recv.Record(context.Background(), bridge.Inbound{Line: line, Service: e.lines[line].Service, Chat: c,
		GUID: sim.NewGUID(), Sender: from, Text: &text, SentAt: time.Now()})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Message
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r response) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (r response) errParam() string {
	e, _ := r.body["error"].(map[string]any)
	p, _ := e["param"].(string)
	return p
}

func (r response) errType() string {
	e, _ := r.body["error"].(map[string]any)
	typ, _ := e["type"].(string)
	return typ
}

func (r response) data() []map[string]any {
	items, _ := r.body["data"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// call makes an API request. body may be nil, a string (sent raw) or a
// value sent as JSON; headers are name, value pairs.
func (e *apiEnv) call(method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	// Encode "+" in the query as a careful client does.
	if p, q, ok := strings.Cut(path, "?"); ok {
		path = p + "?" + strings.ReplaceAll(q, "+", "%2B")
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			e.t.Fatalf("%s %s: body is not a JSON object: %q", method, path, raw)
		}
	}
	return r
}

// send posts a message; the answer must be 201.
func (e *apiEnv) send(key string, body map[string]any, headers ...string) map[string]any {
	e.t.Helper()
	r := e.call("POST", "/v1/messages", key, body, headers...)
	if r.status != 201 {
		e.t.Fatalf("POST /v1/messages %v: %d %s", body, r.status, r.raw)
	}
	return r.body
}

// activateSandbox starts the sandbox of key's owner and has contact text
// its activation code.
func (e *apiEnv) activateSandbox(key, contact string) {
	e.t.Helper()
	r := e.call("POST", "/v1/sandbox", key, nil)
	code, _ := r.body["activation_code"].(string)
	if r.status != 201 || code == "" {
		e.t.Fatalf("POST /v1/sandbox: %d %s", r.status, r.raw)
	}
	e.inbound(sandboxLine, contact, code)
}
