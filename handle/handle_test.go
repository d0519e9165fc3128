package handle_test

import (
	"errors"
	"testing"

	"github.com/blueline-app/blueline/handle"
)

func TestNormalize(t *testing.T) {
	good := map[string]string{
		"+15550102000":         "+15550102000",
		" +1 (555) 010-2000":   "+15550102000",
		"+44.20.7946.0000":     "+442079460000",
		"55555":                "55555",
		"Jane.Doe@Example.com": "jane.doe@example.com",
	}
	for in, want := range good {
		got, err := handle.Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{"", "  ", "12", "+1234567890123456", "555-CALL-NOW", "1+555", "a@b", "@example.com", "a@@b.com", "a b@c.com", "a@b.com.", "cht_abc"}
	for _, in := range bad {
		if got, err := handle.Normalize(in); !errors.Is(err, handle.ErrInvalid) {
			t.Errorf("Normalize(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestIsPhone(t *testing.T) {
	if !handle.IsPhone("+15550102000") || handle.IsPhone("a@b.com") || handle.IsPhone("") {
		t.Fatal("IsPhone misclassifies")
	}
}
