package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/testkit"
)

// Without [fleet] nothing of the fleet starts.
func TestNoFleetByDefault(t *testing.T) {
	log, _ := testLog()
	d, err := Start(context.Background(), testConfig(t), log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	if d.fleet != nil {
		t.Fatal("a daemon without [fleet] started a fleet node")
	}
}

// A host with [fleet] alone is a fleet of one: its embedded NATS runs
// standalone, and its lines are in the line directory, under its name.
func TestFleetOfOne(t *testing.T) {
	cfg := testConfig(t)
	cfg.Fleet.Node, cfg.Fleet.Secret, cfg.Fleet.Listen = "mac-a", "a-secret-of-the-fleet-0123", "127.0.0.1:0"
	log, _ := testLog()
	d, err := Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	if d.fleet == nil || d.fleet.Name() != "mac-a" || d.fleet.Replicas() != 1 {
		t.Fatalf("fleet node %+v", d.fleet)
	}
	dir, err := d.fleet.Directory(fleet.DirectoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		entries, err := dir.Lines(context.Background())
		if err != nil || len(entries) != len(d.lines) {
			return false
		}
		for _, e := range entries {
			if e.Node != "mac-a" || e.Health != "ok" || !dir.Up(e) {
				return false
			}
		}
		return true
	})
}
