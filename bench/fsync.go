package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// syncProbe times small write+fsync rounds in dir, on the filesystem the
// database lives on. Every accepted POST waits for at least one commit's
// fsyncs, so a slow or noisy disk shows up here before it shows up in the
// POST figures; on a shared virtual machine it varies from run to run.
type syncProbe struct {
	n             int
	p50, p99, max time.Duration
	err           error
}

func probeSync(dir string, n int) syncProbe {
	p := syncProbe{n: n}
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		p.err = fmt.Errorf("fsync probe: %w", err)
		return p
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	took := make([]time.Duration, 0, n)
	for i := range n {
		// Rewrite one of 64 pages each round, as a commit rewrites pages
		// of an existing file.
		if _, err := f.WriteAt(page, int64(i%64)*int64(len(page))); err != nil {
			p.err = fmt.Errorf("fsync probe %s: %w", filepath.Base(f.Name()), err)
			return p
		}
		start := time.Now()
		if err := f.Sync(); err != nil {
			p.err = fmt.Errorf("fsync probe %s: %w", filepath.Base(f.Name()), err)
			return p
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	p.p50, p.p99, p.max = pct(took, 0.5), pct(took, 0.99), pct(took, 1)
	return p
}
