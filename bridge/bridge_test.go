package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
)

// The markers keep the error's text and chain, and are found through
// further wrapping.
func TestErrorMarkers(t *testing.T) {
	base := fmt.Errorf("opening: %w", fs.ErrNotExist)

	p := fmt.Errorf("send: %w", bridge.Permanent(base))
	if !bridge.IsPermanent(p) || bridge.IsNotSent(p) {
		t.Errorf("permanent: IsPermanent %v, IsNotSent %v", bridge.IsPermanent(p), bridge.IsNotSent(p))
	}
	if _, ok := bridge.IsUnavailable(p); ok {
		t.Error("a permanent error is unavailable")
	}
	if !errors.Is(p, fs.ErrNotExist) || p.Error() != "send: opening: file does not exist" {
		t.Errorf("permanent error %q lost its chain", p)
	}

	u := fmt.Errorf("send: %w", bridge.Unavailable(context.DeadlineExceeded, 30*time.Second))
	if after, ok := bridge.IsUnavailable(u); !ok || after != 30*time.Second {
		t.Errorf("IsUnavailable = %v, %v", after, ok)
	}
	if bridge.IsPermanent(u) || bridge.IsNotSent(u) || !errors.Is(u, context.DeadlineExceeded) || u.Error() != "send: "+context.DeadlineExceeded.Error() {
		t.Errorf("unavailable error %q", u)
	}

	n := bridge.NotSent(base)
	if !bridge.IsNotSent(n) || bridge.IsPermanent(n) || !errors.Is(n, fs.ErrNotExist) || n.Error() != base.Error() {
		t.Errorf("not-sent error %q", n)
	}

	// Both marks: not sent, and not worth trying again.
	both := bridge.NotSent(bridge.Permanent(base))
	if !bridge.IsNotSent(both) || !bridge.IsPermanent(both) {
		t.Errorf("both marks: IsNotSent %v, IsPermanent %v", bridge.IsNotSent(both), bridge.IsPermanent(both))
	}
	// In a joined error, each mark is found.
	joined := errors.Join(errors.New("first"), bridge.Unavailable(errors.New("later"), time.Minute))
	if after, ok := bridge.IsUnavailable(joined); !ok || after != time.Minute {
		t.Errorf("joined: IsUnavailable = %v, %v", after, ok)
	}

	for _, err := range []error{nil, base, bridge.ErrNotRecorded} {
		if bridge.IsPermanent(err) || bridge.IsNotSent(err) {
			t.Errorf("%v is marked", err)
		}
		if _, ok := bridge.IsUnavailable(err); ok {
			t.Errorf("%v is unavailable", err)
		}
	}
}
