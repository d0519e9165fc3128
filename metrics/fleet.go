package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FleetCounts are a fleet node's figures read at each scrape.
type FleetCounts struct {
	// StreamLag is how many events this node recorded and has not yet
	// published to the fleet's stream.
	StreamLag uint64
	// Backlog is, per webhook consumer, how many events are not yet
	// handed out; InFlight how many are handed out and not acknowledged.
	Backlog  map[string]uint64
	InFlight map[string]int
}

// CountFleet has each scrape read a fleet node's figures from counts.
// Call it once, and only in a fleet: a single host shows none of these.
func (m *Metrics) CountFleet(counts func() FleetCounts) {
	m.reg.MustRegister(fleetCollector(counts))
}

type fleetCollector func() FleetCounts

var (
	descStreamLag = prometheus.NewDesc("blueline_fleet_stream_lag_events",
		"Events this node recorded and has not yet published to the fleet's stream.", nil, nil)
	descBacklog = prometheus.NewDesc("blueline_fleet_webhook_backlog_events",
		"Events of the fleet's stream a webhook's consumer has not yet handed out, by consumer.", []string{"consumer"}, nil)
	descInFlight = prometheus.NewDesc("blueline_fleet_webhook_in_flight_events",
		"Events handed out to a webhook's delivery and not yet acknowledged (being delivered, or waiting for a retry), by consumer.", []string{"consumer"}, nil)
)

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descStreamLag
	ch <- descBacklog
	ch <- descInFlight
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	f := c()
	ch <- prometheus.MustNewConstMetric(descStreamLag, prometheus.GaugeValue, float64(f.StreamLag))
	for name, n := range f.Backlog {
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(n), name)
	}
	for name, n := range f.InFlight {
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(n), name)
	}
}

// Forwards registers the counts of the API requests this node forwards to
// the other nodes of its fleet (package fleet/route), and returns what
// records one: the node asked, the outcome ("answered", "down", "timeout",
// "too_large" or "failed") and how long it took. Call it once, and only in
// a fleet: a single host shows none of these.
func (m *Metrics) Forwards() func(node, outcome string, d time.Duration) {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "blueline_fleet_forwarded_requests_total",
		Help: "API requests forwarded to another node of the fleet, by node and outcome (answered, down, timeout, too_large, failed).",
	}, []string{"node", "outcome"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "blueline_fleet_forward_seconds",
		Help:    "Time for another node of the fleet to answer a forwarded API request, by node.",
		Buckets: prometheus.DefBuckets,
	}, []string{"node"})
	m.reg.MustRegister(count, duration)
	return func(node, outcome string, d time.Duration) {
		count.WithLabelValues(node, outcome).Inc()
		if outcome == "answered" {
			duration.WithLabelValues(node).Observe(d.Seconds())
		}
	}
}
