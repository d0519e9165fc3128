// Package metrics keeps Blueline's Prometheus metrics on a registry of its
// own. The daemon serves them on the admin socket only (GET /metrics), never
// on the API's listener. The packages that count things declare the small
// interface they need (server.Metrics, delivery.Metrics, webhook.Metrics);
// *Metrics implements them all.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blueline-app/blueline/storage"
)

// Outcomes of an outbox attempt and of a webhook attempt.
const (
	Sent    = "sent"    // the network took it
	Retried = "retried" // failed; tried again later
	Failed  = "failed"  // failed for good

	Success = "success" // the receiver answered 2xx
	Failure = "failure" // anything else
)

// Metrics is the daemon's registry and the collectors it counts with.
type Metrics struct {
	reg             *prometheus.Registry
	log             *slog.Logger
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	sends           *prometheus.CounterVec
	bridgeSend      *prometheus.HistogramVec
	webhookAttempts *prometheus.CounterVec
	latency         *latencies
}

// New returns the metrics, with the queue and file figures read from db at
// each scrape.
func New(db *storage.DB, log *slog.Logger) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		log: log,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blueline_http_requests_total",
			Help: "API requests answered, by route (method and pattern; \"unmatched\" for no route, \"preflight\" for CORS preflight) and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blueline_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blueline_outbox_sends_total",
			Help: "Outbox delivery attempts by outcome: sent, retried (failed, tried again later) or failed (for good).",
		}, []string{"outcome"}),
		bridgeSend: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blueline_bridge_send_seconds",
			Help:    "Time a bridge took over one send, reaction, typing change or read receipt, successful or not, by bridge (sim or messages).",
			Buckets: []float64{.001, .005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"bridge"}),
		webhookAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blueline_webhook_attempts_total",
			Help: "Webhook delivery attempts by outcome: success (a 2xx answer) or failure.",
		}, []string{"outcome"}),
	}
	// Every outcome is listed from the start, at 0.
	for _, o := range []string{Sent, Retried, Failed} {
		m.sends.WithLabelValues(o)
	}
	for _, b := range []string{"sim", "messages"} {
		m.bridgeSend.WithLabelValues(b)
	}
	for _, o := range []string{Success, Failure} {
		m.webhookAttempts.WithLabelValues(o)
	}
	m.latency = newLatencies(time.Now, func(lineID string) (string, bool) {
		l, ok := db.LineByID(lineID)
		return l.Handle, ok
	})
	// Each line's histograms are listed from the start, empty.
	for _, l := range db.Lines() {
		m.latency.line(l.ID)
	}
	m.reg.MustRegister(m.requests, m.duration, m.sends, m.bridgeSend, m.webhookAttempts, &storageCollector{db: db},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.latency.collectors()...)
	return m
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	var errLog promhttp.Logger
	if m.log != nil {
		errLog = slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: errLog, ErrorHandling: promhttp.ContinueOnError})
}

