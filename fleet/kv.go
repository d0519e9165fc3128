package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The control plane's buckets, by the names Open takes. Each is the
// JetStream KV bucket "<prefix>_<name>".
const (
	BucketKeys     = "keys"     // API keys: hashes, scopes, lines, owner, revoked, last use
	BucketWebhooks = "webhooks" // webhooks and their secrets
	BucketSandbox  = "sandbox"  // sandbox owners
	BucketSessions = "sessions" // console sessions (per-key TTLs allowed)
	BucketLines    = "lines"    // the line directory (see Directory)
	BucketNodes    = "nodes"    // the nodes' heartbeats (see Beat)
)

// BucketMaxBytes caps each bucket's disk use (and is reserved on each of
// its replicas).
const BucketMaxBytes = 32 << 20

// bucketSpecs are the buckets Start provisions.
var bucketSpecs = []struct {
	name    string
	history uint8
	marker  bool // LimitMarkerTTL: allows per-key TTLs, and tells watchers of expiry
}{
	{BucketKeys, 1, false},
	{BucketWebhooks, 5, false},
	{BucketSandbox, 1, false},
	{BucketSessions, 1, true},
	{BucketLines, 1, false},
	{BucketNodes, 1, false},
}

// Errors of the buckets' operations, to match with errors.Is.
var (
	ErrNotFound = errors.New("fleet: no such key")
	// ErrExists is Create's answer when the key has a value already.
	ErrExists = errors.New("fleet: the key exists already")
	// ErrConflict is Update's (and a guarded Delete's) answer when the
	// key's latest revision is not the one given: someone wrote it since.
	ErrConflict = errors.New("fleet: the key changed since the revision given")
)

// provision creates or updates every bucket and the events stream, as every
// node does at start (concurrently: CreateOrUpdate makes that harmless).
// The assets are provisioned in parallel: a replicated one answers only
// once its own group has a leader, which can take longer than one attempt.
func (n *Node) provision(ctx context.Context) error {
	o := n.opts
	kvs := make([]jetstream.KeyValue, len(bucketSpecs))
	errs := make([]error, len(bucketSpecs)+1)
	var wg sync.WaitGroup
	for i, b := range bucketSpecs {
		cfg := jetstream.KeyValueConfig{
			Bucket:       o.Prefix + "_" + b.name,
			History:      b.history,
			Storage:      jetstream.FileStorage,
			Replicas:     o.Replicas,
			MaxValueSize: 256 << 10,
			MaxBytes:     BucketMaxBytes,
		}
		if b.marker {
			cfg.LimitMarkerTTL = time.Minute
		}
		wg.Go(func() {
			err := retry(ctx, o.AttemptTimeout, func(ctx context.Context) (err error) {
				kvs[i], err = n.js.CreateOrUpdateKeyValue(ctx, cfg)
				return err
			})
			if err != nil {
				errs[i] = n.provisionError("bucket "+cfg.Bucket, err)
			}
		})
	}
	scfg := jetstream.StreamConfig{
		Name:       o.Prefix + "_events",
		Subjects:   []string{o.Prefix + ".evt.>"},
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     o.EventsMaxAge,
		MaxBytes:   o.EventsMaxBytes,
		Discard:    jetstream.DiscardOld,
		Storage:    jetstream.FileStorage,
		Replicas:   o.Replicas,
		Duplicates: min(o.EventsDuplicates, o.EventsMaxAge),
		MaxMsgSize: MaxEventSize,
		// Not direct: Resync must read the last event from the stream's
		// leader, not from a replica that may lag behind the last ack.
		AllowDirect: false,
	}
	wg.Go(func() {
		err := retry(ctx, o.AttemptTimeout, func(ctx context.Context) (err error) {
			n.events, err = n.js.CreateOrUpdateStream(ctx, scfg)
			return err
		})
		if err != nil {
			errs[len(bucketSpecs)] = n.provisionError("stream "+scfg.Name, err)
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, b := range bucketSpecs {
		n.buckets[b.name] = kvs[i]
	}
	return nil
}

// provisionError explains a provisioning failure, with what the embedded
// server knows of its peers when it is clustered.
func (n *Node) provisionError(what string, err error) error {
	msg := fmt.Sprintf("fleet: creating %s (%d replicas): %v", what, n.opts.Replicas, err)
	if n.srv != nil && n.opts.Cluster != "" {
		if jsz, jerr := n.srv.Jsz(nil); jerr == nil && jsz.Meta != nil {
			msg += fmt.Sprintf("; JetStream knows %d peers (leader %q)", jsz.Meta.Size, jsz.Meta.Leader)
		}
		msg += fmt.Sprintf(". A clustered fleet needs %d JetStream peers up (a fleet of two cannot keep a majority: add a third node, or run one host without cluster)", n.opts.Replicas)
	}
	return errors.New(msg)
}

// Entry is one value of a bucket.
type Entry[T any] struct {
	Key      string
	Value    T // zero when Deleted
	Revision uint64
	Created  time.Time // as the writing server's clock saw it
	// Deleted is true for a deletion or a purge (in Watch); Get returns
	// ErrNotFound instead.
	Deleted bool
}

// Bucket is a typed view of one of the control plane's buckets, its values
// JSON.
type Bucket[T any] struct {
	kv  jetstream.KeyValue
	n   *Node
	log func(msg string, args ...any)
}

// Open returns the bucket called name (one of the Bucket… constants) with
// values of type T.
func Open[T any](n *Node, name string) (*Bucket[T], error) {
	kv, ok := n.buckets[name]
	if !ok {
		return nil, fmt.Errorf("fleet: no bucket %q", name)
	}
	return &Bucket[T]{kv: kv, n: n, log: n.log.Warn}, nil
}

// Name is the bucket's JetStream name.
func (b *Bucket[T]) Name() string { return b.kv.Bucket() }

// ValidKey reports whether k can be a key: letters, digits and "-/_=.",
// with no leading, trailing or doubled dot. Blueline's IDs are valid keys;
// handles ("+15551234567") are not.
func ValidKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '/', c == '_', c == '=':
		case c == '.':
			if k[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (b *Bucket[T]) entry(e jetstream.KeyValueEntry) (Entry[T], error) {
	out := Entry[T]{Key: e.Key(), Revision: e.Revision(), Created: e.Created()}
	if e.Operation() != jetstream.KeyValuePut {
		out.Deleted = true
		return out, nil
	}
	if err := json.Unmarshal(e.Value(), &out.Value); err != nil {
		return out, fmt.Errorf("fleet: %s %q revision %d: %w", b.Name(), e.Key(), e.Revision(), err)
	}
	return out, nil
}

// Get reads key's latest value: ErrNotFound when it has none (or was
// deleted). Any replica answers, even one cut off from the others, so the
// value can be stale: for compare-and-set, use the revision a write
// returned.
func (b *Bucket[T]) Get(ctx context.Context, key string) (Entry[T], error) {
	e, err := b.kv.Get(ctx, key)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return Entry[T]{}, fmt.Errorf("%w: %s %q", ErrNotFound, b.Name(), key)
		}
		return Entry[T]{}, err
	}
	return b.entry(e)
}

// Put writes v blindly, whatever the key held: for keys with one writer
// only. It returns the new revision.
func (b *Bucket[T]) Put(ctx context.Context, key string, v T) (uint64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	return b.kv.Put(ctx, key, data)
}

// Create writes v only if key has no value (or a deleted one), else
// ErrExists. ttl > 0 makes the key expire (the sessions bucket only);
// a later Put or Update clears it.
func (b *Bucket[T]) Create(ctx context.Context, key string, v T, ttl time.Duration) (uint64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	var opts []jetstream.KVCreateOpt
	if ttl > 0 {
		opts = append(opts, jetstream.KeyTTL(ttl))
	}
	rev, err := b.kv.Create(ctx, key, data, opts...)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: %s %q", ErrExists, b.Name(), key)
	}
	return rev, err
}

// Update writes v only if key's latest revision is rev (compare-and-set),
// else ErrConflict. It returns the new revision.
func (b *Bucket[T]) Update(ctx context.Context, key string, v T, rev uint64) (uint64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	next, err := b.kv.Update(ctx, key, data, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: %s %q is no longer at revision %d", ErrConflict, b.Name(), key, rev)
	}
	return next, err
}

// Delete deletes key. With rev > 0, only if that is its latest revision
// (else ErrConflict).
func (b *Bucket[T]) Delete(ctx context.Context, key string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev > 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	err := b.kv.Delete(ctx, key, opts...)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %s %q is no longer at revision %d", ErrConflict, b.Name(), key, rev)
	}
	return err
}

