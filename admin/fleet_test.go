package admin_test

import (
	"strings"
	"testing"
)

// A host without [fleet] says so, and how to make it a node.
func TestFleetOff(t *testing.T) {
	e := newEnv(t, envOptions{})
	if msg := e.refused(404, "fleet_disabled", "", "GET", "/fleet", nil); !strings.Contains(msg, "[fleet]") {
		t.Errorf("message %q does not say how", msg)
	}
}
