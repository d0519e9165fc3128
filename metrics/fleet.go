package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
