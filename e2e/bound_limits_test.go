package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
)

// Limits that also bind what came later: uploads over the limit that a
// client can always read the refusal of, 401s that say how to
// authenticate, the availability budget, and MCP's attachment URLs.

// An upload one byte over max_upload_bytes, from a client that writes its
// whole request before it reads, always gets its 413 (never a reset) and
// then a clean close; one that announces it with Expect: 100-continue gets
// the 413 without sending the body.
func TestUploadOverLimitAlwaysAnswered(t *testing.T) {
	const limit = 1 << 20
	td := startTestDaemon(t, fmt.Sprintf("[files]\nmax_upload_bytes = %d\n", limit))
	key := td.key()
	addr := strings.TrimPrefix(td.base, "http://")
	body := strings.Repeat("x", limit+1)
	// A chunked body's size is learnt by reading it: 768 KiB more than the
	// limit is more than net/http drains by itself after an answer.
	chunked := strings.Repeat("x", limit+768<<10)
	head := "POST /v1/files HTTP/1.1\r\nHost: blueline\r\nAuthorization: Bearer " + key + "\r\nContent-Type: text/plain\r\n"

	for i := range 30 {
		var req string
		if i%2 == 0 {
			req = head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
		} else {
			req = head + fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunked), chunked)
		}
		if err := writeThenRead(addr, req, 413, "file_too_large"); err != nil {
			t.Fatalf("upload %d (%s): %v", i, map[bool]string{true: "Content-Length", false: "chunked"}[i%2 == 0], err)
		}
	}

	c := td.dialAPI()
	c.write(head + fmt.Sprintf("Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body)))
	resp, raw := c.read()
	if resp.StatusCode != 413 || !strings.Contains(string(raw), "file_too_large") {
		t.Fatalf("with Expect: 100-continue: %d %s", resp.StatusCode, raw)
	}
	if !c.closed() {
		t.Error("the connection stayed open after the refusal: the body it expects was never sent")
	}
}

// writeThenRead writes req whole, then reads one answer, which must have
// status and the error code, and then the end of the connection.
func writeThenRead(addr, req string, status int, code string) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	// A send buffer as small as macOS's default (Linux's grows to MiBs):
	// the body cannot all wait in buffers while the daemon reads nothing.
	if err := conn.(*net.TCPConn).SetWriteBuffer(128 << 10); err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		return fmt.Errorf("writing the request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer's body: %w", err)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode != status || json.Unmarshal(raw, &e) != nil || e.Error.Code != code {
		return fmt.Errorf("answered %d %s", resp.StatusCode, raw)
	}
	if resp.Close {
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			return fmt.Errorf("after Connection: close, %v instead of the end", err)
		}
	}
	return nil
}

// A guarded line's availability lookups that reach the network have an
// hourly budget, which even a read-only key spends; answers kept from the
// last hour cost nothing and keep coming.
func TestAvailabilityBudget(t *testing.T) {
	const guarded = "+15550000009"
	td := startTestDaemon(t, `
[[lines]]
handle = "`+guarded+`"
advanced_features = true
guard = true

[guard]
max_availability_lookups = 3
`)
	readOnly := td.key("--scopes", "messages:read")
	ask := func(line, h string) response {
		t.Helper()
		return td.call("GET", "/v1/availability?from="+line+"&handle="+h, readOnly, nil)
	}
	handles := []string{"+15551230001", "+15551230002", "+15551230003"}
	checked := map[string]any{}
	for _, h := range handles {
		r := ask(guarded, h)
		if r.Status != 200 {
			t.Fatalf("lookup of %s within the budget: %d %s", h, r.Status, r.Raw)
		}
		checked[h] = r.Body["checked_at"]
	}
	r := ask(guarded, "+15551230004")
	if r.Status != 429 || r.ErrCode() != "guard_availability_limit" || r.ErrType() != "rate_limit_error" {
		t.Fatalf("a lookup past the budget: %d %s", r.Status, r.Raw)
	}
	if wait, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || wait < 1 || wait > 1200 {
		t.Errorf("Retry-After %q: one lookup of 3 an hour comes back within 1200 s", r.Header.Get("Retry-After"))
	}
	for range 3 {
		for _, h := range handles {
			if r := ask(guarded, h); r.Status != 200 || r.Body["checked_at"] != checked[h] {
				t.Fatalf("a kept answer for %s: %d %s", h, r.Status, r.Raw)
			}
		}
	}
	// A line without the guard (the simulated network's default) has no
	// budget.
	for _, h := range append(handles, "+15551230004", "+15551230005") {
		if r := ask(mainLine, h); r.Status != 200 {
			t.Fatalf("lookup of %s on an unguarded line: %d %s", h, r.Status, r.Raw)
		}
	}
	for _, l := range td.listAll(td.key(), "/v1/lines") {
		limits := l["guard"].(map[string]any)["limits"].(map[string]any)
		if l["handle"] == guarded && limits["max_availability_lookups"] != float64(3) {
			t.Errorf("GET /v1/lines shows the guard's limits as %v", limits)
		}
	}
}

