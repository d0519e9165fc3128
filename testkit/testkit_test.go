package testkit_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

func TestEventuallySucceeds(t *testing.T) {
	rec := &testkit.Recorder{TB: t}
	var calls atomic.Int32
	start := time.Now()
	ok := testkit.Run(func() {
		testkit.Eventually(rec, 5*time.Second, func() bool { return calls.Add(1) >= 3 })
	})
	if !ok || (rec.Fatals() > 0) || len(rec.Failures()) > 0 {
		t.Fatalf("Eventually failed a condition that came true: returned %v, %v", ok, rec.Failures())
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the condition was polled %d times, want 3 (until it held)", n)
	}
	if time.Since(start) > 4*time.Second {
		t.Errorf("Eventually took %s for a condition true on the third poll", time.Since(start))
	}
}

func TestEventuallyTrueAtOnceDoesNotPoll(t *testing.T) {
	rec := &testkit.Recorder{TB: t}
	calls := 0
	testkit.Run(func() { testkit.Eventually(rec, time.Hour, func() bool { calls++; return true }) })
	if calls != 1 || len(rec.Failures()) > 0 {
		t.Errorf("calls %d, errors %v; want one call and no failure", calls, rec.Failures())
	}
}

func TestEventuallyFailsAfterItsDeadline(t *testing.T) {
	rec := &testkit.Recorder{TB: t}
	const within = 50 * time.Millisecond
	start := time.Now()
	var calls atomic.Int32
	ok := testkit.Run(func() {
		testkit.Eventually(rec, within, func() bool { calls.Add(1); return false })
	})
	took := time.Since(start)
	if ok {
		t.Fatal("Eventually returned although the condition never held")
	}
	if !(rec.Fatals() > 0) || len(rec.Failures()) != 1 || !strings.Contains(rec.Failures()[0], "condition not met within 50ms") {
		t.Fatalf("recorded %v (fatal %v), want one fatal \"condition not met within 50ms\"", rec.Failures(), (rec.Fatals() > 0))
	}
	if took < within {
		t.Errorf("failed after %s, before its deadline of %s", took, within)
	}
	if calls.Load() < 2 {
		t.Errorf("the condition was polled %d times within %s, want several", calls.Load(), within)
	}
}

func TestLogBufferConcurrentWrites(t *testing.T) {
	var b testkit.LogBuffer
	if b.String() != "" {
		t.Fatalf("a new buffer holds %q", b.String())
	}
	const writers, lines = 8, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				line := fmt.Sprintf("w%d line %d\n", w, i)
				n, err := b.Write([]byte(line))
				if err != nil || n != len(line) {
					t.Errorf("Write = %d, %v; want %d, nil", n, err, len(line))
				}
			}
		})
	}
	wg.Wait()
	got := b.String()
	if n := strings.Count(got, "\n"); n != writers*lines {
		t.Fatalf("%d lines, want %d", n, writers*lines)
	}
	// Each write lands whole: no line is interleaved with another.
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		var w, i int
		if _, err := fmt.Sscanf(l, "w%d line %d", &w, &i); err != nil || fmt.Sprintf("w%d line %d", w, i) != l {
			t.Fatalf("torn line %q", l)
		}
	}
	for w := range writers {
		if !strings.Contains(got, fmt.Sprintf("w%d line %d\n", w, lines-1)) {
			t.Errorf("writer %d's last line is missing", w)
		}
	}
}

func TestSharedTempDir(t *testing.T) {
	var dir string
	t.Run("inner", func(t *testing.T) {
		dir = testkit.SharedTempDir(t)
		if got := os.Getenv("TMPDIR"); got != dir {
			t.Errorf("TMPDIR = %q, want %q", got, dir)
		}
		if got := os.TempDir(); got != dir {
			t.Errorf("os.TempDir() = %q, want %q", got, dir)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode()&fs.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
			t.Errorf("mode %v, want a sticky directory open to all (drwxrwxrwt)", fi.Mode())
		}
		// Files made the usual way land in it.
		f, err := os.CreateTemp("", "x-")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if filepath.Dir(f.Name()) != dir {
			t.Errorf("os.CreateTemp put %s outside %s", f.Name(), dir)
		}
	})
	if dir == "" {
		t.Fatal("no folder")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s outlived its test: %v", dir, err)
	}
	if os.Getenv("TMPDIR") == dir {
		t.Error("TMPDIR still points at the removed folder")
	}
}
