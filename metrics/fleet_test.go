package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/metrics"
)

// A fleet node's figures: the stream's lag, each webhook consumer's
// backlog and events in flight. A host without a fleet exports none of
// them.
func TestFleetMetrics(t *testing.T) {
	scrape := func(m *metrics.Metrics) string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	_, _, single := open(t)
	if out := scrape(single); strings.Contains(out, "blueline_fleet_") {
		t.Errorf("a single host exports fleet metrics:\n%s", out)
	}

	_, _, m := open(t)
	m.CountFleet(func() metrics.FleetCounts {
		return metrics.FleetCounts{StreamLag: 3, Backlog: map[string]uint64{"wh_1": 7}, InFlight: map[string]int{"wh_1": 2}}
	})
	out := scrape(m)
	for _, want := range []string{
		"blueline_fleet_stream_lag_events 3",
		`blueline_fleet_webhook_backlog_events{consumer="wh_1"} 7`,
		`blueline_fleet_webhook_in_flight_events{consumer="wh_1"} 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}

func TestForwards(t *testing.T) {
	_, _, m := open(t)
	observe := m.Forwards()
	observe("mac-b", "answered", 20*time.Millisecond)
	observe("mac-b", "answered", 30*time.Millisecond)
	observe("mac-c", "down", 0)
	s := scrape(t, m)
	want(t, s, `blueline_fleet_forwarded_requests_total{node="mac-b",outcome="answered"}`, 2)
	want(t, s, `blueline_fleet_forwarded_requests_total{node="mac-c",outcome="down"}`, 1)
	want(t, s, `blueline_fleet_forward_seconds_count{node="mac-b"}`, 2)
}
