// Package testkit is what Blueline's tests share besides the API client
// (package apitest): waiting for a condition with a deadline, a log buffer
// that goroutines may write to, and a temporary folder shared as /tmp is.
// It is imported by tests only.
package testkit

import (
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails the test if it does not
// within the given time. Tests wait with it instead of sleeping.
func Eventually(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LogBuffer collects a logger's output from many goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// SharedTempDir points the temporary directory (TMPDIR) at a fresh folder
// that, like /tmp, anyone may write in (sticky): where another user's
// process could plant a file. It is removed after the test.
func SharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	return dir
}
