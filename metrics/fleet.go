package metrics

import (
	"strconv"

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

// CountFleet has each scrape read the fleet's figures from counts, and
// counts forwarded requests (ForwardedRequest) from now on.
func (m *Metrics) CountFleet(counts func() FleetCounts) {
	m.forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "blueline_fleet_forwarded_requests_total",
		Help: "API requests this node forwarded to the node serving their line, by that node and the status it answered (0: no answer).",
	}, []string{"node", "code"})
	m.reg.MustRegister(m.forwarded, fleetCollector(counts))
}

// ForwardedRequest counts a request forwarded to node, answered with code
// (0 when the node did not answer).
func (m *Metrics) ForwardedRequest(node string, code int) {
	if m.forwarded != nil {
		m.forwarded.WithLabelValues(node, strconv.Itoa(code)).Inc()
	}
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
