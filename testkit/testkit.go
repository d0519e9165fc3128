// Package testkit is what Blueline's tests share besides the API client
// (package apitest): waiting for a condition with a deadline, a log buffer
// that goroutines may write to, and a temporary folder shared as /tmp is.
// It is imported by tests only.
package testkit

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
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

// Recorder is a testing.TB that records failures instead of failing the
// test it wraps, so that a test can check what a helper reports. A Fatal
// ends the calling goroutine, as the testing package's does: call what may
// fail through Run.
type Recorder struct {
	testing.TB
	mu     sync.Mutex
	errs   []string
	fatals int
}

// Helper does nothing: the recorder reports no lines.
func (r *Recorder) Helper() {}

// Errorf records a failure.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Error records a failure.
func (r *Recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

// Fatalf records a failure and ends the calling goroutine.
func (r *Recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.fatals++
	r.mu.Unlock()
	runtime.Goexit()
}

// Fatal records a failure and ends the calling goroutine.
func (r *Recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// Failures are the failures recorded, in order.
func (r *Recorder) Failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// Fatals is how many of them were fatal.
func (r *Recorder) Fatals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatals
}

// Run calls fn in a goroutine of its own, so that a Recorder's Fatal ends
// only fn, and reports whether fn returned normally.
func Run(fn func()) (returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
		returned = true
	}()
	<-done
	return returned
}