// ObserveRequest counts an API request.
func (m *Metrics) ObserveRequest(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// OutboxSend counts an outbox attempt's outcome (Sent, Retried or Failed).
func (m *Metrics) OutboxSend(outcome string) { m.sends.WithLabelValues(outcome).Inc() }

// BridgeSend records how long a bridge took over one action.
func (m *Metrics) BridgeSend(bridge string, d time.Duration) {
	m.bridgeSend.WithLabelValues(bridge).Observe(d.Seconds())
}

// WebhookAttempt counts a webhook attempt's outcome (Success or Failure).
func (m *Metrics) WebhookAttempt(outcome string) { m.webhookAttempts.WithLabelValues(outcome).Inc() }

// Latency records how long a stage of a line's traffic took (AcceptToSent,
// RowToWebhook or SentToDelivered), for the stage's histogram and the
// line's last day. A line not served is not counted.
func (m *Metrics) Latency(lineID, stage string, d time.Duration) { m.latency.observe(lineID, stage, d) }

// LineLatency is a line's quantiles of each stage over the last day.
func (m *Metrics) LineLatency(lineID string) DayLatency { return m.latency.day(lineID) }

// storageCollector reads the queues and the database file at scrape time.
type storageCollector struct {
	db *storage.DB
}

var (
	descOutboxItems = prometheus.NewDesc("blueline_outbox_items",
		"Outbox items by state: pending (waiting for an attempt, due now or later) or claimed (being sent).", []string{"state"}, nil)
	descOutboxOldest = prometheus.NewDesc("blueline_outbox_oldest_seconds",
		"Age of the oldest outbox item by state: for pending, how long the most overdue item has been due (0 when none is due yet); for claimed, how long ago the oldest item being sent was accepted. 0 when the state is empty.",
		[]string{"state"}, nil)
	descWebhookPending = prometheus.NewDesc("blueline_webhook_deliveries_pending",
		"Webhook deliveries waiting for an attempt (due now or later).", nil, nil)
	descFileBytes = prometheus.NewDesc("blueline_bolt_file_bytes",
		"Size of the database file (db.bolt).", nil, nil)
	descReadTx = prometheus.NewDesc("blueline_bolt_read_tx_total",
		"Read transactions started.", nil, nil)
	descOpenReadTx = prometheus.NewDesc("blueline_bolt_open_read_tx",
		"Read transactions open now.", nil, nil)
	descFreePages = prometheus.NewDesc("blueline_bolt_free_pages",
		"Database pages free for reuse (or pending release).", nil, nil)
	descPageWrites = prometheus.NewDesc("blueline_bolt_page_writes_total",
		"Pages written by commits.", nil, nil)
	descWriteSeconds = prometheus.NewDesc("blueline_bolt_write_seconds_total",
		"Time spent writing pages to disk.", nil, nil)
)

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOutboxItems, descOutboxOldest, descWebhookPending, descFileBytes,
		descReadTx, descOpenReadTx, descFreePages, descPageWrites, descWriteSeconds} {
		ch <- d
	}
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if q, err := c.db.QueueStats(context.Background()); err != nil {
		for _, d := range []*prometheus.Desc{descOutboxItems, descOutboxOldest, descWebhookPending} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
	} else {
		now := time.Now().UnixMilli()
		age := func(since int64) float64 {
			if since == 0 || since > now {
				return 0
			}
			return float64(now-since) / 1000
		}
		gauge(descOutboxItems, float64(q.OutboxPending), storage.StatusPending)
		gauge(descOutboxItems, float64(q.OutboxClaimed), storage.StatusClaimed)
		gauge(descOutboxOldest, age(q.OldestDue), storage.StatusPending)
		gauge(descOutboxOldest, age(q.OldestClaimed), storage.StatusClaimed)
		gauge(descWebhookPending, float64(q.WebhookDeliveries))
	}
	if fi, err := os.Stat(c.db.Path()); err != nil {
		ch <- prometheus.NewInvalidMetric(descFileBytes, err)
	} else {
		gauge(descFileBytes, float64(fi.Size()))
	}
	s := c.db.BoltStats()
	ch <- prometheus.MustNewConstMetric(descReadTx, prometheus.CounterValue, float64(s.ReadTx))
	gauge(descOpenReadTx, float64(s.OpenReadTx))
	gauge(descFreePages, float64(s.FreePages))
	ch <- prometheus.MustNewConstMetric(descPageWrites, prometheus.CounterValue, float64(s.PageWrites))
	ch <- prometheus.MustNewConstMetric(descWriteSeconds, prometheus.CounterValue, s.WriteTime.Seconds())
}

// LineCounts are what a Messages line's bridge took for other than news
// since the daemon started.
type LineCounts struct {
	Line                         string // the line's handle
	HistoryRows, Twins, Screened int64
}

// CountLines has each scrape read the lines' counts from counts.
func (m *Metrics) CountLines(counts func() []LineCounts) {
	m.reg.MustRegister(lineCollector(counts))
}

type lineCollector func() []LineCounts

var (
	descHistoryRows = prometheus.NewDesc("blueline_messages_history_rows_total",
		"New chat.db rows stored as history without events (old messages written again, as Messages in iCloud does), by line.", []string{"line"}, nil)
	descTwins = prometheus.NewDesc("blueline_messages_twins_suppressed_total",
		"New chat.db rows that repeated a stored message under another GUID and were not stored again, by line.", []string{"line"}, nil)
	descScreened = prometheus.NewDesc("blueline_messages_screened_rows_total",
		"chat.db rows Messages filed away (junk, filter folders, unknown senders held), stored without events, by line.", []string{"line"}, nil)
)

func (c lineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHistoryRows
	ch <- descTwins
	ch <- descScreened
}

func (c lineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c() {
		ch <- prometheus.MustNewConstMetric(descHistoryRows, prometheus.CounterValue, float64(l.HistoryRows), l.Line)
		ch <- prometheus.MustNewConstMetric(descTwins, prometheus.CounterValue, float64(l.Twins), l.Line)
		ch <- prometheus.MustNewConstMetric(descScreened, prometheus.CounterValue, float64(l.Screened), l.Line)
	}
}
