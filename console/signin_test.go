package console_test

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// The sign-in door against abuse, over real HTTP against a real daemon:
// slow and large sign-in forms, floods of connections and of failures,
// link scanners, a TLS proxy in front, and what a page may load.

// dialerFrom is a dialer whose connections come from ip, another loopback
// address (Linux routes all of 127/8 to the loopback interface); the test
// is skipped where ip cannot be used (macOS has only 127.0.0.1).
func (e *env) dialerFrom(ip string) *net.Dialer {
	e.t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		e.t.Skipf("cannot connect from %s (only Linux routes all of 127/8 to loopback): %v", ip, err)
	}
	c.Close()
	return d
}

// browserFrom is a browser on the host at ip.
func (e *env) browserFrom(ip string) *browser {
	e.t.Helper()
	b := e.browser()
	b.client.Transport = &http.Transport{DialContext: e.dialerFrom(ip).DialContext}
	return b
}

// startServing starts a daemon with more settings in its [server] table,
// which the test configuration already has.
func startServing(t *testing.T, settings string) *env {
	t.Helper()
	d := daemontest.New(t, "")
	doc, err := os.ReadFile(d.ConfigPath())
	if err == nil {
		err = os.WriteFile(d.ConfigPath(), []byte(strings.Replace(string(doc), "[server]\n", "[server]\n"+settings, 1)), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	return &env{t: t, d: d, base: d.URL(), admin: d.Admin()}
}

// rawConn is a connection to the API's listener, written and read by hand.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (e *env) rawFrom(d *net.Dialer) *rawConn {
	e.t.Helper()
	c, err := d.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return &rawConn{t: e.t, c: c, br: bufio.NewReader(c)}
}

// ask writes a request and reads its answer, which must come within 3 s.
func (rc *rawConn) ask(raw string) (int, string) {
	rc.t.Helper()
	rc.c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(rc.c, raw); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatalf("no answer within 3 s: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A sign-in form that trickles in is cut off a few seconds after its head,
// however it keeps moving; one larger than the form can be is refused.
func TestSignInBodyLimits(t *testing.T) {
	e := start(t, "")
	t.Run("slow", func(t *testing.T) {
		rc := e.rawFrom(&net.Dialer{})
		head := "POST /dashboard/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3000\r\n\r\ntoken="
		if _, err := io.WriteString(rc.c, head); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// One byte every 100 ms: never idle for long, 3,000 bytes in 5 minutes.
		go func() {
			for {
				time.Sleep(100 * time.Millisecond) // the attacker's pace, not a wait for the daemon
				if _, err := rc.c.Write([]byte("a")); err != nil {
					return
				}
			}
		}()
		rc.c.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(rc.br, nil)
		if err != nil {
			t.Fatalf("the trickling sign-in was not answered within 15 s: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 5s") || !resp.Close {
			t.Errorf("trickling sign-in: %d (close %v) %s, want 408 and the connection closed", resp.StatusCode, resp.Close, body)
		}
		if took > 7*time.Second {
			t.Errorf("cut off after %s, want within about 5 s", took.Round(time.Millisecond))
		}
	})
	t.Run("large", func(t *testing.T) {
		form := url.Values{"password": {strings.Repeat("p", 5000)}}
		if a := e.browser().do("POST", "/dashboard/login", form); a.status != http.StatusRequestEntityTooLarge {
			t.Errorf("a 5 KB sign-in form: %d, want 413", a.status)
		}
	})
}

// Slow unauthenticated connections, many from one address and more from a
// second, cannot keep an API client or /healthz out: one address holds a
// share of the connection cap, unauthenticated connections hold three
// quarters of it, and the last quarter serves those that authenticate (or
// are answered) within 5 s.
func TestSlowClientsLeaveRoom(t *testing.T) {
	e := start(t, "[limits]\nmax_connections = 16\n")
	key := e.d.Key(api.KeyRequest{})
	fromA, fromB, fromClient, fromProbe := e.dialerFrom("127.0.0.1"), e.dialerFrom("127.0.0.3"), e.dialerFrom("127.0.0.2"), e.dialerFrom("127.0.0.4")

	// Each flood connection sends part of a head and waits; a watcher
	// counts those the daemon has closed.
	flood := func(d *net.Dialer, n int) *atomic.Int32 {
		var open atomic.Int32
		for range n {
			rc := e.rawFrom(d)
			if _, err := io.WriteString(rc.c, "POST /dashboard/login HTTP/1.1\r\nHost: x\r\n"); err != nil {
				t.Fatal(err)
			}
			open.Add(1)
			go func() {
				io.Copy(io.Discard, rc.c) // returns when the daemon (or the test's end) closes it
				open.Add(-1)
			}()
		}
		return &open
	}
	openA := flood(fromA, 20) // 8 fit: an address's share of 16
	openB := flood(fromB, 20) // 4 fit in the open share, 1 in the reserve

	client := e.rawFrom(fromClient)
	lines := "GET /v1/lines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\n\r\n"
	if status, body := client.ask(lines); status != 200 {
		t.Fatalf("an API client behind the flood: %d %s", status, body)
	}
	if status, _ := e.rawFrom(fromProbe).ask("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); status != 200 {
		t.Fatalf("GET /healthz behind the flood: %d", status)
	}
	testkit.Eventually(t, 2*time.Second, func() bool { return openA.Load() == 8 && openB.Load() == 5 })

	// The connection taken from the reserve that never authenticates is
	// closed after 5 s; the API client's, which did, stays.
	testkit.Eventually(t, 10*time.Second, func() bool { return openB.Load() == 4 })
	if status, body := client.ask(lines); status != 200 {
		t.Fatalf("the API client's connection, after the reserve's time: %d %s", status, body)
	}
	if n := openA.Load(); n != 8 {
		t.Errorf("%d of the first address's connections open, want its 8 still", n)
	}
}

// Failures from many addresses, and more from one, lock out no valid link:
// not another address's, and not the failing address's own. The password
// stays slowed down for the failing address.
func TestLinkWorksAfterFailures(t *testing.T) {
	e := start(t, "")
	if err := e.adminDo("POST", "/dashboard/password", map[string]string{"password": "correct horse battery"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 55 {
		b := e.browserFrom(fmt.Sprintf("127.0.1.%d", i+1))
		if a := b.do("POST", "/dashboard/login", url.Values{"token": {"bogus"}}); a.status != http.StatusUnauthorized {
			t.Fatalf("bogus link %d: %d", i, a.status)
		}
	}
	guesser := e.browser()
	for i := range 10 {
		guesser.do("POST", "/dashboard/login", url.Values{"password": {fmt.Sprintf("wrong guess %d", i)}})
	}
	if a := guesser.do("POST", "/dashboard/login", url.Values{"password": {"correct horse battery"}}); a.status != http.StatusTooManyRequests {
		t.Errorf("the password from the failing address: %d, want 429", a.status)
	}
	for name, b := range map[string]*browser{"another address": e.browserFrom("127.0.0.2"), "the failing address": guesser} {
		if a := b.do("POST", "/dashboard/login", url.Values{"token": {e.link("")}}); a.status != http.StatusSeeOther {
			t.Errorf("a valid link from %s after 65 failures: %d %s", name, a.status, a.body)
		}
	}
}

// The page a link opens signs in only when its button is pressed: neither
// it nor the script submits the form, so a mail scanner that runs scripts
// does not spend the link (the browser test presses the button).
func TestSignInNeedsTheButton(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	page := b.do("GET", "/dashboard/login?token="+url.QueryEscape(e.link("")), nil).body
	if !strings.Contains(page, `<button type="submit">Sign in</button>`) || strings.Contains(page, "autosubmit") {
		t.Errorf("the link's page: want a sign-in button and nothing that submits by itself\n%s", page)
	}
	script := b.do("GET", "/dashboard/static/console.js", nil)
	if script.status != 200 || regexp.MustCompile(`\.(request)?[sS]ubmit\(|autosubmit`).MatchString(script.body) {
		t.Errorf("console.js (%d) submits a form by itself:\n%s", script.status, script.body)
	}
}

// Behind a TLS proxy on the host (public_url https://, the proxy trusted),
// the session cookie is Secure, the password is offered, and failures are
// counted per client the proxy names; from an address not trusted, what it
// names is ignored.
func TestBehindAProxy(t *testing.T) {
	const pw = "correct horse battery"
	guess := func(e *env, b *browser, password, client string) int {
		return b.do("POST", "/dashboard/login", url.Values{"password": {password}}, "X-Forwarded-For", "198.51.100.1, "+client).status
	}
	t.Run("trusted", func(t *testing.T) {
		e := startServing(t, "public_url = \"https://blueline.example\"\ntrusted_proxies = [\"127.0.0.1/32\"]\n")
		if err := e.adminDo("POST", "/dashboard/password", map[string]string{"password": pw}, nil); err != nil {
			t.Fatal(err)
		}
		b := e.browser()
		a := b.do("POST", "/dashboard/login", url.Values{"token": {e.linkURL("").Query().Get("token")}})
		if a.status != http.StatusSeeOther || !strings.Contains(a.header.Get("Set-Cookie"), "; Secure") {
			t.Errorf("sign-in behind the proxy: %d, Set-Cookie %q, want Secure", a.status, a.header.Get("Set-Cookie"))
		}
		if page := b.do("GET", "/dashboard/login", nil, "X-Forwarded-For", "203.0.113.7").body; !strings.Contains(page, `type="password"`) {
			t.Error("behind an https:// proxy the login page offers no password")
		}
		for i := range 5 {
			guess(e, b, fmt.Sprintf("wrong %d", i), "203.0.113.7")
		}
		if got := guess(e, b, pw, "203.0.113.7"); got != http.StatusTooManyRequests {
			t.Errorf("the guessing client, sixth try: %d, want 429", got)
		}
		if got := guess(e, b, pw, "203.0.113.8"); got != http.StatusSeeOther {
			t.Errorf("another client through the same proxy: %d, want 303", got)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		e := start(t, "")
		if err := e.adminDo("POST", "/dashboard/password", map[string]string{"password": pw}, nil); err != nil {
			t.Fatal(err)
		}
		b := e.browser()
		for i := range 5 {
			guess(e, b, fmt.Sprintf("wrong %d", i), "203.0.113.7")
		}
		if got := guess(e, b, pw, "203.0.113.8"); got != http.StatusTooManyRequests {
			t.Errorf("X-Forwarded-For from an address not trusted made another client: %d, want 429", got)
		}
	})
}

// Scripts and styles may come from the console's two files only, named in
// the policy; the static path serves nothing else, and an uploaded file
// (served at /files/) is not among what the policy admits.
func TestPolicyNamesTheStaticFiles(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	csp := b.do("GET", "/dashboard/login", nil).header.Get("Content-Security-Policy")
	directives := map[string]string{}
	for d := range strings.SplitSeq(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	for dir, file := range map[string]string{"script-src": "console.js", "style-src": "console.css"} {
		if want := e.base + "/dashboard/static/" + file; directives[dir] != want {
			t.Errorf("%s %q, want exactly %s", dir, directives[dir], want)
		}
	}
	key := e.d.Key(api.KeyRequest{})
	up := apitest.Client{TB: t, Base: e.base}.Call("POST", "/v1/files", key, "alert(1)", "Content-Type", "text/javascript", "X-Filename", "console.js")
	fileURL, _ := up.Body["url"].(string)
	u, err := url.Parse(fileURL)
	if up.Status != 201 || err != nil || strings.HasPrefix(u.Path, "/dashboard/static/") {
		t.Fatalf("upload: %d, URL %q, want one outside the static path", up.Status, fileURL)
	}
	for _, path := range []string{"/dashboard/static/", "/dashboard/static/" + up.Body["id"].(string), "/dashboard/static/x.js",
		"/dashboard/static/console.js/", "/dashboard/static/../static/console.css"} {
		if a := b.do("GET", path, nil); a.status != http.StatusNotFound && a.status/100 != 3 {
			t.Errorf("GET %s: %d, want 404", path, a.status)
		}
	}
	for _, file := range []string{"console.js", "console.css"} {
		if a := b.do("GET", "/dashboard/static/"+file, nil); a.status != 200 {
			t.Errorf("GET /dashboard/static/%s: %d", file, a.status)
		}
	}
}

// An owner's overview counts what is the owner's: not another owner's
// sandbox traffic or outbox items. The operator's counts all.
func TestOwnerOverview(t *testing.T) {
	e := start(t, "")
	apic := apitest.Client{TB: t, Base: e.base}
	ann, bea := e.d.Key(api.KeyRequest{Owner: "ann"}), e.d.Key(api.KeyRequest{Owner: "bea"})
	// Bea pairs her sandbox, schedules a message (waiting) and cancels
	// another (failed).
	code, _ := apic.Call("POST", "/v1/sandbox", bea, nil).Body["activation_code"].(string)
	in := e.d.Inbound(daemontest.SandboxLine, alice, code)
	later := time.Now().Add(time.Hour).UnixMilli()
	for i := range 2 {
		item := apic.Send(bea, map[string]any{"from": daemontest.SandboxLine, "to": in.ChatID, "text": "later", "send_at": later})
		if i == 1 {
			if r := apic.Call("POST", "/v1/outbox/cancel", bea, map[string]any{"id": item["id"]}); r.Status != 200 {
				t.Fatalf("cancel: %d %s", r.Status, r.Raw)
			}
		}
	}
	if code, _ := apic.Call("POST", "/v1/sandbox", ann, nil).Body["activation_code"].(string); code == "" {
		t.Fatal("ann's sandbox did not start")
	}

	sandboxRow := regexp.MustCompile(`(?s)<tr>\s*<td><strong>(?:<bdi>)?` + regexp.QuoteMeta("&#43;"+daemontest.SandboxLine[1:]) + `.*?</tr>`)
	for _, c := range []struct {
		owner           string
		traffic         bool
		waiting, failed string
	}{{"ann", false, "0 waiting", "0 failed"}, {"bea", true, "1 waiting", "1 failed"}, {"", true, "1 waiting", "1 failed"}} {
		b := e.browser()
		b.signIn(c.owner)
		page := b.do("GET", "/dashboard/", nil).body
		row := sandboxRow.FindString(page)
		if row == "" {
			t.Fatalf("%q: no sandbox line on the overview\n%s", c.owner, page)
		}
		if got := !strings.Contains(row, "<td>—</td>\n  <td>—</td>"); got != c.traffic {
			t.Errorf("%q's overview shows the sandbox's traffic: %v, want %v\n%s", c.owner, got, c.traffic, row)
		}
		if !strings.Contains(page, c.waiting+"</a>,") || !strings.Contains(page, c.failed+" in the last day") {
			t.Errorf("%q's overview: want %q and %q\n%s", c.owner, c.waiting, c.failed, page)
		}
		// Each count links to the outbox's list of what it counts.
		counts := outboxCount.FindAllStringSubmatch(page, -1)
		if len(counts) != 3 {
			t.Fatalf("%q's overview: outbox counts %q, want 3 links", c.owner, counts)
		}
		for _, m := range counts {
			list := b.do("GET", html.UnescapeString(m[1]), nil)
			if n := strings.Count(list.body, "<tr data-outbox="); list.status != 200 || strconv.Itoa(n) != m[2] {
				t.Errorf("%q's overview counts %s %s; the page it links to, %s, lists %d (%d)", c.owner, m[2], m[3], m[1], n, list.status)
			}
		}
	}
}

var outboxCount = regexp.MustCompile(`<a href="(/dashboard/outbox\?[^"]+)">(\d+) (waiting|being sent|failed in the last day)</a>`)

// What contacts and key holders write is shown isolated, so that
// right-to-left overrides in it cannot reorder the text around it.
func TestBidiIsolation(t *testing.T) {
	e := start(t, "")
	const evil = "\u202Eevil"
	m := e.d.Inbound(mainLine, alice, evil)
	if err := e.adminDo("POST", "/keys", api.KeyRequest{Label: evil, Owner: evil, Scopes: "lines:read"}, nil); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("")
	esc := strings.NewReplacer("+", "&#43;")
	checks := map[string][]string{
		"/dashboard/chats/" + m.ChatID:                       {`<p class="text" dir="auto">` + evil + `</p>`, `<bdi>` + esc.Replace(alice) + `</bdi>`, `<h1><bdi>` + esc.Replace(alice) + `</bdi></h1>`},
		"/dashboard/chats?line=" + url.QueryEscape(mainLine): {`<strong><bdi>` + esc.Replace(alice) + `</bdi></strong>`},
		"/dashboard/keys":                                    {`<td><bdi>` + evil + `</bdi></td><td><bdi>` + evil + `</bdi></td>`},
	}
	for path, wants := range checks {
		page := b.do("GET", path, nil).body
		for _, want := range wants {
			if !strings.Contains(page, want) {
				t.Errorf("%s: want %q\n%s", path, want, page)
			}
		}
	}
	if page := b.do("GET", "/dashboard/chats/"+m.ChatID, nil).body; !strings.Contains(page, "<title>\u2068"+esc.Replace(alice)+"\u2069 · Blueline</title>") {
		t.Errorf("the chat's window title is not isolated:\n%s", page)
	}
}
