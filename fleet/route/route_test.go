package route_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// call makes an API request with key and decodes a JSON answer into out
// (when not nil); it returns the response, its body read.
func call(t *testing.T, method, u, key string, body any, header map[string]string, out any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, u, err, b)
		}
	}
	return resp, b
}

func errCode(b []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	return e.Error.Code
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
	for i, td := range nodes {
		testkit.Eventually(t, 10*time.Second, func() bool {
			var lines api.List[api.Line]
			resp, _ := call(t, "GET", td.URL()+"/v1/lines", key, nil, nil, &lines)
			return resp.StatusCode == 200 && slices.Equal(handles(lines.Data), want)
		})
		t.Logf("%s lists %v", daemontest.FleetNode(i), want)
	}

	// A contact writes to C's line; A sends on C's line, and it is sent.
	in := c.Inbound(lineC, daemontest.Alice, "hello C")
	send := map[string]any{"from": lineC, "to": daemontest.Alice, "text": "hi from A"}
	var item api.OutboxItem
	resp, body := call(t, "POST", a.URL()+"/v1/messages", key, send, map[string]string{"Idempotency-Key": "k1"}, &item)
	if resp.StatusCode != 201 {
		t.Fatalf("send through A to C's line: %d %s", resp.StatusCode, body)
	}
	if item.RequestID != resp.Header.Get("X-Request-Id") {
		t.Errorf("request_id %q, X-Request-Id %q: want the entry's", item.RequestID, resp.Header.Get("X-Request-Id"))
	}
	for _, td := range []*daemontest.Daemon{a, c} {
		testkit.Eventually(t, 10*time.Second, func() bool {
			var got api.OutboxItem
			resp, _ := call(t, "GET", td.URL()+"/v1/outbox?id="+item.ID, key, nil, nil, &got)
			return resp.StatusCode == 200 && got.Status == "sent"
		})
	}
	if got := c.Daemon().Sim().Delivered(); len(got) != 1 || got[0].Text != "hi from A" {
		t.Errorf("C's network delivered %+v", got)
	}

	// Its history, read through B.
	var msgs api.List[api.Message]
	q := url.Values{"from": {lineC}, "to": {in.ChatID}}
	resp, body = call(t, "GET", b.URL()+"/v1/messages?"+q.Encode(), key, nil, nil, &msgs)
	if resp.StatusCode != 200 || len(msgs.Data) != 2 {
		t.Fatalf("history of C's chat through B: %d %s", resp.StatusCode, body)
	}

	// The same Idempotency-Key through B: the same item, replayed.
	var again api.OutboxItem
	resp, body = call(t, "POST", b.URL()+"/v1/messages", key, send, map[string]string{"Idempotency-Key": "k1"}, &again)
	if resp.StatusCode != 201 || again.ID != item.ID || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same send through B: %d %s, Idempotent-Replayed %q; want %s replayed", resp.StatusCode, body,
			resp.Header.Get("Idempotent-Replayed"), item.ID)
	}

	// IDs of C's line, read through A: the message, the chat's messages,
	// its reactions.
	var msg api.List[api.Reaction]
	resp, body = call(t, "GET", a.URL()+"/v1/reactions?message_id="+in.ID, key, nil, nil, &msg)
	if resp.StatusCode != 200 {
		t.Errorf("reactions of C's message %s through A: %d %s", in.ID, resp.StatusCode, body)
	}
	var chats api.List[api.Chat]
	resp, body = call(t, "GET", a.URL()+"/v1/chats?from="+url.QueryEscape(lineC), key, nil, nil, &chats)
	if resp.StatusCode != 200 || len(chats.Data) != 1 || chats.Data[0].ID != in.ChatID {
		t.Errorf("chats of C's line through A: %d %s", resp.StatusCode, body)
	}

	// What is nowhere is still a 404.
	resp, body = call(t, "GET", b.URL()+"/v1/outbox?id=obx_"+strings.Repeat("a", 26), key, nil, nil, nil)
	if resp.StatusCode != 404 || errCode(body) != "outbox_item_not_found" {
		t.Errorf("an outbox item on no node: %d %s", resp.StatusCode, body)
	}
	resp, body = call(t, "GET", b.URL()+"/v1/chats?from=%2B15559999999", key, nil, nil, nil)
	if resp.StatusCode != 404 || errCode(body) != "line_not_found" {
		t.Errorf("a line on no node: %d %s", resp.StatusCode, body)
	}

	// A key restricted to A's line cannot use C's through B: C checks it.
	narrow := daemontest.FleetKey(t, nodes, api.KeyRequest{Lines: []string{lineA}})
	resp, body = call(t, "GET", b.URL()+"/v1/chats?from="+url.QueryEscape(lineC), narrow, nil, nil, nil)
	if resp.StatusCode != 403 || errCode(body) != "line_not_accessible" {
		t.Errorf("a key restricted to A's line, on C's line through B: %d %s", resp.StatusCode, body)
	}

	// C stops: its line answers 503 line_unavailable with Retry-After on
	// A and B; A's line is unaffected.
	c.Stop()
	for _, td := range []*daemontest.Daemon{a, b} {
		testkit.Eventually(t, 5*time.Second, func() bool {
			resp, body := call(t, "POST", td.URL()+"/v1/messages", key, send, nil, nil)
			return resp.StatusCode == 503 && errCode(body) == "line_unavailable" && resp.Header.Get("Retry-After") != ""
		})
		resp, body := call(t, "GET", td.URL()+"/v1/outbox?id="+item.ID, key, nil, nil, nil)
		if resp.StatusCode != 503 || errCode(body) != "line_unavailable" {
			t.Errorf("C's outbox item while C is down: %d %s", resp.StatusCode, body)
		}
		var lines api.List[api.Line]
		resp, body = call(t, "GET", td.URL()+"/v1/lines", key, nil, nil, &lines)
		if resp.StatusCode != 200 || slices.Contains(handles(lines.Data), lineC) || resp.Header.Get("Blueline-Lines-Unavailable") != lineC {
			t.Errorf("lines while C is down: %d %s (unavailable: %q)", resp.StatusCode, body, resp.Header.Get("Blueline-Lines-Unavailable"))
		}
	}
	a.Inbound(lineA, daemontest.Bob, "hello A")
	resp, body = call(t, "POST", b.URL()+"/v1/messages", key, map[string]any{"from": lineA, "to": daemontest.Bob, "text": "hi"}, nil, nil)
	if resp.StatusCode != 201 {
		t.Errorf("a send on A's line through B while C is down: %d %s", resp.StatusCode, body)
	}

	// C is back: its line answers again.
	c.Start()
	testkit.Eventually(t, 20*time.Second, func() bool {
		var got api.OutboxItem
		resp, _ := call(t, "GET", a.URL()+"/v1/outbox?id="+item.ID, key, nil, nil, &got)
		return resp.StatusCode == 200 && got.ID == item.ID
	})
}
