package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// LineEntry is one line of the line directory (bucket "lines", keyed by
// line ID): which node serves it, and how it was when that node last said.
type LineEntry struct {
	Line         string    `json:"line"` // the line's ID, the key
	Handle       string    `json:"handle"`
	Node         string    `json:"node"`
	Health       string    `json:"health"` // the node's word for it, e.g. "ok", "degraded"
	Capabilities []string  `json:"capabilities,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"` // by the serving node's clock
	// BaseURL is the serving node's public URL (its signed download URLs'
	// base), "" when unknown: where a download too large to forward is
	// redirected (package fleet/route).
	BaseURL string `json:"base_url,omitempty"`
}

// DirectoryOptions tune a Directory.
type DirectoryOptions struct {
	// Lines returns this node's lines as they are now; Refresh stamps them
	// with Node and UpdatedAt. Needed to Refresh or Run.
	Lines func() []LineEntry
	// Interval between refreshes in Run. Default 10s.
	Interval time.Duration
	// TTL: an entry not refreshed for longer is down. Default 3 × Interval.
	// It compares another node's clock with this one's, so keep clocks in
	// time (NTP) and TTL well above their drift.
	TTL time.Duration
	// Clock is the time; default time.Now.
	Clock func() time.Time
}

// Directory is the line directory: this node's side keeps its own lines'
// entries fresh (Refresh, Run); any node looks a line up (Lookup) and
// tells whether its node is up (Up).
type Directory struct {
	n      *Node
	bucket *Bucket[LineEntry]
	o      DirectoryOptions
	mu     sync.Mutex // one Refresh at a time
}

// ErrLineClaimed: Refresh found a line of this node in the directory under
// another node. It is left alone: a line moves between nodes by an explicit
// Update, never by whoever refreshes last.
var ErrLineClaimed = errors.New("fleet: the line is claimed by another node")

// Directory returns the node's view of the line directory.
func (n *Node) Directory(o DirectoryOptions) (*Directory, error) {
	b, err := Open[LineEntry](n, BucketLines)
	if err != nil {
		return nil, err
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.TTL <= 0 {
		o.TTL = 3 * o.Interval
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Directory{n: n, bucket: b, o: o}, nil
}

// Bucket is the directory's bucket, to watch it or move a line (Update
// with the revision of its entry).
func (d *Directory) Bucket() *Bucket[LineEntry] { return d.bucket }

// Refresh writes this node's lines, stamped with the node's name and the
// clock: a new line is created (claimed), a line of this node updated with
// compare-and-set. A line under another node is not touched: Refresh
// reports it with ErrLineClaimed, and goes on with the others.
func (d *Directory) Refresh(ctx context.Context) error {
	if d.o.Lines == nil {
		return errors.New("fleet: a directory without DirectoryOptions.Lines cannot refresh")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A refresh that cannot finish before the next is due gives up: the
	// next one tries again.
	ctx, cancel := context.WithTimeout(ctx, d.o.Interval)
	defer cancel()
	now := d.o.Clock().UTC()
	var errs []error
	for _, e := range d.o.Lines() {
		e.Node, e.UpdatedAt = d.n.opts.Node, now
		if !ValidKey(e.Line) {
			errs = append(errs, fmt.Errorf("fleet: line ID %q cannot be a directory key", e.Line))
			continue
		}
		// A Get can lag a write made elsewhere, so a Create that finds the
		// key, or an Update that finds a newer revision, reads it again.
		raced := func(err error) bool {
			return transient(err) || errors.Is(err, ErrExists) || errors.Is(err, ErrConflict)
		}
		err := retryIf(ctx, d.n.opts.AttemptTimeout, func(ctx context.Context) error {
			cur, err := d.bucket.Get(ctx, e.Line)
			switch {
			case errors.Is(err, ErrNotFound):
				_, err = d.bucket.Create(ctx, e.Line, e, 0)
				return err
			case err != nil:
				return err
			case cur.Value.Node != e.Node:
				return fmt.Errorf("%w: line %s (%s) is under node %q, updated %s", ErrLineClaimed, e.Line, e.Handle,
					cur.Value.Node, cur.Value.UpdatedAt.Format(time.RFC3339))
			}
			_, err = d.bucket.Update(ctx, e.Line, e, cur.Revision)
			return err
		}, raced)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Release deletes this node's entry of line (the line left the node),
// unless another node has it. A read that lags a write is retried.
func (d *Directory) Release(ctx context.Context, line string) error {
	var err error
	for range 5 {
		var cur Entry[LineEntry]
		cur, err = d.bucket.Get(ctx, line)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Value.Node != d.n.opts.Node {
			return fmt.Errorf("%w: line %s is under node %q", ErrLineClaimed, line, cur.Value.Node)
		}
		if err = d.bucket.Delete(ctx, line, cur.Revision); !errors.Is(err, ErrConflict) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// Run refreshes every Interval (and once at once) until ctx ends, stop is
// called or the node closes, logging failures. stop waits for the loop to
// end.
func (d *Directory) Run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	if !d.n.onClose(stop) {
		cancel()
		close(done)
		return stop
	}
	go func() {
		defer close(done)
		t := time.NewTicker(d.o.Interval)
		defer t.Stop()
		for {
			if err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
				d.n.log.Warn("fleet: refreshing the line directory", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return stop
}

// Lookup reads line's entry (ErrNotFound when no node has it). Like every
// Get it may be stale: on ErrNodeDown or ErrTimeout from Forward, look up
// again before answering that the line is unavailable.
func (d *Directory) Lookup(ctx context.Context, line string) (Entry[LineEntry], error) {
	return d.bucket.Get(ctx, line)
}

// Up reports whether e's node refreshed it within the TTL, by this node's
// clock.
func (d *Directory) Up(e LineEntry) bool {
	return d.o.Clock().Sub(e.UpdatedAt) <= d.o.TTL
}

// Lines lists every entry of the directory, by line ID.
func (d *Directory) Lines(ctx context.Context) ([]LineEntry, error) {
	keys, err := d.bucket.Keys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]LineEntry, 0, len(keys))
	for _, k := range keys {
		e, err := d.bucket.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e.Value)
	}
	slices.SortFunc(out, func(a, b LineEntry) int { return strings.Compare(a.Line, b.Line) })
	return out, nil
}
