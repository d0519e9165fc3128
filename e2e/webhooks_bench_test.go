package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
)

// Webhook throughput and isolation, measured on the real daemon with real
// HTTPS receivers on loopback:
//
//	go test -run '^$' -bench Webhook -benchtime 20000x ./e2e
//
// Each benchmark records b.N inbound messages (b.N events) through the same
// receiver the network uses, from many goroutines, and waits until the
// receivers got them all.

// countingServer counts deliveries per path; it answers at once.
type countingServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	count map[string]int
	total atomic.Int64
}

func newCountingServer(b *testing.B) *countingServer {
	cs := &countingServer{count: map[string]int{}}
	cs.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		cs.count[r.URL.Path]++
		cs.mu.Unlock()
		cs.total.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(cs.srv.Close)
	return cs
}

// benchDaemon starts a daemon whose webhooks trust httptest's certificate
// (all its servers share one).
func benchDaemon(b *testing.B, cs *countingServer) *testDaemon {
	ca := filepath.Join(b.TempDir(), "ca.pem")
	writeFile(b, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cs.srv.Certificate().Raw})))
	return startTestDaemon(b, "[webhooks]\nallow_private_networks = true\nca_file = "+strconv.Quote(ca)+"\n")
}

// produce records n inbound messages on the main line from 64 goroutines,
// spread over 100 contacts (chats).
func produce(b *testing.B, td *testDaemon, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				contact := fmt.Sprintf("+1555200%04d", i%100)
				text := "event " + strconv.FormatInt(i, 10)
				_, err := td.d.Record(context.Background(), bridge.Inbound{
					Line: mainLine, Chat: sim.OneToOne("imessage", contact), GUID: sim.NewGUID(), Sender: contact, Text: &text,
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func waitCount(b *testing.B, within time.Duration, cond func() bool) {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("not delivered within %s", within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Sustained deliveries to one receiver: events per second from the first
// event recorded to the last delivery received.
func BenchmarkWebhookThroughput(b *testing.B) {
	cs := newCountingServer(b)
	td := benchDaemon(b, cs)
	key := td.key()
	td.call("POST", "/v1/webhooks", key, map[string]any{"from": mainLine, "url": cs.srv.URL + "/one", "events": []string{"message.received"}})
	b.ResetTimer()
	start := time.Now()
	produce(b, td, b.N)
	produced := time.Since(start)
	waitCount(b, 10*time.Minute, func() bool { return cs.total.Load() >= int64(b.N) })
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/produced.Seconds(), "recorded/s")
}

// Twenty webhooks on one line, one of whose receiver never answers: the
// other nineteen still get every event, at what rate.
func BenchmarkWebhookIsolation(b *testing.B) {
	cs := newCountingServer(b)
	hang := make(chan struct{})
	var hung atomic.Int64
	dead := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(func() { close(hang); dead.Close() })
	td := benchDaemon(b, cs)
	key := td.key()
	for i := range 19 {
		td.call("POST", "/v1/webhooks", key, map[string]any{"from": mainLine, "url": fmt.Sprintf("%s/live%d", cs.srv.URL, i), "events": []string{"message.received"}})
	}
	td.call("POST", "/v1/webhooks", key, map[string]any{"from": mainLine, "url": dead.URL + "/dead", "events": []string{"message.received"}})
	b.ResetTimer()
	start := time.Now()
	produce(b, td, b.N)
	waitCount(b, 10*time.Minute, func() bool { return cs.total.Load() >= int64(19*b.N) })
	elapsed := time.Since(start)
	b.StopTimer()
	cs.mu.Lock()
	for path, n := range cs.count {
		if n != b.N {
			b.Errorf("%s got %d of %d events", path, n, b.N)
		}
	}
	if len(cs.count) != 19 {
		b.Errorf("%d live receivers got events, want 19", len(cs.count))
	}
	cs.mu.Unlock()
	b.ReportMetric(float64(19*b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(hung.Load()), "dead-requests")
}
