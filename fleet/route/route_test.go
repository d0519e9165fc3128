package route_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/fleet/route"
	"github.com/blueline-app/blueline/testkit"
)

// call makes an API request with key through td, checked against the API
// document, and decodes a JSON answer under 300 into out (when not nil).
func call(t *testing.T, td *daemontest.Daemon, method, path, key string, body any, out any, headers ...string) apitest.Response {
	t.Helper()
	c := apitest.Client{TB: t, Base: td.URL(), HTTP: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	r := c.Call(method, path, key, body, headers...)
	if out != nil && r.Status < 300 {
		if err := json.Unmarshal(r.Raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, r.Raw)
		}
	}
	return r
}

func handles(lines []api.Line) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Handle)
	}
	slices.Sort(out)
	return out
}

// Line-scoped requests through any node are answered by the line's node;
// a node that is down makes its line answer 503 line_unavailable on the
// others, and nothing else.
func TestFleetRouting(t *testing.T) {
	nodes := daemontest.Fleet(t, 3, "")
	a, b, c := nodes[0], nodes[1], nodes[2]
	key := daemontest.FleetKey(t, nodes, api.KeyRequest{})
	lineA, lineC := daemontest.FleetLine(0), daemontest.FleetLine(2)

	// GET /v1/lines on any node lists every node's line (the directory
	// is filled by each node's first refresh).
	want := []string{daemontest.SandboxLine, daemontest.FleetLine(0), daemontest.FleetLine(1), lineC}
	slices.Sort(want)
	for _, td := range nodes {
		testkit.Eventually(t, 10*time.Second, func() bool {
			var lines api.List[api.Line]
			r := call(t, td, "GET", "/v1/lines", key, nil, &lines)
			return r.Status == 200 && slices.Equal(handles(lines.Data), want)
		})
	}

	// A contact writes to C's line; A sends on C's line, and it is sent.
	in := c.Inbound(lineC, daemontest.Alice, "hello C")
	send := map[string]any{"from": lineC, "to": daemontest.Alice, "text": "hi from A"}
	var item api.OutboxItem
	r := call(t, a, "POST", "/v1/messages", key, send, &item, "Idempotency-Key", "k1")
	if r.Status != 201 {
		t.Fatalf("send through A on C's line: %d %s", r.Status, r.Raw)
	}
	if item.RequestID != r.Header.Get("X-Request-Id") {
		t.Errorf("request_id %q, X-Request-Id %q: want the entry's", item.RequestID, r.Header.Get("X-Request-Id"))
	}
	for _, td := range []*daemontest.Daemon{a, c} {
		testkit.Eventually(t, 10*time.Second, func() bool {
			var got api.OutboxItem
			r := call(t, td, "GET", "/v1/outbox?id="+item.ID, key, nil, &got)
			return r.Status == 200 && got.Status == "sent"
		})
	}
	if got := c.Daemon().Sim().Delivered(); len(got) != 1 || got[0].Text != "hi from A" {
		t.Errorf("C's network delivered %+v", got)
	}

	// Its history, read through B.
	var msgs api.List[api.Message]
	q := url.Values{"from": {lineC}, "to": {in.ChatID}}
	r = call(t, b, "GET", "/v1/messages?"+q.Encode(), key, nil, &msgs)
	if r.Status != 200 || len(msgs.Data) != 2 {
		t.Fatalf("history of C's chat through B: %d %s", r.Status, r.Raw)
	}

	// The same Idempotency-Key through B: the same item, replayed.
	var again api.OutboxItem
	r = call(t, b, "POST", "/v1/messages", key, send, &again, "Idempotency-Key", "k1")
	if r.Status != 201 || again.ID != item.ID || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same send through B: %d %s, Idempotent-Replayed %q; want %s replayed", r.Status, r.Raw,
			r.Header.Get("Idempotent-Replayed"), item.ID)
	}

	// IDs of C's line through A: a message (its reactions), a chat (its
	// line's chats), a file (its metadata, its signed URL).
	r = call(t, a, "GET", "/v1/reactions?message_id="+in.ID, key, nil, nil)
	if r.Status != 200 {
		t.Errorf("reactions of C's message %s through A: %d %s", in.ID, r.Status, r.Raw)
	}
	var chats api.List[api.Chat]
	r = call(t, a, "GET", "/v1/chats?from="+url.QueryEscape(lineC), key, nil, &chats)
	if r.Status != 200 || len(chats.Data) != 1 || chats.Data[0].ID != in.ChatID {
		t.Errorf("chats of C's line through A: %d %s", r.Status, r.Raw)
	}
	small := bytes.Repeat([]byte("small file "), 100)
	var f api.File
	if r = call(t, c, "POST", "/v1/files", key, string(small), &f, "Content-Type", "text/plain", "X-Filename", "small.txt"); r.Status != 201 {
		t.Fatalf("upload to C: %d %s", r.Status, r.Raw)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := apitest.Client{TB: t, HTTP: noFollow}.Fetch("GET", a.URL()+"/v1/files?id="+f.ID, "Authorization", "Bearer "+key)
	if resp.StatusCode != 302 || !strings.HasPrefix(resp.Header.Get("Location"), c.URL()+"/files/"+f.ID) {
		t.Errorf("C's file through A: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	path := strings.TrimPrefix(f.URL, c.URL())
	resp, got := apitest.Client{TB: t}.Fetch("GET", a.URL()+path)
	if resp.StatusCode != 200 || !bytes.Equal(got, small) {
		t.Errorf("C's signed download URL on A: %d, %d bytes", resp.StatusCode, len(got))
	}
	resp, _ = apitest.Client{TB: t}.Fetch("GET", a.URL()+strings.Replace(path, "signature=", "signature=00", 1))
	if resp.StatusCode != 403 {
		t.Errorf("a forged download URL of C's file on A: %d, want C's 403", resp.StatusCode)
	}
	// A file too large to forward: a redirect to C.
	large := bytes.Repeat([]byte("large file "), 200_000)
	if r = call(t, c, "POST", "/v1/files", key, string(large), &f, "Content-Type", "text/plain", "X-Filename", "large.txt"); r.Status != 201 {
		t.Fatalf("upload to C: %d %s", r.Status, r.Raw)
	}
	path = strings.TrimPrefix(f.URL, c.URL())
	resp, _ = apitest.Client{TB: t, HTTP: noFollow}.Fetch("GET", a.URL()+path)
	if resp.StatusCode != 307 || resp.Header.Get("Location") != f.URL {
		t.Errorf("C's large file on A: %d, Location %q; want 307 to %s", resp.StatusCode, resp.Header.Get("Location"), f.URL)
	}
	resp, got = apitest.Client{TB: t}.Fetch("GET", a.URL()+path)
	if resp.StatusCode != 200 || !bytes.Equal(got, large) {
		t.Errorf("C's large file on A, following the redirect: %d, %d bytes", resp.StatusCode, len(got))
	}

	// What is nowhere is still a 404.
	r = call(t, b, "GET", "/v1/outbox?id=obx_"+strings.Repeat("a", 26), key, nil, nil)
	if r.Status != 404 || r.ErrCode() != "outbox_item_not_found" {
		t.Errorf("an outbox item on no node: %d %s", r.Status, r.Raw)
	}
	r = call(t, b, "GET", "/v1/chats?from=%2B15559999999", key, nil, nil)
	if r.Status != 404 || r.ErrCode() != "line_not_found" {
		t.Errorf("a line on no node: %d %s", r.Status, r.Raw)
	}

	// A key restricted to A's line cannot use C's through B: C checks it.
	narrow := daemontest.FleetKey(t, nodes, api.KeyRequest{Lines: []string{lineA}})
	r = call(t, b, "GET", "/v1/chats?from="+url.QueryEscape(lineC), narrow, nil, nil)
	if r.Status != 403 || r.ErrCode() != "line_not_accessible" {
		t.Errorf("a key restricted to A's line, on C's line through B: %d %s", r.Status, r.Raw)
	}
	var lines api.List[api.Line]
	if r = call(t, b, "GET", "/v1/lines", narrow, nil, &lines); r.Status != 200 || !slices.Equal(handles(lines.Data), []string{daemontest.SandboxLine, lineA}) {
		t.Errorf("lines of a key restricted to A's line, through B: %d %s", r.Status, r.Raw)
	}

	// C stops: its line answers 503 line_unavailable with Retry-After on
	// A and B; A's line is unaffected.
	c.Stop()
	for _, td := range []*daemontest.Daemon{a, b} {
		testkit.Eventually(t, 5*time.Second, func() bool {
			r := call(t, td, "POST", "/v1/messages", key, send, nil)
			return r.Status == 503 && r.ErrCode() == "line_unavailable" && r.Header.Get("Retry-After") != ""
		})
		r := call(t, td, "GET", "/v1/outbox?id="+item.ID, key, nil, nil)
		if r.Status != 503 || r.ErrCode() != "line_unavailable" {
			t.Errorf("C's outbox item while C is down: %d %s", r.Status, r.Raw)
		}
		var lines api.List[api.Line]
		r = call(t, td, "GET", "/v1/lines", key, nil, &lines)
		if r.Status != 200 || slices.Contains(handles(lines.Data), lineC) || r.Header.Get(route.UnavailableHeader) != lineC {
			t.Errorf("lines while C is down: %d %s (unavailable: %q)", r.Status, r.Raw, r.Header.Get(route.UnavailableHeader))
		}
	}
	a.Inbound(lineA, daemontest.Bob, "hello A")
	r = call(t, b, "POST", "/v1/messages", key, map[string]any{"from": lineA, "to": daemontest.Bob, "text": "hi"}, nil)
	if r.Status != 201 {
		t.Errorf("a send on A's line through B while C is down: %d %s", r.Status, r.Raw)
	}

	// C is back: its line answers again.
	c.Start()
	testkit.Eventually(t, 20*time.Second, func() bool {
		var got api.OutboxItem
		r := call(t, a, "GET", "/v1/outbox?id="+item.ID, key, nil, &got)
		return r.Status == 200 && got.ID == item.ID
	})
}
