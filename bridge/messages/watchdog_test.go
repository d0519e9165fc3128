package messages

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
)

// The watchdog pings Messages as the bridge starts, and launches it when
// it is not running.
func TestWatchdogPingsAtStart(t *testing.T) {
	t.Parallel()
	t.Run("running", func(t *testing.T) {
		r := newRig(t, func(c *Config) { c.PingEvery = time.Hour })
		r.start()
		waitUntil(t, func() bool { return r.b.Health().Messages == "running" })
		r.mac.checkKinds(t, "ping")
		if h := r.b.Health(); h.Automation != "granted" || h.LastScript.IsZero() {
			t.Errorf("health %+v", h)
		}
		// A script ran moments ago and the line is up: no ping now.
		r.b.checkAlive(t.Context())
		r.mac.checkKinds(t, "ping")
	})
	t.Run("not running", func(t *testing.T) {
		r := newRig(t, func(c *Config) { c.PingEvery = time.Hour })
		r.mac.answer(func(n int, c scriptCall) error {
			if n == 0 {
				return scriptFailure(scriptErrNotRunning)
			}
			return nil
		})
		r.start()
		waitUntil(t, func() bool { return len(r.mac.recorded()) == 3 && r.b.Health().Messages == "running" })
		r.mac.checkKinds(t, "ping", "launch", "ping")
	})
}

// A ping that times out before anything worked is an Automation prompt
// nobody answered: sends wait, unavailable, until a ping works.
func TestWatchdogAutomationPending(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.PingEvery = time.Hour })
	dm := r.db.DirectChat("imessage", alice)
	r.mac.answer(func(int, scriptCall) error { return scriptFailure(scriptErrTimedOut) })
	r.start()
	waitUntil(t, func() bool {
		return r.b.Health().Automation == "permission pending" && strings.Contains(r.logs.String(), "an Automation prompt is probably waiting")
	})
	r.stop()
	r.mac.checkKinds(t, "ping")
	_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "hi"))
	if pause, ok := bridge.IsUnavailable(err); !ok || pause != time.Second*30 || !strings.Contains(err.Error(), "Automation permission pending") {
		t.Fatalf("Send while Automation is pending: %v (%s)", err, pause)
	}
	r.mac.checkKinds(t, "ping")

	// The prompt answered: the next check finds the line up.
	r.mac.answer(nil)
	r.b.checkAlive(t.Context())
	if h := r.b.Health(); h.Automation != "granted" || h.Messages != "running" {
		t.Fatalf("health %+v", h)
	}
	r.mac.checkKinds(t, "ping")
}

// A Messages that answered before and stops answering is quit and
// launched again; other failures are logged.
func TestWatchdogRelaunchesAHungMessages(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.PingEvery = time.Nanosecond })
	r.mac.answer(func(n int, c scriptCall) error {
		if n == 1 {
			return scriptFailure(scriptErrTimedOut)
		}
		return nil
	})
	r.b.checkAlive(t.Context())
	r.b.checkAlive(t.Context())
	r.mac.checkKinds(t, "ping", "ping", "quit", "launch", "ping")
	if h := r.b.Health(); h.Messages != "running" {
		t.Errorf("health after the relaunch %+v", h)
	}
	if !strings.Contains(r.logs.String(), "Messages is not answering: quitting and launching it again") {
		t.Errorf("log:\n%s", r.logs)
	}

	for _, c := range []struct {
		fail error
		log  string
		want []string
	}{
		{scriptFailure(scriptErrNotPermitted), "Automation permission denied: sends wait", []string{"ping"}},
		{errors.New("osascript crashed"), "ping Messages", []string{"ping"}},
	} {
		r.mac.answer(func(int, scriptCall) error { return c.fail })
		r.b.checkAlive(t.Context())
		if got := r.mac.kinds(); !slices.Equal(got, c.want) {
			t.Errorf("runs %q, want %q", got, c.want)
		}
		if !strings.Contains(r.logs.String(), c.log) {
			t.Errorf("log lacks %q:\n%s", c.log, r.logs)
		}
	}

	// A launch that fails is logged.
	r.mac.answer(func(n int, c scriptCall) error {
		if n == 0 {
			return scriptFailure(scriptErrNotRunning)
		}
		return errors.New("cannot launch")
	})
	r.b.checkAlive(t.Context())
	r.mac.checkKinds(t, "ping", "launch")
	if !strings.Contains(r.logs.String(), "launch Messages") {
		t.Errorf("log:\n%s", r.logs)
	}

	// A relaunch that fails is logged; sends wait.
	r.mac.answer(nil)
	r.b.checkAlive(t.Context()) // up again
	r.mac.answer(func(n int, c scriptCall) error {
		if scriptKind(c.script) == "quit" {
			return errors.New("cannot quit")
		}
		return scriptFailure(scriptErrTimedOut)
	})
	r.b.checkAlive(t.Context())
	r.mac.checkKinds(t, "ping", "quit")
	if !strings.Contains(r.logs.String(), "relaunch Messages; sends wait until it answers") {
		t.Errorf("log:\n%s", r.logs)
	}
	if _, ok := bridge.IsUnavailable(r.b.unavailable(t.Context())); !ok {
		t.Error("the line is not unavailable while Messages does not answer")
	}
}
