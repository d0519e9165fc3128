package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/bridge"
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

	// A timeout before anything worked is an Automation prompt nobody
	// answers; after something worked, Messages not answering. Either way
	// the line is down until a script works again.
	timeout := &ScriptError{ExitCode: 1, Code: -1712, Stderr: "Messages got an error: AppleEvent timed out. (-1712)"}
	r = &recRunner{results: []error{timeout, nil, timeout, nil}}
	s = NewSender(r, testTimeout)
	for i, want := range []struct {
		automation, messages string
		down                 bool
	}{
		{"permission pending", "", true},
		{"granted", "running", false},
		{"granted", "not answering", true},
		{"granted", "running", false},
	} {
		s.Ping(t.Context())
		if a, m := state(); a != want.automation || m != want.messages || (s.health.down() != nil) != want.down {
			t.Errorf("after ping %d: Automation %q, Messages %q, down %v; want %+v", i+1, a, m, s.health.down(), want)
		}
	}
	if runs := r.recorded(); len(runs) != 4 || !strings.Contains(runs[0].script, "count of chats") || strings.Contains(runs[0].script, "get name") {
		t.Errorf("pings %+v: want 4 that Messages itself must answer", runs)
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
	peer := connectPeer(t, h)
	waitConnected(t, h, true)
	for _, c := range []struct {
		version string
		want    map[string]string
	}{
		{"12.7.4", map[string]string{"edit": "needs macOS 13 or later (this Mac runs 12.7.4)", "unsend": "needs macOS 13 or later (this Mac runs 12.7.4)",
			"emoji_reactions": "needs macOS 15 or later (this Mac runs 12.7.4)", "reactions": ""}},
		{"14.5", map[string]string{"edit": "", "unsend": "", "emoji_reactions": "needs macOS 15 or later (this Mac runs 14.5)"}},
		// A stock helper declares neither emoji tapbacks nor, on macOS 26,
		// threaded replies.
		{"15.6", map[string]string{"edit": "", "unsend": "", "emoji_reactions": noEmojiReactions, "threaded_replies": ""}},
		{"26.1", map[string]string{"edit": "", "unsend": "", "emoji_reactions": noEmojiReactions, "threaded_replies": noThreadedReplies}},
		{"", map[string]string{"edit": "", "emoji_reactions": noEmojiReactions, "threaded_replies": ""}}, // unknown: the helper answers for it
	} {
		b := &Bridge{cfg: Config{Service: "imessage", MacOSVersion: c.version}, sender: NewSender(&recRunner{}, testTimeout), helper: h}
		got := b.Capabilities()
		for f, want := range c.want {
			if got[f] != want {
				t.Errorf("macOS %q, %s: %q, want %q", c.version, f, got[f], want)
			}
		}
	}

	// A helper that declares them.
	peer.send(map[string]any{"event": "capabilities", "capabilities": []string{HelperEmojiReactions, HelperThreadedReplies}})
	if ev := nextEvent(t, h); ev.Name != "capabilities" {
		t.Fatalf("event %q", ev.Name)
	}
	b := &Bridge{cfg: Config{Service: "imessage", MacOSVersion: "26.1"}, sender: NewSender(&recRunner{}, testTimeout), helper: h}
	if got := b.Capabilities(); got["emoji_reactions"] != "" || got["threaded_replies"] != "" {
		t.Errorf("a helper that declares emoji tapbacks and threaded replies: %v", got)
	}
}

// An edit the helper took but did not answer (it went away) is not tried
// again: it may have happened, and a second edit would show twice.
func TestUncertainHelperActionIsFinal(t *testing.T) {
	h := newTestHelper(t)
	peer := connectPeer(t, h)
	waitConnected(t, h, true)
	b := &Bridge{cfg: Config{Service: "imessage"}, sender: NewSender(&recRunner{}, testTimeout), helper: h}
	done := make(chan error, 1)
	go func() {
		done <- b.Edit(t.Context(), bridge.Edit{Conversation: bridge.Conversation{Chat: bridge.Chat{GUID: "iMessage;-;+15551110001"}},
			TargetGUID: "G1", Text: "fixed"})
	}()
	if f := peer.frame(); f["action"] != "edit-message" {
		t.Fatalf("frame %v, want edit-message", f)
	}
	peer.conn.Close()
	err := <-done
	if !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) || !errors.Is(err, ErrHelperDisconnected) {
		t.Fatalf("edit whose helper went away: %v (permanent %v), want a final unknown outcome", err, bridge.IsPermanent(err))
	}
	// Without a helper at all, nothing was done: not final.
	waitConnected(t, h, false)
	if err := b.Edit(t.Context(), bridge.Edit{TargetGUID: "G1", Text: "fixed"}); bridge.IsPermanent(err) || !bridge.IsNotSent(err) {
		t.Fatalf("edit with no helper: %v, want not sent and retryable", err)
	}
}
