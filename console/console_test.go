package console_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
)

// The console's doors, over real HTTP against a real daemon: sign-in,
// cookies, CSRF, cross-origin refusal, the password's limits, and what an
// owner's session may see. The browser walk is in e2e (TestConsoleInABrowser).

const (
	mainLine = daemontest.MainLine
	alice    = daemontest.Alice
)

type env struct {
	t     *testing.T
	d     *daemontest.Daemon
	base  string
	admin *adminsock.Client
}

func start(t *testing.T, extra string) *env {
	t.Helper()
	d := daemontest.Start(t, extra)
	return &env{t: t, d: d, base: d.URL(), admin: d.Admin()}
}

func (e *env) adminDo(method, path string, in, out any) error {
	return e.admin.Do(context.Background(), method, path, in, out)
}

// link asks the admin socket for a login link and returns its token.
func (e *env) link(owner string) string {
	e.t.Helper()
	u := e.linkURL(owner)
	if "http://"+u.Host != e.base {
		e.t.Fatalf("login link %s: want %s/dashboard/login?token=…", u, e.base)
	}
	return u.Query().Get("token")
}

// linkURL asks the admin socket for a login link.
func (e *env) linkURL(owner string) *url.URL {
	e.t.Helper()
	var out struct {
		URL string `json:"url"`
	}
	if err := e.adminDo("POST", "/dashboard/link", map[string]string{"owner": owner}, &out); err != nil {
		e.t.Fatal(err)
	}
	u, err := url.Parse(out.URL)
	if err != nil || u.Path != "/dashboard/login" || u.Query().Get("token") == "" {
		e.t.Fatalf("login link %q: want …/dashboard/login?token=…", out.URL)
	}
	return u
}

// browser is an HTTP client with cookies that does not follow redirects,
// sending what a browser sends on a same-origin form post.
type browser struct {
	e      *env
	client *http.Client
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, headers ...string) answer {
	b.e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.e.base+path, body)
	if err != nil {
		b.e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.e.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(data)}
}

