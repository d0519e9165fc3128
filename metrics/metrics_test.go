package metrics_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/storage"
)

var ctx = context.Background()

func open(t testing.TB) (*storage.DB, storage.Line, *metrics.Metrics) {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	return db, lines[0], metrics.New(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// scrape serves one scrape of m and returns its samples by name and labels,
// as they appear in the text format: `name{a="b"}` → value.
func scrape(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape content type %q", ct)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples
}

func want(t *testing.T, s map[string]float64, sample string, v float64) {
	t.Helper()
	got, ok := s[sample]
	if !ok {
		t.Errorf("%s missing from the scrape", sample)
	} else if got != v {
		t.Errorf("%s = %v, want %v", sample, got, v)
	}
}

// A fresh registry lists every outcome at 0, the bridges' histograms
// empty, the queues empty, and the process's and Go's own figures.
func TestEveryOutcomeListedFromTheStart(t *testing.T) {
	_, _, m := open(t)
	s := scrape(t, m)
	for _, o := range []string{metrics.Sent, metrics.Retried, metrics.Failed} {
		want(t, s, `blueline_outbox_sends_total{outcome="`+o+`"}`, 0)
	}
	for _, o := range []string{metrics.Success, metrics.Failure} {
		want(t, s, `blueline_webhook_attempts_total{outcome="`+o+`"}`, 0)
	}
	for _, b := range []string{"sim", "messages"} {
		want(t, s, `blueline_bridge_send_seconds_count{bridge="`+b+`"}`, 0)
	}
	for _, st := range []string{storage.StatusPending, storage.StatusClaimed} {
		want(t, s, `blueline_outbox_items{state="`+st+`"}`, 0)
		want(t, s, `blueline_outbox_oldest_seconds{state="`+st+`"}`, 0)
	}
	want(t, s, "blueline_webhook_deliveries_pending", 0)
	if s["blueline_bolt_file_bytes"] <= 0 {
		t.Errorf("blueline_bolt_file_bytes = %v, want the file's size", s["blueline_bolt_file_bytes"])
	}
	for _, name := range []string{"blueline_bolt_read_tx_total", "blueline_bolt_open_read_tx", "blueline_bolt_free_pages",
		"blueline_bolt_page_writes_total", "blueline_bolt_write_seconds_total", "go_goroutines"} {
		if _, ok := s[name]; !ok {
			t.Errorf("%s missing from the scrape", name)
		}
	}
	// No request was answered yet: the request counter has no series.
	for k := range s {
		if strings.HasPrefix(k, "blueline_http_requests_total") {
			t.Errorf("request series before any request: %s", k)
		}
	}
}

func TestCounts(t *testing.T) {
	_, _, m := open(t)
	m.ObserveRequest("GET /v1/lines", 200, 30*time.Millisecond)
	m.ObserveRequest("GET /v1/lines", 200, 10*time.Millisecond)
	m.ObserveRequest("GET /v1/lines", 404, time.Millisecond)
	m.ObserveRequest("unmatched", 404, time.Millisecond)
	m.OutboxSend(metrics.Sent)
	m.OutboxSend(metrics.Sent)
	m.OutboxSend(metrics.Retried)
	m.WebhookAttempt(metrics.Failure)
	m.BridgeSend("sim", 2*time.Millisecond)
	m.BridgeSend("sim", 3*time.Second)

	s := scrape(t, m)
	want(t, s, `blueline_http_requests_total{code="200",route="GET /v1/lines"}`, 2)
	want(t, s, `blueline_http_requests_total{code="404",route="GET /v1/lines"}`, 1)
	want(t, s, `blueline_http_requests_total{code="404",route="unmatched"}`, 1)
	want(t, s, `blueline_http_request_duration_seconds_count{route="GET /v1/lines"}`, 3)
	if sum := s[`blueline_http_request_duration_seconds_sum{route="GET /v1/lines"}`]; math.Abs(sum-0.041) > 1e-9 {
		t.Errorf("request duration sum %v, want 0.041", sum)
	}
	want(t, s, `blueline_http_request_duration_seconds_bucket{route="GET /v1/lines",le="0.01"}`, 2)
	want(t, s, `blueline_outbox_sends_total{outcome="sent"}`, 2)
	want(t, s, `blueline_outbox_sends_total{outcome="retried"}`, 1)
	want(t, s, `blueline_outbox_sends_total{outcome="failed"}`, 0)
	want(t, s, `blueline_webhook_attempts_total{outcome="success"}`, 0)
	want(t, s, `blueline_webhook_attempts_total{outcome="failure"}`, 1)
	want(t, s, `blueline_bridge_send_seconds_count{bridge="sim"}`, 2)
	want(t, s, `blueline_bridge_send_seconds_bucket{bridge="sim",le="0.005"}`, 1)
	want(t, s, `blueline_bridge_send_seconds_bucket{bridge="sim",le="5"}`, 2)
	want(t, s, `blueline_bridge_send_seconds_count{bridge="messages"}`, 0)
}

// The storage collector reads the queues at each scrape.
func TestQueueGauges(t *testing.T) {
	db, line, m := open(t)
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: "https://example.com/h",
		Events: []string{api.EventMessageReceived}, Secret: "s", IsActive: true}
	if err := db.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	text := "hi"
	res, err := db.RecordInbound(ctx, storage.Inbound{ // queues one webhook delivery
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: "+15551110001", Text: &text, SentAt: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{
			ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, MaxAttempts: 3, ChatID: res.Chat.ID, Text: &text,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := db.ClaimDue(ctx, 1<<62, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // so that the oldest items have an age

	s := scrape(t, m)
	want(t, s, `blueline_outbox_items{state="pending"}`, 2)
	want(t, s, `blueline_outbox_items{state="claimed"}`, 1)
	want(t, s, "blueline_webhook_deliveries_pending", 1)
	for _, st := range []string{"pending", "claimed"} {
		if age := s[`blueline_outbox_oldest_seconds{state="`+st+`"}`]; age <= 0 || age > 60 {
			t.Errorf("oldest %s item is %vs old", st, age)
		}
	}
	if s["blueline_bolt_page_writes_total"] <= 0 {
		t.Errorf("blueline_bolt_page_writes_total = %v after writes", s["blueline_bolt_page_writes_total"])
	}
	if s["blueline_bolt_read_tx_total"] <= 0 {
		t.Errorf("blueline_bolt_read_tx_total = %v after a scrape's read", s["blueline_bolt_read_tx_total"])
	}
}

// A closed database cannot be read: the scrape still answers, with what it
// could collect.
func TestScrapeAfterClose(t *testing.T) {
	db, _, m := open(t)
	m.OutboxSend(metrics.Failed)
	db.Close()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `blueline_outbox_sends_total{outcome="failed"} 1`) {
		t.Fatalf("scrape of a closed database: %d\n%s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "blueline_outbox_items{") {
		t.Errorf("queue figures of a closed database:\n%s", rec.Body)
	}
}

func TestCountLines(t *testing.T) {
	_, _, m := open(t)
	counts := []metrics.LineCounts{{Line: "+15550000001", HistoryRows: 7, Twins: 2, Screened: 1}}
	m.CountLines(func() []metrics.LineCounts { return counts })
	s := scrape(t, m)
	want(t, s, `blueline_messages_history_rows_total{line="+15550000001"}`, 7)
	want(t, s, `blueline_messages_twins_suppressed_total{line="+15550000001"}`, 2)
	want(t, s, `blueline_messages_screened_rows_total{line="+15550000001"}`, 1)

	// Each scrape reads the counts again.
	counts = append(counts, metrics.LineCounts{Line: "me@example.com", Screened: 4})
	counts[0].HistoryRows = 9
	s = scrape(t, m)
	want(t, s, `blueline_messages_history_rows_total{line="+15550000001"}`, 9)
	want(t, s, `blueline_messages_screened_rows_total{line="me@example.com"}`, 4)
	want(t, s, `blueline_messages_twins_suppressed_total{line="me@example.com"}`, 0)
}

// Each stage is a histogram by line, each served line listed from the
// start; the line's last day gives the same counts.
func TestLatency(t *testing.T) {
	_, line, m := open(t)
	s := scrape(t, m)
	for _, stage := range metrics.Stages {
		want(t, s, `blueline_latency_`+stage+`_seconds_count{line="+15550000001"}`, 0)
	}
	m.Latency(line.ID, metrics.AcceptToSent, 300*time.Millisecond)
	m.Latency(line.ID, metrics.AcceptToSent, 2*time.Second)
	m.Latency(line.ID, metrics.RowToWebhook, 40*time.Millisecond)
	m.Latency(line.ID, metrics.SentToDelivered, 2*time.Hour)
	m.Latency("ln_not_served", metrics.AcceptToSent, time.Second)

	s = scrape(t, m)
	want(t, s, `blueline_latency_accept_to_sent_seconds_count{line="+15550000001"}`, 2)
	want(t, s, `blueline_latency_accept_to_sent_seconds_bucket{line="+15550000001",le="0.25"}`, 0)
	want(t, s, `blueline_latency_accept_to_sent_seconds_bucket{line="+15550000001",le="0.5"}`, 1)
	want(t, s, `blueline_latency_accept_to_sent_seconds_bucket{line="+15550000001",le="2.5"}`, 2)
	want(t, s, `blueline_latency_row_to_webhook_seconds_bucket{line="+15550000001",le="0.05"}`, 1)
	want(t, s, `blueline_latency_sent_to_delivered_seconds_bucket{line="+15550000001",le="3600"}`, 0)
	want(t, s, `blueline_latency_sent_to_delivered_seconds_bucket{line="+15550000001",le="14400"}`, 1)
	if sum := s[`blueline_latency_accept_to_sent_seconds_sum{line="+15550000001"}`]; math.Abs(sum-2.3) > 1e-9 {
		t.Errorf("accept to sent sum %v, want 2.3", sum)
	}
	for k := range s {
		if strings.Contains(k, "ln_not_served") {
			t.Errorf("a line not served is counted: %s", k)
		}
	}

	d := m.LineLatency(line.ID)
	if q := d.Stages[metrics.AcceptToSent]; q.Count != 2 || q.P50 < 280*time.Millisecond || q.P50 > 320*time.Millisecond || q.P99 < 1900*time.Millisecond || q.P99 > 2100*time.Millisecond {
		t.Errorf("accept to sent over the day: %+v", q)
	}
	if q := d.Stages[metrics.SentToDelivered]; q.Count != 1 {
		t.Errorf("sent to delivered over the day: %+v", q)
	}
}

// Recording is a map read, a lock and two counts: cheap on the paths that
// call it (a sent message, a webhook's answer, a delivered receipt).
func BenchmarkLatency(b *testing.B) {
	_, line, m := open(b)
	id := line.ID
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			m.Latency(id, metrics.AcceptToSent, 1234*time.Millisecond)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Latency(id, metrics.RowToWebhook, 80*time.Millisecond)
			}
		})
	})
}