// MCP's send_message checks the key's scopes and request limit before it
// fetches an attachment's URL, and a fetch that fails says why without an
// address.
func TestMCPAttachmentURLChecksFirst(t *testing.T) {
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/menu.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "soup\n")
	}))
	defer site.Close()
	// Loopback URLs allowed, so that only the checks stand in the way.
	td := startTestDaemon(t, "[webhooks]\nallow_private_networks = true\n[limits]\nrequests_per_hour = 5\n")
	td.inbound(mainLine, alice, "send me the menu")
	send := func(key, url string) string {
		t.Helper()
		_, msg := mcpCall(t, td.mcpAgent(key), "send_message", map[string]any{"line": mainLine, "to": alice, "attachment": url})
		return msg
	}
	noAddress := func(what, msg string) {
		t.Helper()
		for _, addr := range []string{"127.0.0.1", "::1", "[::", "lookup", "dial"} {
			if strings.Contains(msg, addr) {
				t.Errorf("%s: %q reveals %q", what, msg, addr)
			}
		}
	}

	limited := td.key()
	for range 5 {
		td.call("GET", "/v1/lines", limited, nil)
	}
	for _, c := range []struct{ name, key, want string }{
		{"a read-only key", td.key("--scopes", "messages:read"), "insufficient_scope"},
		{"a key that cannot upload", td.key("--scopes", "messages:write"), "files:write"},
		{"a key over its request limit", limited, "rate_limit_exceeded"},
	} {
		if msg := send(c.key, site.URL+"/menu.txt"); !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want %s", c.name, msg, c.want)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("%s: the URL was fetched %d times", c.name, n)
		}
	}

	key := td.key()
	if msg := send(key, site.URL+"/menu.txt"); msg != "" || hits.Load() != 1 {
		t.Fatalf("a key that may send: %q, %d fetches", msg, hits.Load())
	}
	msg := send(key, site.URL+"/gone.txt")
	if msg != "attachment: the URL could not be fetched: HTTP 404" {
		t.Errorf("a missing file: %q", msg)
	}
	noAddress("a missing file", msg)

	// Without loopback URLs allowed: refused on the address the name
	// resolved to, which the message does not give.
	strict := startTestDaemon(t, "")
	strict.inbound(mainLine, alice, "send me the menu")
	local := strings.Replace(site.URL, "127.0.0.1", "localhost", 1) + "/menu.txt"
	_, msg = mcpCall(t, strict.mcpAgent(strict.key()), "send_message", map[string]any{"line": mainLine, "to": alice, "attachment": local})
	if msg != "attachment: the URL could not be fetched: not a public address" {
		t.Errorf("a loopback URL: %q", msg)
	}
	noAddress("a loopback URL", msg)
	if n := hits.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// Every 401 says how to authenticate (RFC 6750), on each operation of the
// API document that needs a key, and on the MCP endpoint: for a missing
// key the realm, for a key that is no good also error="invalid_token".
func TestUnauthorizedChallenges(t *testing.T) {
	td := startTestDaemon(t, "")
	revoked := td.key()
	id, _, _ := strings.Cut(td.mustCLI("keys", "list"), "\t")
	td.mustCLI("keys", "revoke", id)
	doc, err := apitest.LoadDocument()
	if err != nil {
		t.Fatal(err)
	}
	const realm = `Bearer realm="blueline"`
	challenges := []struct{ auth, code, want string }{
		{"", "missing_api_key", realm},
		{"Basic dXNlcjpwYXNz", "invalid_api_key", realm + `, error="invalid_token"`},
		{"Bearer " + revoked, "invalid_api_key", realm + `, error="invalid_token"`},
	}
	check := func(what string, status int, header http.Header, code string, c struct{ auth, code, want string }) {
		t.Helper()
		if status != 401 || code != c.code || header.Get("WWW-Authenticate") != c.want {
			t.Errorf("%s with %q: %d %s, WWW-Authenticate %q, want %q", what, c.auth, status, code, header.Get("WWW-Authenticate"), c.want)
		}
	}
	operations := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if method == http.MethodOptions || op.Security != nil && len(*op.Security) == 0 {
				continue // CORS preflights, and the public paths
			}
			operations++
			for _, c := range challenges {
				r := td.api().Call(method, path, "", nil, "Authorization", c.auth)
				check(method+" "+path, r.Status, r.Header, r.ErrCode(), c)
			}
		}
	}
	if operations < 25 {
		t.Fatalf("only %d operations need a key", operations)
	}
	for _, c := range challenges {
		req, _ := http.NewRequest(http.MethodPost, td.base+"/mcp", strings.NewReader("{}"))
		req.Header.Set("Authorization", c.auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		check("POST /mcp", resp.StatusCode, resp.Header, body.Error.Code, c)
	}
}