// signIn spends a login link of owner.
func (b *browser) signIn(owner string) {
	b.e.t.Helper()
	a := b.do("POST", "/dashboard/login", url.Values{"token": {b.e.link(owner)}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/dashboard/" {
		b.e.t.Fatalf("sign-in: %d %s", a.status, a.body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's token off a page.
func (b *browser) csrf() string {
	b.e.t.Helper()
	m := csrfField.FindStringSubmatch(b.do("GET", "/dashboard/keys", nil).body)
	if m == nil {
		b.e.t.Fatal("no CSRF token on the keys page")
	}
	return m[1]
}

func TestSignInWithALink(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	if a := b.do("GET", "/dashboard/", nil); a.status != http.StatusSeeOther || a.header.Get("Location") != "/dashboard/login" {
		t.Fatalf("signed out, GET /dashboard/: %d to %q, want 303 to the login page", a.status, a.header.Get("Location"))
	}
	token := e.link("")
	// Fetching the link only shows a button: a link previewer does not spend it.
	page := b.do("GET", "/dashboard/login?token="+url.QueryEscape(token), nil)
	if page.status != 200 || !strings.Contains(page.body, `value="`+token+`"`) {
		t.Fatalf("GET the link: %d, want the sign-in form carrying the token", page.status)
	}
	a := b.do("POST", "/dashboard/login", url.Values{"token": {token}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("POST the token: %d %s", a.status, a.body)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "blueline_session" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/dashboard/" || cookie.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/dashboard/, not Secure over plain HTTP", cookie)
	}
	if a := b.do("GET", "/dashboard/", nil); a.status != 200 || !strings.Contains(a.body, "<h1><bdi>Overview</bdi></h1>") {
		t.Fatalf("signed in, GET /dashboard/: %d", a.status)
	}
	// Once only.
	other := e.browser()
	if a := other.do("POST", "/dashboard/login", url.Values{"token": {token}}); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "unknown, used or expired") {
		t.Fatalf("the link a second time: %d %s", a.status, a.body)
	}
	// The session is listed on the admin socket, and ends there.
	var sessions struct {
		Data []api.SessionInfo `json:"data"`
	}
	if err := e.adminDo("GET", "/dashboard/sessions", nil, &sessions); err != nil || len(sessions.Data) != 1 || sessions.Data[0].Via != "link" {
		t.Fatalf("sessions: %+v %v", sessions, err)
	}
	if err := e.adminDo("POST", "/dashboard/sessions/end", map[string]string{"id": sessions.Data[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	if a := b.do("GET", "/dashboard/", nil); a.status != http.StatusSeeOther {
		t.Fatalf("after the session ended, GET /dashboard/: %d, want 303 to the login page", a.status)
	}
}

func TestSignOut(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	if a := b.do("POST", "/dashboard/logout", url.Values{"csrf": {b.csrf()}}); a.status != http.StatusSeeOther {
		t.Fatalf("sign out: %d %s", a.status, a.body)
	}
	if a := b.do("GET", "/dashboard/keys", nil); a.status != http.StatusSeeOther {
		t.Fatalf("after signing out, GET /dashboard/keys: %d, want 303", a.status)
	}
}

func TestFormsNeedTheirToken(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	token := b.csrf()
	create := url.Values{"label": {"x"}, "scope": {"lines:read"}}
	for name, form := range map[string]url.Values{"no token": create, "a wrong token": {"label": {"x"}, "scope": {"lines:read"}, "csrf": {token + "x"}}} {
		if a := b.do("POST", "/dashboard/keys", form); a.status != http.StatusForbidden {
			t.Errorf("create a key with %s: %d, want 403", name, a.status)
		}
	}
	// Another site's form, even with the token, is refused before any
	// handler (Go's cross-origin protection).
	form := url.Values{"label": {"x"}, "scope": {"lines:read"}, "csrf": {token}}
	if a := b.do("POST", "/dashboard/keys", form, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); a.status != http.StatusForbidden {
		t.Errorf("a cross-site post: %d, want 403", a.status)
	}
	var keys struct {
		Data []api.KeyInfo `json:"data"`
	}
	if err := e.adminDo("GET", "/keys", nil, &keys); err != nil || len(keys.Data) != 0 {
		t.Fatalf("refused forms made keys: %+v %v", keys.Data, err)
	}
	if a := b.do("POST", "/dashboard/keys", form); a.status != http.StatusCreated || !regexp.MustCompile(`sk_live_[0-9A-Za-z]{40}`).MatchString(a.body) {
		t.Fatalf("create a key with the token: %d", a.status)
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	for _, path := range []string{"/dashboard/login", "/dashboard/static/console.js"} {
		a := b.do("GET", path, nil)
		csp := a.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src " + e.base + "/dashboard/static/console.js;", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy allows inline code: %q", path, csp)
		}
		if a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", path, a.header)
		}
		if a.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: the console answers CORS: %q", path, a.header.Get("Access-Control-Allow-Origin"))
		}
	}
}

// Under the strict policy, inline code would not run: the templates have
// none, and no external resource either.
func TestTemplatesHaveNoInlineCode(t *testing.T) {
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|<script>|\son[a-z]+=|\sstyle=|javascript:|(?:src|href)="(?:https?:)?//`)
	err := fs.WalkDir(os.DirFS("templates"), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(filepath.Join("templates", path))
		if err != nil {
			return err
		}
		for _, m := range inline.FindAllString(string(data), -1) {
			t.Errorf("%s: %q", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPasswordSignIn(t *testing.T) {
	e := start(t, "")
	if err := e.adminDo("POST", "/dashboard/password", map[string]string{"password": "short"}, nil); err == nil || !strings.Contains(err.Error(), "at least 12") {
		t.Fatalf("a short password: %v", err)
	}
	const pw = "correct horse battery"
	if err := e.adminDo("POST", "/dashboard/password", map[string]string{"password": pw}, nil); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	// Over loopback the form is offered (no TLS needed on the host itself).
	if a := b.do("GET", "/dashboard/login", nil); !strings.Contains(a.body, `type="password"`) {
		t.Fatalf("the login page offers no password field")
	}
	if a := b.do("POST", "/dashboard/login", url.Values{"password": {pw}}); a.status != http.StatusSeeOther {
		t.Fatalf("the right password: %d %s", a.status, a.body)
	}
	if a := b.do("GET", "/dashboard/", nil); a.status != 200 {
		t.Fatalf("signed in by password, GET /dashboard/: %d", a.status)
	}

	// Five wrong guesses, then even the right one waits.
	guesser := e.browser()
	for i := range 5 {
		if a := guesser.do("POST", "/dashboard/login", url.Values{"password": {fmt.Sprintf("wrong guess %d", i)}}); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: %d", i, a.status)
		}
	}
	a := guesser.do("POST", "/dashboard/login", url.Values{"password": {pw}})
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("after 5 failures: %d (Retry-After %q), want 429 with Retry-After", a.status, a.header.Get("Retry-After"))
	}
	// Removed, the password signs no one in.
	if err := e.adminDo("POST", "/dashboard/password", map[string]string{"password": ""}, nil); err != nil {
		t.Fatal(err)
	}
	if a := e.browser().do("GET", "/dashboard/login", nil); strings.Contains(a.body, `type="password"`) {
		t.Fatal("with the password removed, the login page still offers it")
	}
}

// An owner's session sees what a key of that owner sees, and no more.
func TestOwnerSession(t *testing.T) {
	e := start(t, "")
	var mine, theirs api.KeyInfo
	if err := e.adminDo("POST", "/keys", api.KeyRequest{Label: "mine", Owner: "ann"}, &mine); err != nil {
		t.Fatal(err)
	}
	if err := e.adminDo("POST", "/keys", api.KeyRequest{Label: "theirs", Owner: "bea"}, &theirs); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("ann")
	keys := b.do("GET", "/dashboard/keys", nil).body
	if !strings.Contains(keys, mine.ID) || strings.Contains(keys, theirs.ID) {
		t.Errorf("ann's keys page: shows ann's %v, bea's %v; want only ann's", strings.Contains(keys, mine.ID), strings.Contains(keys, theirs.ID))
	}
	token := b.csrf()
	if a := b.do("POST", "/dashboard/keys/"+theirs.ID+"/revoke", url.Values{"csrf": {token}}); a.status != http.StatusNotFound {
		t.Errorf("ann revokes bea's key: %d, want 404", a.status)
	}
	// A key ann creates is hers, whatever the form says.
	if a := b.do("POST", "/dashboard/keys", url.Values{"csrf": {token}, "label": {"new"}, "scope": {"lines:read"}, "owner": {"bea"}}); a.status != http.StatusCreated {
		t.Fatalf("ann creates a key: %d", a.status)
	}
	var all struct {
		Data []api.KeyInfo `json:"data"`
	}
	if err := e.adminDo("GET", "/keys", nil, &all); err != nil {
		t.Fatal(err)
	}
	for _, k := range all.Data {
		if k.Label == "new" && k.Owner != "ann" {
			t.Errorf("ann's new key belongs to %q", k.Owner)
		}
	}
	// The simulator plays any contact: the operator's only.
	if a := b.do("GET", "/dashboard/simulator", nil); a.status != http.StatusForbidden {
		t.Errorf("ann opens the simulator: %d, want 403", a.status)
	}
	if a := b.do("POST", "/dashboard/simulator/inbound", url.Values{"csrf": {token}, "line": {mainLine}, "from": {alice}, "text": {"x"}}); a.status != http.StatusForbidden {
		t.Errorf("ann simulates a message: %d, want 403", a.status)
	}
	// A chat on the sandbox that is not hers is not found, as by the API.
	var in map[string]any
	if err := e.adminDo("POST", "/sim/inbound", map[string]any{"line": daemontest.SandboxLine, "from": alice, "text": "hi"}, &in); err != nil {
		t.Fatal(err)
	}
	if a := b.do("GET", "/dashboard/chats/"+in["chat_id"].(string), nil); a.status != http.StatusNotFound {
		t.Errorf("ann opens a sandbox chat not hers: %d, want 404", a.status)
	}
	// Her sandbox page is her own activation.
	if a := b.do("POST", "/dashboard/sandbox", url.Values{"csrf": {token}}); a.status != http.StatusSeeOther {
		t.Fatalf("ann starts her sandbox: %d %s", a.status, a.body)
	}
	if a := b.do("GET", "/dashboard/sandbox", nil); !strings.Contains(a.body, "Activation code") {
		t.Errorf("ann's sandbox page shows no activation code")
	}
}

func TestDashboardOff(t *testing.T) {
	e := start(t, "[dashboard]\nenabled = false\n")
	if a := e.browser().do("GET", "/dashboard/", nil); a.status != http.StatusNotFound || !strings.Contains(a.body, "route_not_found") {
		t.Errorf("GET /dashboard/ with the dashboard off: %d %s, want the API's 404", a.status, a.body)
	}
	err := e.adminDo("POST", "/dashboard/link", map[string]string{}, nil)
	if err == nil || !strings.Contains(err.Error(), "[dashboard] enabled") {
		t.Errorf("a login link with the dashboard off: %v, want the setting named", err)
	}
}
