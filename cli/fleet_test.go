package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
)

// The status names each node, line and asset, a node down and a line
// unavailable included, and prints no control character a node sent.
func TestPrintFleetStatus(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	st := api.FleetStatus{
		Node: "mac-a",
		Nodes: []api.FleetNode{
			{Node: "mac-a", Up: true, Version: "1.0", Lines: []string{"+15550001001"}, LastSeen: now.Add(-2 * time.Second).UnixMilli()},
			{Node: "mac-c", Version: "1.0\x1b[31m", Lines: []string{"+15550003001"}, LastSeen: now.Add(-time.Minute).UnixMilli()},
		},
		Lines: []api.FleetLine{
			{Handle: "+15550001001", Node: "mac-a", Health: "ok", Up: true},
			{Handle: "+15550003001", Node: "mac-c", Health: "ok"},
		},
		Stream:    api.FleetAsset{Name: "bl_events", Messages: 12, Replicas: 3, Current: 2, Leader: "mac-a"},
		Buckets:   []api.FleetAsset{{Name: "keys", Messages: 2, Replicas: 3, Current: 3, Leader: "mac-b"}},
		Consumers: []api.FleetConsumer{{Name: "wh_abc", Pending: 7, AckPending: 1}},
	}
	var b strings.Builder
	if err := printFleetStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"node mac-a", "mac-c", "DOWN", "1m0s ago", "2s ago", "unavailable (node down)",
		"stream bl_events", "bucket keys", "wh_abc", "7"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsRune(out, '\x1b') {
		t.Errorf("status printed an escape a node sent:\n%q", out)
	}
}
