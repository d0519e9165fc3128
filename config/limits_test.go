package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/config"
)

// [limits] max_connections and body_idle_timeout: defaults, values, and
// what is refused.
func TestConnectionLimits(t *testing.T) {
	def := config.Default().Limits
	if def.MaxConnections != 1024 || def.BodyIdleTimeout.Duration != 30*time.Second {
		t.Errorf("defaults: max_connections %d, body_idle_timeout %s; want 1024, 30s", def.MaxConnections, def.BodyIdleTimeout)
	}
	c := mustLoad(t, "[limits]\nmax_connections = 2\nbody_idle_timeout = \"300ms\"\n"+oneLine)
	if c.Limits.MaxConnections != 2 || c.Limits.BodyIdleTimeout.Duration != 300*time.Millisecond {
		t.Errorf("set: %+v", c.Limits)
	}
	if c := mustLoad(t, "[limits]\nrequests_per_hour = 5\n"+oneLine); c.Limits.MaxConnections != 1024 ||
		c.Limits.BodyIdleTimeout.Duration != 30*time.Second {
		t.Errorf("a [limits] table without them must keep the defaults: %+v", c.Limits)
	}

	for _, tt := range []struct{ doc, want string }{
		{"max_connections = 0", "limits.max_connections: must be from 1 to 1048576, got 0"},
		{"max_connections = -1", "limits.max_connections: must be from 1 to 1048576, got -1"},
		{"max_connections = 2000000", "limits.max_connections: must be from 1 to 1048576, got 2000000"},
		{`body_idle_timeout = "50ms"`, "limits.body_idle_timeout: must be from 100ms to 1h, got 50ms"},
		{`body_idle_timeout = "2h"`, "limits.body_idle_timeout: must be from 100ms to 1h, got 2h0m0s"},
		{`body_idle_timeout = "0s"`, "limits.body_idle_timeout: must be from 100ms to 1h, got 0s"},
		{"body_idle_timeout = 30", `invalid duration 30: write a quoted number with a unit`},
	} {
		_, err := config.Load(writeConfig(t, "[limits]\n"+tt.doc+"\n"+oneLine))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.doc, err, tt.want)
		}
	}
}
