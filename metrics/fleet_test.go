package metrics_test

import (
	"testing"
	"time"
)

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
