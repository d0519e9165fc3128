package apidoc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apidoc"
	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/testkit"
)

func TestDocumentLoads(t *testing.T) {
	doc, err := apitest.LoadDocument()
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q: want 3.1", doc.OpenAPI)
	}
	if !json.Valid(apidoc.JSON()) {
		t.Error("openapi.json is not valid JSON")
	}
	// Every event a webhook can subscribe to is described, and no other.
	var events []string
	for name := range doc.Webhooks {
		events = append(events, name)
	}
	slices.Sort(events)
	want := slices.Sorted(slices.Values(api.WebhookEvents))
	if !slices.Equal(events, want) {
		t.Errorf("webhooks %v, want api.WebhookEvents %v", events, want)
	}
	enum := doc.Components.Schemas["WebhookEventName"].Value.Enum
	if len(enum) != len(want) {
		t.Errorf("WebhookEventName enum %v, want %v", enum, want)
	}
}

// route is one method and path of server/routes.go's routes().
type route struct{ method, path, scope string }

// serverRoutes reads routes() from server/routes.go: each r.METHOD(path,
// handler) call, and the scope of s.api(scope, …) handlers ("" when the
// route needs none; "*" for anyScope).
func serverRoutes(t *testing.T) []route {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "server", "routes.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []route
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "routes" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != strings.ToUpper(sel.Sel.Name) {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: route path is not a literal", fset.Position(call.Pos()))
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			r := route{method: sel.Sel.Name, path: toTemplate(p)}
			if h, ok := call.Args[1].(*ast.CallExpr); ok {
				if hs, ok := h.Fun.(*ast.SelectorExpr); ok && hs.Sel.Name == "api" && len(h.Args) > 0 {
					switch a := h.Args[0].(type) {
					case *ast.BasicLit:
						r.scope, _ = strconv.Unquote(a.Value)
					case *ast.Ident:
						r.scope = "*" // anyScope
					}
				}
			}
			out = append(out, r)
			return false
		})
	}
	if len(out) == 0 {
		t.Fatal("found no routes in server/routes.go routes()")
	}
	return out
}

