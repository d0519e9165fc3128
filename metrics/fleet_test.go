package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/metrics"
)

// A fleet node's figures: forwarded requests by node and answer, the
// stream's lag, each webhook consumer's backlog and events in flight. A
// host without a fleet exports none of them.
func TestFleetMetrics(t *testing.T) {
	scrape := func(m *metrics.Metrics) string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	_, _, single := open(t)
	single.ForwardedRequest("mac-c", 200) // no fleet: counted nowhere, no panic
	if out := scrape(single); strings.Contains(out, "blueline_fleet_") {
		t.Errorf("a single host exports fleet metrics:\n%s", out)
	}

	_, _, m := open(t)
	m.CountFleet(func() metrics.FleetCounts {
		return metrics.FleetCounts{StreamLag: 3, Backlog: map[string]uint64{"wh_1": 7}, InFlight: map[string]int{"wh_1": 2}}
	})
	m.ForwardedRequest("mac-c", 201)
	m.ForwardedRequest("mac-c", 201)
	m.ForwardedRequest("mac-b", 0)
	out := scrape(m)
	for _, want := range []string{
		`blueline_fleet_forwarded_requests_total{code="201",node="mac-c"} 2`,
		`blueline_fleet_forwarded_requests_total{code="0",node="mac-b"} 1`,
		"blueline_fleet_stream_lag_events 3",
		`blueline_fleet_webhook_backlog_events{consumer="wh_1"} 7`,
		`blueline_fleet_webhook_in_flight_events{consumer="wh_1"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}
