package server_test

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/keyword"
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
	// handler is the API's handler, for requests made in process.
	handler http.Handler
	srv     *server.Server
}

// defaultOptions are the daemon's limits by default, with the test
// configuration's attempts and sandbox quota.
func defaultOptions() server.Options {
	l := config.Default().Limits
	return server.Options{MaxBodyBytes: l.MaxBodyBytes, MaxAttempts: 3, SandboxQuota: 5,
		StreamsPerKey: l.StreamsPerKey, StreamLifetime: l.StreamLifetime.Duration}
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
		{Handle: mainLine, Label: "Main line", Service: "imessage", Bridge: "sim", AdvancedFeatures: true,
			OptOutWords: keyword.FoldAll(keyword.DefaultOptOut), OptInWords: keyword.FoldAll(keyword.DefaultOptIn), TakeoverQuiet: (20 * time.Minute).Milliseconds()},
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
	srv := server.New(db, store, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	env := &apiEnv{t: t, db: db, recv: recv, base: ts.URL, lines: map[string]storage.Line{}, handler: ts.Config.Handler, srv: srv}
	for _, l := range lines {
		env.lines[l.Handle] = l
	}
	return env
}

// keyOpts are the fields of an API key; nil api.Scopes means all.
type keyOpts struct {
	Scopes []string
	Lines  []string // handles
	Owner  string
	Label  string // "test" when empty
	Agent  bool
	// ApprovalRequired makes the agent's messages wait for approval,
	// except to ApprovalExcept.
	ApprovalRequired bool
	ApprovalExcept   []string
	Gate             storage.Gate
}

// key stores an API key as `blueline keys create` does and returns its secret.
func (e *apiEnv) key(o keyOpts) string {
	e.t.Helper()
	secret := "sk_live_" + strings.TrimPrefix(storage.NewID("x_"), "x_") + strings.TrimPrefix(storage.NewID("x_"), "x_")
	sum := sha256.Sum256([]byte(secret))
	scopes := o.Scopes
	if scopes == nil {
		scopes = api.Scopes
	}
	var ids []string
	for _, h := range o.Lines {
		ids = append(ids, e.lines[h].ID)
	}
	label := o.Label
	if label == "" {
		label = "test"
	}
	k := storage.Key{ID: storage.NewID("key_"), Label: label, Scopes: scopes, LineIDs: ids, Owner: o.Owner, Agent: o.Agent, Gate: o.Gate, Hash: sum[:],
		CreatedAt: time.Now().UnixMilli(), ApprovalRequired: o.ApprovalRequired, ApprovalExcept: o.ApprovalExcept}
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

type response = apitest.Response

// call makes an API request through apitest, as the end-to-end suite does.
func (e *apiEnv) call(method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	return apitest.Client{TB: e.t, Base: e.base}.Call(method, path, key, body, headers...)
}

// send posts a message; the answer must be 201.
func (e *apiEnv) send(key string, body map[string]any, headers ...string) map[string]any {
	e.t.Helper()
	return apitest.Client{TB: e.t, Base: e.base}.Send(key, body, headers...)
}

// activateSandbox starts the sandbox of key's owner and has contact text
// its activation code.
func (e *apiEnv) activateSandbox(key, contact string) {
	e.t.Helper()
	r := e.call("POST", "/v1/sandbox", key, nil)
	code, _ := r.Body["activation_code"].(string)
	if r.Status != 201 || code == "" {
		e.t.Fatalf("POST /v1/sandbox: %d %s", r.Status, r.Raw)
	}
	e.inbound(sandboxLine, contact, code)
}