// toTemplate turns httprouter's /files/:id into OpenAPI's /files/{id}.
func toTemplate(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

func TestRoutesMatchDocument(t *testing.T) {
	doc, err := apitest.LoadDocument()
	if err != nil {
		t.Fatal(err)
	}
	inCode := map[string]route{}
	for _, r := range serverRoutes(t) {
		key := r.method + " " + r.path
		inCode[key] = r
		item := doc.Paths.Find(r.path)
		if item == nil || item.GetOperation(r.method) == nil {
			t.Errorf("%s is routed in server/routes.go but not in the document", key)
			continue
		}
		op := item.GetOperation(r.method)
		scope, _ := op.Extensions["x-blueline-scope"].(string)
		switch {
		case r.scope == "*" || strings.HasPrefix(r.path, "/files/") || !strings.HasPrefix(r.path, "/v1/"):
			if scope != "" {
				t.Errorf("%s: document says scope %q, the code needs none", key, scope)
			}
		case scope != r.scope:
			t.Errorf("%s: document says scope %q, the code needs %q", key, scope, r.scope)
		}
		needsKey := len(doc.Security) > 0 && (op.Security == nil || len(*op.Security) > 0)
		// A route wrapped in s.api(…) authenticates; the others do not.
		if wantKey := r.scope != ""; needsKey != wantKey {
			t.Errorf("%s: document says a key is needed: %v; the code: %v", key, needsKey, wantKey)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			key := method + " " + path
			if method == http.MethodOptions {
				// CORS answers a preflight on every path, before routing.
				continue
			}
			if path == server.MCPPath {
				// The daemon mounts the MCP endpoint in front of the API's
				// routes; its transport is stateless and takes only POST,
				// with a key and no scope.
				if method != http.MethodPost || item.GetOperation(method).Security != nil || item.GetOperation(method).Extensions["x-blueline-scope"] != nil {
					t.Errorf("%s: the MCP endpoint takes POST with a key and no scope", key)
				}
				continue
			}
			if _, ok := inCode[key]; !ok {
				t.Errorf("%s is documented but not routed in server/routes.go", key)
			}
		}
		if item.Options == nil {
			t.Errorf("%s: no OPTIONS (CORS preflight) operation", path)
		}
	}
	if doc.Paths.Find(server.MCPPath) == nil {
		t.Errorf("the MCP endpoint %s is not in the document", server.MCPPath)
	}
}

// testDaemon is a daemon of the simulated network, as daemon.Start runs
// it, with a key and a validating client.
type testDaemon struct {
	t       *testing.T
	cfgPath string
	base    string
	key     string
	v       *apitest.Validator
	client  *http.Client
}

const (
	mainLine  = daemontest.MainLine // advanced features
	plainLine = daemontest.PlainLine
	alice     = daemontest.Alice
	bob       = daemontest.Bob
	carol     = daemontest.Carol
)

func startDaemon(t *testing.T, extra string) *testDaemon {
	t.Helper()
	d := daemontest.Start(t, extra)
	v, err := apitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{t: t, cfgPath: d.ConfigPath(), base: d.URL(), v: v,
		client: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	td.key = strings.TrimSpace(td.cli("keys", "create", "--label", "apidoc", "--owner", "apidoc@example.com"))
	return td
}

// cli runs a blueline command against the daemon and returns its output.
func (td *testDaemon) cli(args ...string) string {
	td.t.Helper()
	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), cli.Build{}, append(args, "--config", td.cfgPath), nil, &out, &errOut); code != 0 {
		td.t.Fatalf("blueline %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

func (td *testDaemon) simJSON(args ...string) map[string]any {
	td.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(td.cli(append([]string{"sim"}, args...)...)), &m); err != nil {
		td.t.Fatal(err)
	}
	return m
}

// exchange is one validated request and its answer.
type exchange struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
	req    *http.Request
}

// newRequest builds a request; a non-string body is sent as JSON.
func (td *testDaemon) newRequest(method, path string, body any, header ...string) (*http.Request, []byte) {
	td.t.Helper()
	var data []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			td.t.Fatal(err)
		}
	}
	u := path
	if !strings.HasPrefix(u, "http") {
		u = td.base + path
	}
	req, err := http.NewRequest(method, u, bytes.NewReader(data))
	if err != nil {
		td.t.Fatal(err)
	}
	if data == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if _, ok := body.([]byte); !ok && data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+td.key)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	return req, data
}

// do sends a request, checks that the document accepts the exchange and
// that the status is want.
func (td *testDaemon) do(want int, method, path string, body any, header ...string) exchange {
	td.t.Helper()
	req, data := td.newRequest(method, path, body, header...)
	resp, raw, err := td.v.Do(td.client, req, data)
	if resp == nil {
		td.t.Fatalf("%s %s: %v", method, path, err)
	}
	if err != nil {
		td.t.Errorf("%s %s (%d %s): %v", method, path, resp.StatusCode, raw, err)
	}
	return td.answer(want, req, resp, raw)
}

// doInvalid sends a request the document refuses (to see the server's
// answer), checks that the request is refused and the response accepted.
func (td *testDaemon) doInvalid(want int, method, path string, body any, header ...string) exchange {
	td.t.Helper()
	req, data := td.newRequest(method, path, body, header...)
	resp, raw, err := td.v.Do(td.client, req, data)
	if resp == nil {
		td.t.Fatalf("%s %s: %v", method, path, err)
	}
	var reqErr *apitest.RequestError
	var respErr *apitest.ResponseError
	if !errors.As(err, &reqErr) {
		td.t.Errorf("%s %s: the document accepted a request the server refuses (%d %s)", method, path, resp.StatusCode, raw)
	} else {
		td.t.Logf("%s %s refused: %.200v", method, path, reqErr)
	}
	if errors.As(err, &respErr) {
		td.t.Errorf("%s %s (%d %s): %v", method, path, resp.StatusCode, raw, respErr)
	}
	return td.answer(want, req, resp, raw)
}

