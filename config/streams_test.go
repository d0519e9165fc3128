package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/config"
)

// [limits] streams_per_key and stream_lifetime: defaults, values, and what
// is refused.
func TestStreamLimits(t *testing.T) {
	def := config.Default().Limits
	if def.StreamsPerKey != 4 || def.StreamLifetime.Duration != time.Hour {
		t.Errorf("defaults: streams_per_key %d, stream_lifetime %s; want 4, 1h", def.StreamsPerKey, def.StreamLifetime)
	}
	c := mustLoad(t, "[limits]\nstreams_per_key = 1\nstream_lifetime = \"1s\"\n"+oneLine)
	if c.Limits.StreamsPerKey != 1 || c.Limits.StreamLifetime.Duration != time.Second {
		t.Errorf("set: %+v", c.Limits)
	}
	for _, tt := range []struct{ doc, want string }{
		{"streams_per_key = 0", "limits.streams_per_key: must be from 1 to 1000, got 0"},
		{"streams_per_key = 1001", "limits.streams_per_key: must be from 1 to 1000, got 1001"},
		{`stream_lifetime = "500ms"`, "limits.stream_lifetime: must be from 1s to 24h, got 500ms"},
		{`stream_lifetime = "25h"`, "limits.stream_lifetime: must be from 1s to 24h, got 25h0m0s"},
	} {
		_, err := config.Load(writeConfig(t, "[limits]\n"+tt.doc+"\n"+oneLine))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.doc, err, tt.want)
		}
	}
}