// Keys lists the keys that have a value.
func (b *Bucket[T]) Keys(ctx context.Context) ([]string, error) {
	keys, err := b.kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	return keys, err
}

// Watcher follows a bucket for Watch.
type Watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Stop stops the watcher and waits for its last call of the handler.
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

// Watch calls handle with the latest value of every key, returns once they
// have all been handled (so a cache filled by handle is complete), then
// goes on calling handle with every change, deletions as Deleted entries,
// from one goroutine, until ctx ends, Stop or the node closes. When NATS
// ends the watch (a lost connection), it is rebuilt with back-off from the
// last revision seen. A value that does not decode is logged and skipped.
// ctx is the watcher's lifetime, not a deadline for the first load.
func (b *Bucket[T]) Watch(ctx context.Context, handle func(Entry[T])) (*Watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{cancel: cancel, done: make(chan struct{})}
	kw, err := b.kv.WatchAll(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	var last uint64
	deliver := func(e jetstream.KeyValueEntry) {
		last = max(last, e.Revision())
		v, err := b.entry(e)
		if err != nil {
			b.log("fleet: skipping a value", "err", err)
			return
		}
		handle(v)
	}
	// The initial values, then a nil entry.
	for loaded := false; !loaded; {
		select {
		case e, ok := <-kw.Updates():
			if !ok {
				cancel()
				return nil, fmt.Errorf("fleet: the watch of %s ended before its first values", b.Name())
			}
			if e == nil {
				loaded = true
				continue
			}
			deliver(e)
		case <-ctx.Done():
			kw.Stop()
			cancel()
			return nil, ctx.Err()
		}
	}
	var once sync.Once
	stop := func() { once.Do(w.Stop) }
	if !b.n.onClose(stop) {
		kw.Stop()
		cancel()
		close(w.done)
		return nil, errors.New("fleet: the node is closed")
	}
	go func() {
		defer close(w.done)
		wait := 100 * time.Millisecond
		for {
			for e := range kw.Updates() {
				if e != nil {
					deliver(e)
					wait = 100 * time.Millisecond
				}
			}
			kw.Stop()
			// Updates closed: ctx ended, or NATS ended the watch.
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				wait = min(2*wait, 30*time.Second)
				var err error
				kw, err = b.kv.WatchAll(ctx, jetstream.ResumeFromRevision(last+1))
				if err == nil {
					break
				}
				b.log("fleet: rebuilding a watch", "bucket", b.Name(), "err", err)
			}
		}
	}()
	return w, nil
}
