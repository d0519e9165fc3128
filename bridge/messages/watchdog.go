package messages

import (
	"context"
	"errors"
	"time"

	"github.com/blueline-app/blueline/bridge"
)

// downPing is how often the watchdog pings Messages while the line is
// down, to notice as soon as it works again.
const downPing = 30 * time.Second

// watchdog pings Messages at the start and whenever no script has run for
// PingEvery, so that a Messages that hangs or an Automation prompt nobody
// answers shows in the line's health (and holds sends back) before a send
// runs into it; a Messages that answered before and stops answering is
// quit and launched again.
func (b *Bridge) watchdog(ctx context.Context) {
	if b.cfg.PingEvery < 0 {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.checkAlive(ctx)
		next := b.cfg.PingEvery
		if b.sender.health.down() != nil {
			next = min(next, downPing)
		} else if last := b.Health().LastScript; !last.IsZero() {
			// Scripts that ran meanwhile said as much as a ping.
			next = max(time.Until(last.Add(b.cfg.PingEvery)), time.Second)
		}
		t.Reset(next)
	}
}

// checkAlive pings Messages unless a script ran lately and the line is up,
// between sends, and relaunches a Messages that no longer answers.
func (b *Bridge) checkAlive(ctx context.Context) {
	h := b.Health()
	if b.sender.health.down() == nil && !h.LastScript.IsZero() && time.Since(h.LastScript) < b.cfg.PingEvery {
		return
	}
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	err := b.sender.Ping(ctx)
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, ErrNotRunning):
		b.log.Warn("Messages is not running: launching it", "err", err)
		if err := b.launch(ctx); err != nil {
			b.log.Error("launch Messages", "err", err)
		}
	case errors.Is(err, ErrTimedOut) && b.Health().Messages == "not answering":
		b.log.Warn("Messages is not answering: quitting and launching it again", "err", err)
		if err := b.relaunch(ctx); err != nil {
			b.log.Error("relaunch Messages; sends wait until it answers", "err", err)
		}
	case errors.Is(err, ErrTimedOut):
		b.log.Warn("Messages does not answer, and no script has worked since the start: "+
			"an Automation prompt is probably waiting on the Mac's screen; sends wait until it is answered", "err", err)
	case errors.Is(err, ErrAutomationDenied):
		b.log.Error("Automation permission denied: sends wait until it is granted", "err", err)
	default:
		b.log.Warn("ping Messages", "err", err)
	}
}

// unavailable is the error of an action the line cannot take now, before
// anything was tried: it waits and is tried again. Without the watchdog to
// notice the line working again, a down line is pinged here first.
func (b *Bridge) unavailable(ctx context.Context) error {
	err := b.sender.health.down()
	if err != nil && b.cfg.PingEvery < 0 {
		b.sender.Ping(ctx) // its outcome is recorded in the health
		err = b.sender.health.down()
	}
	if err == nil {
		return nil
	}
	return bridge.Unavailable(err, b.downWait())
}

// downWait is how long an action waits while the line is down: until the
// watchdog's next ping may have found it working again.
func (b *Bridge) downWait() time.Duration {
	return min(max(b.cfg.PingEvery, time.Second), downPing)
}
