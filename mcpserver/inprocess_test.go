package mcpserver_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/mcpserver"
)

// TestInProcessStreams: the answer's header and first bytes reach the
// client while the handler is still writing, the request body reaches the
// handler, and closing the answer ends the handler's request.
func TestInProcessStreams(t *testing.T) {
	more := make(chan struct{})
	ended := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "got "+string(body)+"\n")
		http.NewResponseController(w).Flush()
		<-more
		io.WriteString(w, "more\n")
		<-r.Context().Done()
	})
	hc := &http.Client{Transport: mcpserver.InProcess(h)}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://x/v1/files", io.NopCloser(strings.NewReader("hello")))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("answer %d %v", resp.StatusCode, resp.Header)
	}
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "got hello\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(more)
	if line, err := r.ReadString('\n'); err != nil || line != "more\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
	resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the answer did not end the handler's request")
	}
}