func (td *testDaemon) answer(want int, req *http.Request, resp *http.Response, raw []byte) exchange {
	td.t.Helper()
	if resp.StatusCode != want {
		td.t.Fatalf("%s %s: status %d, want %d: %s", req.Method, req.URL, resp.StatusCode, want, raw)
	}
	ex := exchange{status: resp.StatusCode, header: resp.Header, raw: raw, req: req}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &ex.body); err != nil {
			td.t.Fatalf("%s %s: %v: %s", req.Method, req.URL, err, raw)
		}
	}
	return ex
}

// waitSent polls an outbox item until it is sent.
func (td *testDaemon) waitSent(id string) {
	td.t.Helper()
	testkit.Eventually(td.t, 10*time.Second, func() bool {
		return td.do(200, "GET", "/v1/outbox?id="+id, nil).body["status"] == "sent"
	})
}

func TestLiveExchanges(t *testing.T) {
	td := startDaemon(t, "")
	q := "?from=" + mainLine + "&to=" + alice

	td.do(200, "GET", "/healthz", nil)
	td.do(200, "HEAD", "/healthz", nil)
	td.do(200, "GET", "/readyz", nil)
	td.do(204, "OPTIONS", "/v1/messages", nil, "Access-Control-Request-Method", "POST")

	td.do(200, "GET", "/v1/lines", nil)
	in := td.simJSON("inbound", "--line", mainLine, "--from", alice, "--text", "hello")
	td.do(200, "GET", "/v1/chats?from="+mainLine, nil)
	td.do(200, "GET", "/v1/chats?from="+mainLine+"&limit=1", nil)
	list := td.do(200, "GET", "/v1/messages"+q+"&limit=1", nil)
	if list.body["has_more"] != false {
		t.Errorf("one message, a page of 1: %s", list.raw)
	}

	sent := td.do(201, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "hi back", "reply_to": in["id"]},
		"Idempotency-Key", "k1")
	replay := td.do(201, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "hi back", "reply_to": in["id"]},
		"Idempotency-Key", "k1")
	if replay.body["id"] != sent.body["id"] || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay %s of %s", replay.raw, sent.raw)
	}
	td.waitSent(sent.body["id"].(string))
	msgs := td.do(200, "GET", "/v1/messages"+q, nil)
	if n := len(msgs.body["data"].([]any)); n != 2 {
		t.Errorf("%d messages, want 2: %s", n, msgs.raw)
	}

	// Files: upload, redirect, download (GET and HEAD), and as an attachment.
	file := td.do(201, "POST", "/v1/files", []byte("BEGIN:VCARD\r\nEND:VCARD\r\n"), "Content-Type", "text/vcard", "X-Filename", "card.vcf")
	fileID := file.body["id"].(string)
	redirect := td.do(302, "GET", "/v1/files?id="+fileID, nil)
	td.do(200, "GET", redirect.header.Get("Location"), nil, "Authorization", "")
	td.do(200, "HEAD", redirect.header.Get("Location"), nil, "Authorization", "")
	td.do(206, "GET", redirect.header.Get("Location"), nil, "Authorization", "", "Range", "bytes=0-4")
	td.do(403, "GET", "/files/"+fileID+"?expires=1&signature=00", nil, "Authorization", "")
	td.do(201, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "attachments": []string{fileID}})

	// Audio messages, on both paths; a file that is not audio is refused.
	audio := td.do(201, "POST", "/v1/files", []byte("not really m4a"), "Content-Type", "audio/mp4", "X-Filename", "memo.m4a")
	memo := td.do(201, "POST", "/v1/audio-messages", map[string]any{"from": mainLine, "to": alice, "audio_message": audio.body["id"]})
	td.waitSent(memo.body["id"].(string))
	// The voice memo, with its attachment's signed URL, and the card.
	td.do(200, "GET", "/v1/messages"+q+"&limit=2", nil)
	td.do(201, "POST", "/v1/voice-notes", map[string]any{"from": mainLine, "to": alice, "voice_note": audio.body["id"]})
	td.do(400, "POST", "/v1/audio-messages", map[string]any{"from": mainLine, "to": alice, "audio_message": fileID})

	// Reactions, typing and receipts.
	td.do(201, "POST", "/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": in["guid"], "type": "love"})
	td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", in["id"].(string), "--type", "laugh")
	td.do(200, "GET", "/v1/reactions?message_id="+in["id"].(string), nil)
	td.do(201, "POST", "/v1/typing", map[string]any{"from": mainLine, "to": alice, "state": "off"})
	td.do(200, "GET", "/v1/typing"+q, nil)
	td.do(201, "POST", "/v1/receipts", map[string]any{"from": mainLine, "to": alice})
	td.do(200, "GET", "/v1/receipts"+q, nil)

	// The MCP endpoint: the key first, then the protocol.
	td.do(401, "POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, "Authorization", "")
	td.do(200, "POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "apidoc", "version": "1"}}},
		"Accept", "application/json, text/event-stream")
	td.do(400, "POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}, "Accept", "application/json")

	// The sandbox, any key with an owner.
	td.do(200, "GET", "/v1/sandbox", nil)
	td.do(201, "POST", "/v1/sandbox", nil)
	td.do(200, "POST", "/v1/sandbox", nil)

	// Errors.
	td.do(401, "GET", "/v1/lines", nil, "Authorization", "")
	td.do(401, "GET", "/v1/lines", nil, "Authorization", "Bearer sk_live_nope")
	td.do(404, "GET", "/v1/outbox?id=obx_1", nil)
	td.do(404, "GET", "/v1/messages?from=+15559999999&to="+alice, nil)
	td.do(404, "GET", "/v1/messages?from="+mainLine+"&to=cht_1", nil)
	td.do(403, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": "+15551110009", "text": "hi"})
	td.do(400, "POST", "/v1/reactions", map[string]any{"from": plainLine, "to": alice, "message_id": in["id"], "type": "love"})
	td.doInvalid(400, "GET", "/v1/messages?from="+mainLine, nil)
	td.doInvalid(400, "GET", "/v1/chats?from="+mainLine+"&limit=101", nil)
	td.doInvalid(400, "GET", "/v1/outbox?id=msg_1", nil)
	td.doInvalid(400, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice})
	td.doInvalid(400, "POST", "/v1/messages", []byte("{"), "Content-Type", "application/json")
	td.doInvalid(400, "POST", "/v1/reactions", map[string]any{"from": mainLine, "to": alice, "message_id": in["id"], "type": "wow"})
	td.doInvalid(400, "POST", "/v1/files", []byte{}, "Content-Type", "text/plain")
	limited := strings.TrimSpace(td.cli("keys", "create", "--label", "ro", "--scopes", "lines:read"))
	td.do(403, "GET", "/v1/chats?from="+mainLine, nil, "Authorization", "Bearer "+limited)
}

func TestLiveWebhooks(t *testing.T) {
	var mu sync.Mutex
	type delivery struct {
		header http.Header
		body   []byte
	}
	var got []delivery
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Clone(), body})
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	td := startDaemon(t, "[webhooks]\nallow_http = true\nallow_private_networks = true\n")

	created := td.do(201, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": recv.URL + "/hook", "events": api.WebhookEvents})
	td.do(200, "GET", "/v1/webhooks?from="+mainLine, nil)
	td.doInvalid(400, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": recv.URL, "events": []string{"typing.started"}})

	in := td.simJSON("inbound", "--line", mainLine, "--from", alice, "--text", "see you at 5")
	id := in["id"].(string)
	td.simJSON("edit", "--line", mainLine, "--from", alice, "--message", id, "--text", "see you at 6")
	td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", id, "--type", "love")
	td.simJSON("reaction", "--line", mainLine, "--from", alice, "--message", id, "--type", "love", "--remove")
	td.do(201, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "on my way"})
	want := []string{"message.received", "message.edited", "reaction.added", "reaction.removed", "message.sent"}
	eventNames := func() []string {
		var evs []string
		for _, d := range got {
			var env struct{ Event string }
			json.Unmarshal(d.body, &env)
			evs = append(evs, env.Event)
		}
		return evs
	}
	waitEvents(t, &mu, eventNames, want)
	td.simJSON("read", "--line", mainLine, "--from", alice)
	td.simJSON("unsend", "--line", mainLine, "--from", alice, "--message", id)
	grp := td.simJSON("inbound", "--line", mainLine, "--from", alice, "--text", "hi all", "--group", "Climbing", "--participants", alice+","+bob)
	td.simJSON("group", "--line", mainLine, "--chat", grp["chat_id"].(string), "--by", alice, "--rename", "Bouldering")
	td.simJSON("group", "--line", mainLine, "--chat", grp["chat_id"].(string), "--by", alice, "--add", carol)
	td.do(200, "GET", "/v1/chats?from="+mainLine, nil)
	// An agent's chat changing hands, and a lease taken and released.
	td.simJSON("owner-send", "--line", mainLine, "--to", alice, "--text", "I'll answer this one")
	td.do(200, "POST", "/v1/chats/resume", map[string]any{"from": mainLine, "to": alice})
	td.do(200, "POST", "/v1/chats/lease", map[string]any{"from": mainLine, "to": alice, "ttl_seconds": 60, "label": "drift"})
	td.do(200, "DELETE", "/v1/chats/lease?"+url.Values{"from": {mainLine}, "to": {alice}}.Encode(), nil)
	td.do(404, "DELETE", "/v1/chats/lease?"+url.Values{"from": {mainLine}, "to": {alice}}.Encode(), nil)
	waitEvents(t, &mu, eventNames, append(want, "message.delivered", "receipt.read", "message.unsent", "chat.updated",
		"chat.handoff", "chat.leased", "chat.released"))

	mu.Lock()
	defer mu.Unlock()
	for _, d := range got {
		if err := td.v.ValidateEvent(context.Background(), d.header, d.body); err != nil {
			t.Errorf("delivery %s: %v", d.body, err)
		}
	}
	// A drifted delivery is refused: data without line_handle.
	var env map[string]any
	json.Unmarshal(got[0].body, &env)
	delete(env["data"].(map[string]any), "line_handle")
	drifted, _ := json.Marshal(env)
	if err := td.v.ValidateEvent(context.Background(), got[0].header, drifted); err == nil {
		t.Errorf("a delivery without data.line_handle passed: %s", drifted)
	}
	td.do(200, "DELETE", "/v1/webhooks", map[string]any{"id": created.body["id"]})
	td.do(404, "DELETE", "/v1/webhooks", map[string]any{"id": created.body["id"]})
}

