package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/admin"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/console"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/files"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
	"github.com/blueline-app/blueline/webhook"
)

// Handles of the test lines, and contacts on the simulated network.
const (
	sandboxLine  = "+15550000000"
	mainLine     = "+15550000001"
	smsLine      = "+15550000002"
	macLine      = "+15550000009" // on the messages bridge
	alice        = "+15551110001"
	bob          = "+15551110002"
	carol        = "+15551110003"
	baseURL      = "http://127.0.0.1:1"
	testPassword = "correct horse battery"
)

// env is the admin socket's handler over real storage, files, the API's
// server and the simulated network, served on a loopback port.
type env struct {
	t       *testing.T
	db      *storage.DB
	srv     *server.Server
	recv    *delivery.Receiver
	network *sim.Network
	store   *files.Store
	url     string
	lines   map[string]storage.Line // by handle
	logs    *testkit.LogBuffer
	log     *slog.Logger
}

// envOptions change what newEnv builds.
type envOptions struct {
	noSandbox bool                 // no sandbox line
	adjust    func(*admin.Options) // changes the admin's options
}

func webhookOpts() webhook.Options {
	w := config.Default().Webhooks
	return webhook.Options{Schedule: []time.Duration{10 * time.Millisecond}, Timeout: 5 * time.Second, DisableAfter: w.DisableAfter.Duration,
		Lanes: 1, Policy: webhook.Policy{AllowHTTP: true, AllowPrivateNetworks: true}}
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	configured := []storage.Line{
		{Handle: mainLine, Label: "Main line", Service: "imessage", Bridge: "sim", AdvancedFeatures: true},
		{Handle: smsLine, Label: "SMS line", Service: "sms", Bridge: "sim"},
		{Handle: macLine, Label: "Mac", Service: "imessage", Bridge: "messages"},
	}
	if !o.noSandbox {
		configured = append([]storage.Line{{Handle: sandboxLine, Label: "Sandbox", Service: "imessage", Bridge: "sim", IsSandbox: true}}, configured...)
	}
	lines, err := db.SyncLines(ctx, configured)
	if err != nil {
		t.Fatal(err)
	}
	store, err := files.Open(ctx, filepath.Join(dir, "files"), db, files.Options{MaxUploadBytes: 10 << 20, URLTTL: time.Hour, BaseURL: baseURL})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	network := sim.New(0)
	lim := config.Default().Limits
	srv := server.New(db, store, server.Options{MaxBodyBytes: lim.MaxBodyBytes, MaxAttempts: 3, SandboxQuota: 5,
		WebhookPolicy: webhook.Policy{AllowHTTP: true, AllowPrivateNetworks: true},
		StreamsPerKey: lim.StreamsPerKey, StreamLifetime: lim.StreamLifetime.Duration}, log)
	recv := delivery.NewReceiver(db, store)
	opts := admin.Options{
		API: server.AsHost(srv.Handler()), Inbound: recv, Simulator: network, SimAvailability: network.SetAvailability,
		WebhookTester: webhook.NewTester(webhookOpts()), Metrics: metrics.New(db, log).Handler(),
		Dashboard: console.NewSignIns(db, baseURL),
	}
	if o.adjust != nil {
		o.adjust(&opts)
	}
	ts := httptest.NewServer(admin.New(db, srv, opts, log).Handler())
	t.Cleanup(ts.Close)
	e := &env{t: t, db: db, srv: srv, recv: recv, network: network, store: store, url: ts.URL, lines: map[string]storage.Line{}, logs: logs, log: log}
	for _, l := range lines {
		e.lines[l.Handle] = l
	}
	return e
}

// response is an answer of the admin socket.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the answer into a map.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d %q is not a JSON object: %v", r.status, r.body, err)
	}
	return m
}

// decode decodes the answer into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d %q: %v", r.status, r.body, err)
	}
}

// data is the data of a list answer.
func (r response) data(t *testing.T) []map[string]any {
	t.Helper()
	var l struct {
		Data    []map[string]any `json:"data"`
		HasMore bool             `json:"has_more"`
	}
	r.decode(t, &l)
	if l.Data == nil {
		t.Fatalf("list answer without data: %s", r.body)
	}
	if l.HasMore {
		t.Errorf("admin lists have one page: %s", r.body)
	}
	return l.Data
}

// call makes a request of the admin socket with body as JSON (a string or
// []byte is sent as it is).
func (e *env) call(method, path string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
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
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		e.t.Errorf("%s %s: X-Request-Id = %q", method, path, id)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// ok makes a request that must answer status, and returns its JSON object.
func (e *env) ok(status int, method, path string, body any) map[string]any {
	e.t.Helper()
	r := e.call(method, path, body)
	if r.status != status {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, status)
	}
	return r.json(e.t)
}

// refused makes a request that must be refused in the spec's error shape
// with status, code and param, and returns the message.
func (e *env) refused(status int, code, param, method, path string, body any) string {
	e.t.Helper()
	r := e.call(method, path, body)
	var b struct {
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		e.t.Errorf("%s %s %v: answer %d %q is not JSON", method, path, body, r.status, r.body)
		return ""
	}
	if r.status != status || b.Error.Code != code || b.Error.Param != param || b.Error.Type == "" || b.Error.Message == "" {
		e.t.Errorf("%s %s %v: %d %s; want %d %s on %q", method, path, body, r.status, r.body, status, code, param)
	}
	if b.RequestID != r.header.Get("X-Request-Id") {
		e.t.Errorf("%s %s: request_id %q, header %q", method, path, b.RequestID, r.header.Get("X-Request-Id"))
	}
	return b.Error.Message
}

// inbound has contact from text line, through the admin socket, and
// returns the message as answered.
func (e *env) inbound(line, from, text string) map[string]any {
	e.t.Helper()
	return e.ok(http.StatusCreated, "POST", "/sim/inbound", map[string]any{"line": line, "from": from, "text": text})
}

// sent records a message the line's owner sent to contact from another
// device, as a bridge reports it, and returns it.
func (e *env) sent(line, contact, text string) storage.Message {
	e.t.Helper()
	l := e.lines[line]
	res, err := e.recv.Record(context.Background(), bridge.Inbound{Line: line, Service: l.Service, Chat: sim.OneToOne(l.Service, contact),
		GUID: sim.NewGUID(), Sender: line, IsFromMe: true, Text: &text, SentAt: time.Now()})
	if err != nil {
		e.t.Fatal(err)
	}
	if !res.Message.IsFromMe {
		e.t.Fatalf("recorded a message of the line as %+v", res.Message)
	}
	return res.Message
}

// message is a stored message.
func (e *env) message(id string) storage.Message {
	e.t.Helper()
	m, err := e.db.MessageByID(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}
