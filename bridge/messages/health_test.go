package messages

import (
	"testing"
)

// What the scripts' outcomes say of Automation and Messages, in turn.
func TestSenderHealth(t *testing.T) {
	r := &recRunner{results: []error{
		&ScriptError{ExitCode: 1, Code: -1743, Stderr: "Not authorized to send Apple events to Messages. (-1743)"},
		&ScriptError{ExitCode: 1, Code: -600, Stderr: "Application isn’t running. (-600)"},
		nil,
	}}
	s := NewSender(r, testTimeout)
	state := func() (string, string) {
		s.health.mu.Lock()
		defer s.health.mu.Unlock()
		return s.health.automation, s.health.messages
	}
	if a, m := state(); a != "" || m != "" || !s.health.lastScript.IsZero() {
		t.Fatalf("before any script: %q %q", a, m)
	}
	steps := []struct{ automation, messages string }{
		{"denied", ""},
		{"granted", "not running"},
		{"granted", "running"},
	}
	for i, want := range steps {
		s.SendText(t.Context(), chatTarget, "hi")
		if a, m := state(); a != want.automation || m != want.messages {
			t.Errorf("after run %d: Automation %q, Messages %q; want %q, %q", i+1, a, m, want.automation, want.messages)
		}
	}
	if n := len(r.recorded()); n != len(steps) {
		t.Errorf("%d runs, want %d", n, len(steps))
	}
	h := Health{ChatDB: "readable", Automation: "granted", Messages: "running", Helper: "not connected"}
	if got, want := h.String(), "chat.db readable; Automation granted; Messages running; helper not connected"; got != want {
		t.Errorf("Health.String() = %q, want %q", got, want)
	}
}

// Features that need a recent macOS say so when this Mac's is older, once
// the helper is connected (before, the helper is the reason).
func TestCapabilitiesByMacOSVersion(t *testing.T) {
	h := newTestHelper(t)
	connectPeer(t, h)
	waitConnected(t, h, true)
	for _, c := range []struct {
		version string
		want    map[string]string
	}{
		{"12.7.4", map[string]string{"edit": "needs macOS 13 or later (this Mac runs 12.7.4)", "unsend": "needs macOS 13 or later (this Mac runs 12.7.4)",
			"emoji_reactions": "needs macOS 15 or later (this Mac runs 12.7.4)", "reactions": ""}},
		{"14.5", map[string]string{"edit": "", "unsend": "", "emoji_reactions": "needs macOS 15 or later (this Mac runs 14.5)"}},
		{"26.1", map[string]string{"edit": "", "unsend": "", "emoji_reactions": ""}},
		{"", map[string]string{"edit": "", "emoji_reactions": ""}}, // unknown: the helper answers for it
	} {
		b := &Bridge{cfg: Config{Service: "imessage", MacOSVersion: c.version}, sender: NewSender(&recRunner{}, testTimeout), helper: h}
		got := b.Capabilities()
		for f, want := range c.want {
			if got[f] != want {
				t.Errorf("macOS %q, %s: %q, want %q", c.version, f, got[f], want)
			}
		}
	}
}
