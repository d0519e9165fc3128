package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body that stops arriving is answered 408 request_timeout in the API's
// shape, with the request's ID and CORS headers, and the connection
// closing.
func TestBodyStalledAnswer(t *testing.T) {
	opts := defaultOptions()
	opts.BodyIdleTimeout = 300 * time.Millisecond
	e := newAPI(t, opts)
	key := e.key(keyOpts{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"from\": ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error     struct{ Type, Code, Message string }
		RequestID string `json:"request_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || body.Error.Type != "invalid_request_error" || body.Error.Code != "request_timeout" {
		t.Fatalf("stalled body: %d %+v, want 408 request_timeout", resp.StatusCode, body)
	}
	if !strings.Contains(body.Error.Message, "nothing came for 300ms ([limits] body_idle_timeout)") {
		t.Errorf("message %q does not say the interval and its setting", body.Error.Message)
	}
	if id := resp.Header.Get("X-Request-Id"); id == "" || body.RequestID != id {
		t.Errorf("request_id %q, X-Request-Id %q: want the same, set", body.RequestID, id)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || !resp.Close {
		t.Errorf("headers %v: want CORS kept and Connection: close", resp.Header)
	}
}