// waitEvents waits until events() holds every one of want.
func waitEvents(t *testing.T, mu *sync.Mutex, events func() []string, want []string) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, func() bool {
		mu.Lock()
		have := events()
		mu.Unlock()
		return !slices.ContainsFunc(want, func(e string) bool { return !slices.Contains(have, e) })
	})
}

// TestRejectsDrift changes real answers the way a server change would and
// checks that the document notices.
func TestRejectsDrift(t *testing.T) {
	td := startDaemon(t, "")
	td.simJSON("inbound", "--line", mainLine, "--from", alice, "--text", "hello")
	lines := td.do(200, "GET", "/v1/lines", nil)
	msgs := td.do(200, "GET", "/v1/messages?from="+mainLine+"&to="+alice, nil)
	sent := td.do(201, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "hi"})
	notFound := td.do(404, "GET", "/v1/outbox?id=obx_1", nil)

	edit := func(ex exchange, f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(ex.raw, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, _ := json.Marshal(m)
		return out
	}
	first := func(m map[string]any) map[string]any { return m["data"].([]any)[0].(map[string]any) }
	cases := []struct {
		name   string
		ex     exchange
		status int
		body   []byte
	}{
		{"a line without a required field", lines, 200, edit(lines, func(m map[string]any) { delete(first(m), "is_sandbox") })},
		{"a message with an undocumented field", msgs, 200, edit(msgs, func(m map[string]any) { first(m)["colour"] = "blue" })},
		{"a message whose edited_at is a string", msgs, 200, edit(msgs, func(m map[string]any) { first(m)["edited_at"] = "yesterday" })},
		{"a list with has_more but no cursor", msgs, 200, edit(msgs, func(m map[string]any) { m["has_more"] = true })},
		{"an outbox status outside the enum", sent, 201, edit(sent, func(m map[string]any) { m["status"] = "queued" })},
		{"an outbox item with a null attempts", sent, 201, edit(sent, func(m map[string]any) { m["attempts"] = nil })},
		{"an error code of another status", notFound, 404, edit(notFound, func(m map[string]any) {
			m["error"].(map[string]any)["code"] = "invalid_api_key"
		})},
		{"an undocumented status", lines, 418, lines.raw},
	}
	for _, c := range cases {
		err := td.v.ValidateResponse(context.Background(), c.ex.req, c.status, c.ex.header, c.body)
		if err == nil {
			t.Errorf("%s passed: %s", c.name, c.body)
			continue
		}
		t.Logf("%s: %.200v", c.name, err)
	}
	// One validator serves a test's concurrent requests.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, ex := range []exchange{lines, msgs, sent, notFound} {
				if err := td.v.ValidateResponse(context.Background(), ex.req, ex.status, ex.header, ex.raw); err != nil {
					t.Errorf("concurrent %s %s: %v", ex.req.Method, ex.req.URL, err)
				}
			}
		})
	}
	wg.Wait()

	// A missing header the document requires.
	h := lines.header.Clone()
	h.Del("X-Request-Id")
	if err := td.v.ValidateResponse(context.Background(), lines.req, 200, h, lines.raw); err == nil {
		t.Error("an answer without X-Request-Id passed")
	}
	// A 429 without Retry-After.
	body := []byte(`{"error":{"type":"rate_limit_error","code":"rate_limit_exceeded","message":"slow down"},"request_id":"req_2222222222222222222222222a"}`)
	hdr := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_2222222222222222222222222a"}}
	if err := td.v.ValidateResponse(context.Background(), lines.req, 429, hdr, body); err == nil {
		t.Error("a 429 without Retry-After passed")
	}
	hdr.Set("Retry-After", "3")
	if err := td.v.ValidateResponse(context.Background(), lines.req, 429, hdr, body); err != nil {
		t.Errorf("a 429 with Retry-After: %v", err)
	}
	// An undocumented route.
	req, _ := http.NewRequest("GET", td.base+"/v1/contacts", nil)
	var routeErr *apitest.RouteError
	if err := td.v.ValidateResponse(context.Background(), req, 404, hdr, nil); !errors.As(err, &routeErr) {
		t.Errorf("GET /v1/contacts: %v, want a RouteError", err)
	}
}

// TestLiveLimits provokes the answers of the limits: 413 for a JSON body
// and an upload, 429 with Retry-After for the rate limit and the sandbox's
// refusal before activation.
func TestLiveLimits(t *testing.T) {
	td := startDaemon(t, "[limits]\nmax_body_bytes = 1024\nrequests_per_hour = 6\n[files]\nmax_upload_bytes = 16\n")
	td.do(413, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": strings.Repeat("x", 2000)})
	td.do(413, "POST", "/v1/files", bytes.Repeat([]byte("x"), 17), "Content-Type", "text/plain")
	td.do(403, "POST", "/v1/messages", map[string]any{"from": daemontest.SandboxLine, "to": alice, "text": "hi"})
	td.do(201, "POST", "/v1/sandbox", nil)
	for range 2 {
		td.do(200, "GET", "/v1/sandbox", nil)
	}
	limited := td.do(429, "GET", "/v1/lines", nil)
	if limited.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", limited.header)
	}
}
