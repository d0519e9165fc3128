package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// The fleet's control plane (issue 27): keys, webhooks, sandbox owners and
// console sessions made on one node are everyone's within a second.

// fleetCall makes an API request of a node and returns its status and body.
func fleetCall(t *testing.T, td *daemontest.Daemon, method, path, key string, body any) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, td.URL()+path, in)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func adminDo(t *testing.T, td *daemontest.Daemon, method, path string, in, out any) {
	t.Helper()
	if err := td.Admin().Do(context.Background(), method, path, in, out); err != nil {
		t.Fatalf("%s: admin %s %s: %v", td.URL(), method, path, err)
	}
}

func TestFleetControl(t *testing.T) {
	nodes := daemontest.Fleet(t, 3, "[webhooks]\nallow_http = true\nallow_private_networks = true\n")
	a, b, c := nodes[0], nodes[1], nodes[2]

	t.Run("a key made on A works on B and C; revoked on C, it is refused on A and its stream ends", func(t *testing.T) {
		var info api.KeyInfo
		adminDo(t, a, http.MethodPost, "/keys", api.KeyRequest{Label: "fleet", Scopes: "all"}, &info)
		made := time.Now()
		for _, td := range []*daemontest.Daemon{b, c} {
			testkit.Eventually(t, propagation, func() bool {
				status, _ := fleetCall(t, td, http.MethodGet, "/v1/lines", info.Secret, nil)
				return status == http.StatusOK
			})
		}
		t.Logf("the key worked on B and C %s after it was made on A", time.Since(made).Round(time.Millisecond))

		// An event stream of the key, open on A.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+info.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/events on A: %d", resp.StatusCode)
		}
		ended := make(chan time.Time, 1)
		go func() {
			r := bufio.NewReader(resp.Body)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					ended <- time.Now()
					return
				}
			}
		}()

		// C knows the key once it authenticates there, so it can revoke it.
		adminDo(t, c, http.MethodPost, "/keys/revoke", map[string]string{"id": info.ID}, nil)
		revoked := time.Now()
		testkit.Eventually(t, propagation, func() bool {
			status, _ := fleetCall(t, a, http.MethodGet, "/v1/lines", info.Secret, nil)
			return status == http.StatusUnauthorized
		})
		t.Logf("A refused the key %s after C revoked it", time.Since(revoked).Round(time.Millisecond))
		// How soon is BenchmarkFleet's figure; here the stream must end, as
		// every node must refuse the key, each on its own way from C.
		select {
		case at := <-ended:
			t.Logf("the stream on A ended %s after the revocation on C", at.Sub(revoked).Round(time.Millisecond))
		case <-time.After(propagation):
			t.Fatalf("the stream on A is still open %s after the revocation on C", propagation)
		}
		for _, td := range []*daemontest.Daemon{b, c} {
			testkit.Eventually(t, propagation, func() bool {
				status, _ := fleetCall(t, td, http.MethodGet, "/v1/lines", info.Secret, nil)
				return status == http.StatusUnauthorized
			})
		}
	})

	t.Run("a key made on A for a line of B lists that line's handle", func(t *testing.T) {
		var info api.KeyInfo
		testkit.Eventually(t, 5*time.Second, func() bool { // B's line in the directory
			return a.Admin().Do(context.Background(), http.MethodPost, "/keys",
				api.KeyRequest{Label: "b only", Scopes: "all", Lines: []string{daemontest.FleetLine(1)}}, &info) == nil
		})
		if len(info.Lines) != 1 || info.Lines[0] != daemontest.FleetLine(1) {
			t.Fatalf("key for B's line, made on A: lines %v", info.Lines)
		}
		testkit.Eventually(t, propagation, func() bool {
			var list api.List[api.KeyInfo]
			adminDo(t, c, http.MethodGet, "/keys", nil, &list)
			for _, k := range list.Data {
				if k.ID == info.ID {
					return len(k.Lines) == 1 && k.Lines[0] == daemontest.FleetLine(1)
				}
			}
			return false
		})
		testkit.Eventually(t, propagation, func() bool {
			status, _ := fleetCall(t, b, http.MethodGet, "/v1/lines", info.Secret, nil)
			return status == http.StatusOK
		})
		var bad api.KeyInfo
		err := a.Admin().Do(context.Background(), http.MethodPost, "/keys", api.KeyRequest{Label: "x", Lines: []string{"+15559999999"}}, &bad)
		if err == nil || !strings.Contains(err.Error(), "fleet") {
			t.Errorf("a key for a line nobody has: %v", err)
		}
	})

	t.Run("a webhook made through B is on A and C; deleted through B, it is gone from both", func(t *testing.T) {
		key := b.Key(api.KeyRequest{})
		status, body := fleetCall(t, b, http.MethodPost, "/v1/webhooks", key, map[string]any{
			"from": daemontest.FleetLine(1), "url": "http://127.0.0.1:9/hook", "events": []string{"message.received"},
		})
		if status != http.StatusCreated {
			t.Fatalf("POST /v1/webhooks on B: %d %s", status, body)
		}
		var hook api.Webhook
		if err := json.Unmarshal(body, &hook); err != nil {
			t.Fatal(err)
		}
		has := func(td *daemontest.Daemon) bool {
			var list api.List[api.WebhookInfo]
			adminDo(t, td, http.MethodGet, "/webhooks", nil, &list)
			for _, h := range list.Data {
				if h.ID == hook.ID {
					return true
				}
			}
			return false
		}
		for _, td := range []*daemontest.Daemon{a, c} {
			testkit.Eventually(t, propagation, func() bool { return has(td) })
		}
		if status, body := fleetCall(t, b, http.MethodDelete, "/v1/webhooks", key, map[string]any{"id": hook.ID}); status != http.StatusOK {
			t.Fatalf("DELETE /v1/webhooks on B: %d %s", status, body)
		}
		for _, td := range []*daemontest.Daemon{a, c} {
			testkit.Eventually(t, propagation, func() bool { return !has(td) })
		}
	})

	t.Run("a sandbox started on A reads the same on B and C", func(t *testing.T) {
		adminDo(t, a, http.MethodPost, "/sandbox", map[string]string{"owner": "ann"}, nil)
		want, ok, err := a.Daemon().Sandbox(context.Background(), "ann")
		if err != nil || !ok {
			t.Fatalf("ann's sandbox on A: %v %v", ok, err)
		}
		for _, td := range []*daemontest.Daemon{b, c} {
			testkit.Eventually(t, propagation, func() bool {
				got, ok, err := td.Daemon().Sandbox(context.Background(), "ann")
				return err == nil && ok && got == want
			})
		}
	})

	t.Run("a console session made on A works on B; ended on C, it ends on A", func(t *testing.T) {
		var link struct {
			URL string `json:"url"`
		}
		adminDo(t, a, http.MethodPost, "/dashboard/link", map[string]string{}, &link)
		u, err := url.Parse(link.URL)
		if err != nil {
			t.Fatal(err)
		}
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.PostForm(a.URL()+"/dashboard/login", url.Values{"token": {u.Query().Get("token")}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var cookie *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "blueline_session" {
				cookie = ck
			}
		}
		if resp.StatusCode != http.StatusSeeOther || cookie == nil {
			t.Fatalf("sign-in on A: %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
		dashboard := func(td *daemontest.Daemon) int {
			req, _ := http.NewRequest(http.MethodGet, td.URL()+"/dashboard/", nil)
			req.AddCookie(cookie)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		testkit.Eventually(t, propagation, func() bool { return dashboard(b) == http.StatusOK })
		// B's overview shows the fleet: every node, and every line with
		// its node.
		req, _ := http.NewRequest(http.MethodGet, b.URL()+"/dashboard/", nil)
		req.AddCookie(cookie)
		resp, err = noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		escaped := func(handle string) string { return strings.ReplaceAll(handle, "+", "&#43;") } // as html/template writes it
		for _, want := range []string{"<h2>Fleet</h2>", "This is node <strong>mac-b</strong> of 3", escaped(daemontest.FleetLine(0)),
			escaped(daemontest.FleetLine(2)), "<td>mac-c</td>"} {
			if !strings.Contains(string(page), want) {
				t.Errorf("B's overview lacks %q:\n%s", want, page)
			}
		}
		testkit.Eventually(t, propagation, func() bool { return dashboard(c) == http.StatusOK })
		adminDo(t, c, http.MethodPost, "/dashboard/sessions/end", map[string]any{}, nil)
		testkit.Eventually(t, propagation, func() bool { return dashboard(a) == http.StatusSeeOther })
	})

	t.Run("a node that restarts reconciles", func(t *testing.T) {
		key := a.Key(api.KeyRequest{})
		c.Stop()
		var info api.KeyInfo
		adminDo(t, b, http.MethodPost, "/keys", api.KeyRequest{Label: "while C was away", Scopes: "all"}, &info)
		c.Start()
		for _, k := range []string{key, info.Secret} {
			testkit.Eventually(t, propagation, func() bool {
				status, _ := fleetCall(t, c, http.MethodGet, "/v1/lines", k, nil)
				return status == http.StatusOK
			})
		}
	})
}

// A host alone with keys becomes a fleet's first node by adding [fleet]:
// its keys move into the buckets. A host with keys of its own that never
// joined that fleet is refused, saying why; empty, it joins and has the
// fleet's keys. (Fleets of one: the second host is given a copy of the
// first one's JetStream store, as it would find the fleet's buckets.)
func TestFleetJoin(t *testing.T) {
	const secret = "the-join-test-fleet-secret-01234"
	first := newConfig(t)
	d := start(t, first)
	key := createKey(t, first)
	shutdown(t, d)

	first.Fleet.Node, first.Fleet.Secret, first.Fleet.Listen = "mac-a", secret, "127.0.0.1:0"
	d = start(t, first)
	if a := get(t, d, "/v1/lines", key.Secret); a.status != http.StatusOK {
		t.Fatalf("the host's key after it joined: %d", a.status)
	}
	// Restarted, it reconciles with the fleet it seeded.
	shutdown(t, d)
	d = start(t, first)
	if a := get(t, d, "/v1/lines", key.Secret); a.status != http.StatusOK {
		t.Fatalf("the host's key after a restart: %d", a.status)
	}
	shutdown(t, d)

	// A second host with a key of its own, given the fleet's buckets.
	second := newConfig(t)
	d2 := start(t, second)
	createKey(t, second)
	shutdown(t, d2)
	second.Fleet.Node, second.Fleet.Secret, second.Fleet.Listen = "mac-b", secret, "127.0.0.1:0"
	copyDir(t, first.FleetStoreDir(), second.FleetStoreDir())
	log, _ := newLog()
	_, err := daemon.Start(context.Background(), second, log)
	if err == nil {
		t.Fatal("a host with a key of its own joined a fleet that has keys")
	}
	for _, want := range []string{"mac-b", "1 API key", "never joined", "holds 1 record ", "joins a fleet empty", "never merged"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	t.Logf("refused: %v", err)
	reopens(t, second)

	// Empty, the host joins and has the first host's key; its own keys
	// are the fleet's.
	second.Storage.Dir = t.TempDir()
	copyDir(t, first.FleetStoreDir(), second.FleetStoreDir())
	d2 = start(t, second)
	if a := get(t, d2, "/v1/lines", key.Secret); a.status != http.StatusOK {
		t.Fatalf("the fleet's key on the host that joined: %d", a.status)
	}
	var info api.KeyInfo
	if err := adminsock.NewClient(second.DataDir()).Do(context.Background(), http.MethodPost, "/keys", api.KeyRequest{Label: "b", Scopes: "all"}, &info); err != nil {
		t.Fatal(err)
	}
	shutdown(t, d2)
	d2 = start(t, second)
	for _, k := range []string{key.Secret, info.Secret} {
		if a := get(t, d2, "/v1/lines", k); a.status != http.StatusOK {
			t.Fatalf("after its restart: %d", a.status)
		}
	}
}

// copyDir copies the folder src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// propagation bounds a control record's way to every node in these tests:
// far above the second the fleet takes (BenchmarkFleet measures it), so
// that a loaded machine does not fail them.
const propagation = 10 * time.Second
