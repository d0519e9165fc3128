// Package control shares a fleet's control records (API keys, webhooks,
// sandbox owners, console sessions) between each host's bbolt and the
// fleet's JetStream KV buckets (issue 27).
//
// Each host's API reads its own database, as it always did; the buckets
// are the fleet's shared copy. Control replicates both ways, one record at
// a time, from one goroutine:
//
//   - A local change (storage's OnControlChange feed) is written to its
//     bucket with compare-and-set: Create for a record the bucket does not
//     have, Update at the revision this host last synced. When someone
//     else wrote it since (a conflict), the bucket's value wins: it is
//     applied here, and the conflict logged.
//   - Every bucket is watched: a value that differs from the host's
//     record is applied (storage.ApplyControl, which does not feed it
//     back), unless a local change of that record is on its way, which
//     then meets the newer value as a conflict.
//   - Keys merge instead of losing: a revocation, wherever it was made,
//     is never undone by a concurrent write, and the last use is the
//     latest of both.
//
// What is stored is what storage has: hashes of API keys and of session
// tokens, never a key or a token. Webhook secrets are in clear, as
// signing needs them.
//
// Joining (Start): a fleet whose buckets are empty is seeded with this
// host's records; a host that shared its records with this fleet before
// (a marker in its database) reconciles, the buckets winning; a host that
// never did and has API keys, webhooks or sandbox owners that the fleet
// does not have is refused with an explanation, never merged silently.
package control

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/storage"
)

// bucketOf is each kind's bucket.
var bucketOf = map[storage.ControlKind]string{
	storage.ControlKey:     fleet.BucketKeys,
	storage.ControlWebhook: fleet.BucketWebhooks,
	storage.ControlSandbox: fleet.BucketSandbox,
	storage.ControlSession: fleet.BucketSessions,
}

// Options tune a Control.
type Options struct {
	// Logger; default slog.Default().
	Logger *slog.Logger
	// RetryWait is the wait before a write that failed (NATS unreachable)
	// is tried again. Default 1s.
	RetryWait time.Duration
	// Timeout bounds each write and read of a bucket. Default 5s.
	Timeout time.Duration
}

// Control replicates a host's control records with its fleet. Start it,
// Stop it before the node closes.
type Control struct {
	db      *storage.DB
	node    *fleet.Node
	log     *slog.Logger
	o       Options
	buckets map[storage.ControlKind]*fleet.Bucket[json.RawMessage]

	mu       sync.Mutex
	queue    []event
	wake     chan struct{}
	watchers []*fleet.Watcher

	// The loop's own: what this host last synced of each record, and the
	// latest value each bucket was seen with.
	base   map[recKey]synced
	latest map[recKey]remote

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

type recKey struct {
	kind storage.ControlKind
	id   string
}

// synced is a record as the host and the bucket last agreed on it: the
// bucket's revision and the record's digest (of nothing when absent).
type synced struct {
	rev uint64
	sum [32]byte
}

// remote is a bucket's value of a record at a revision (0: none seen).
type remote struct {
	rev uint64
	c   storage.ControlChange
}

// event is a record to sync: a local change, or a bucket's new value.
type event struct {
	key    recKey
	remote *remote
}

// digest identifies a record's content; every absent record has the same.
func digest(c storage.ControlChange) [32]byte {
	if c.Deleted {
		return [32]byte{}
	}
	data, _ := json.Marshal(c.Record())
	return sha256.Sum256(data)
}

// kvKey is a record's key in its bucket: its ID, or for a sandbox the
// owner in base64url (an owner is free text; bucket keys are not).
func kvKey(k recKey) string {
	if k.kind == storage.ControlSandbox {
		return base64.RawURLEncoding.EncodeToString([]byte(k.id))
	}
	return k.id
}

func idOf(kind storage.ControlKind, key string) (string, error) {
	if kind != storage.ControlSandbox {
		return key, nil
	}
	id, err := base64.RawURLEncoding.DecodeString(key)
	return string(id), err
}

// Start opens the buckets, watches them, joins the fleet (seeds it,
// reconciles with it, or refuses: see the package documentation) and
// replicates until Stop. ctx bounds the start only.
func Start(ctx context.Context, node *fleet.Node, db *storage.DB, o Options) (_ *Control, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryWait <= 0 {
		o.RetryWait = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	c := &Control{
		db: db, node: node, log: o.Logger.With("component", "fleet control"), o: o,
		buckets: map[storage.ControlKind]*fleet.Bucket[json.RawMessage]{},
		wake:    make(chan struct{}, 1), base: map[recKey]synced{}, latest: map[recKey]remote{},
		done: make(chan struct{}),
	}
	for kind, name := range bucketOf {
		if c.buckets[kind], err = fleet.Open[json.RawMessage](node, name); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	defer func() {
		if err != nil {
			db.OnControlChange(nil)
			c.stopWatchers()
			cancel()
		}
	}()
	// Local changes queue up from now on; the loop starts after the join.
	db.OnControlChange(func(ch storage.ControlChange) { c.enqueue(event{key: recKey{ch.Kind, ch.ID}}) })
	for _, kind := range storage.ControlKinds {
		w, err := c.buckets[kind].Watch(runCtx, func(e fleet.Entry[json.RawMessage]) { c.remoteEntry(kind, e) })
		if err != nil {
			return nil, fmt.Errorf("fleet: watching %s: %w", c.buckets[kind].Name(), err)
		}
		c.mu.Lock()
		c.watchers = append(c.watchers, w)
		c.mu.Unlock()
	}
	// Every bucket's current values are in the queue now.
	if err := c.join(ctx); err != nil {
		return nil, err
	}
	go c.run(runCtx)
	return c, nil
}

// remoteEntry queues a bucket's new value.
func (c *Control) remoteEntry(kind storage.ControlKind, e fleet.Entry[json.RawMessage]) {
	r := &remote{rev: e.Revision}
	if e.Deleted {
		id, err := idOf(kind, e.Key)
		if err != nil {
			c.log.Warn("skipping a deletion with a malformed key", "bucket", bucketOf[kind], "key", e.Key)
			return
		}
		r.c = storage.ControlChange{Kind: kind, ID: id, Deleted: true}
	} else {
		ch, err := storage.DecodeControl(kind, e.Value)
		if err != nil {
			c.log.Warn("skipping a value", "bucket", bucketOf[kind], "key", e.Key, "revision", e.Revision, "err", err)
			return
		}
		r.c = ch
	}
	c.enqueue(event{key: recKey{kind, r.c.ID}, remote: r})
}

func (c *Control) enqueue(e event) {
	c.mu.Lock()
	c.queue = append(c.queue, e)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Control) take() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}

// note records a bucket's value as the latest seen, unless newer is known.
func (c *Control) note(k recKey, r remote) {
	if r.rev > c.latest[k].rev {
		c.latest[k] = r
	}
}

func (c *Control) latestOf(k recKey) remote {
	if r, ok := c.latest[k]; ok {
		return r
	}
	return remote{c: storage.ControlChange{Kind: k.kind, ID: k.id, Deleted: true}}
}

// run syncs each queued record until ctx ends.
func (c *Control) run(ctx context.Context) {
	defer close(c.done)
	for {
		c.drain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
	}
}

// drain syncs every queued record, each once per round.
func (c *Control) drain(ctx context.Context) {
	for {
		q := c.take()
		if len(q) == 0 {
			return
		}
		var keys []recKey
		for _, e := range q {
			if e.remote != nil {
				c.note(e.key, *e.remote)
			}
			if !slices.Contains(keys, e.key) {
				keys = append(keys, e.key)
			}
		}
		for _, k := range keys {
			if ctx.Err() != nil {
				return
			}
			c.syncLater(ctx, k)
		}
	}
}

// errAgain: the bucket moved under a write; sync again soon.
var errAgain = errors.New("the bucket changed under the write")

// syncLater syncs k, and on failure queues it again after a wait.
func (c *Control) syncLater(ctx context.Context, k recKey) {
	err := c.sync(ctx, k)
	if err == nil || ctx.Err() != nil {
		return
	}
	wait := 50 * time.Millisecond
	if !errors.Is(err, errAgain) {
		wait = c.o.RetryWait
		c.log.Warn("syncing a record with the fleet; trying again", "kind", k.kind, "id", k.id, "in", wait, "err", err)
	}
	time.AfterFunc(wait, func() {
		if ctx.Err() == nil {
			c.enqueue(event{key: k})
		}
	})
}

// sync brings a record and its bucket's value together: a local change is
// written (compare-and-set), a bucket's change applied, and when both
// changed the bucket's value wins (keys merge).
func (c *Control) sync(ctx context.Context, k recKey) error {
	local, err := c.db.ControlRecord(ctx, k.kind, k.id)
	if err != nil {
		return err
	}
	base, lat := c.base[k], c.latestOf(k)
	localSum := digest(local)
	localChanged, remoteChanged := localSum != base.sum, lat.rev > base.rev
	if !localChanged && !remoteChanged {
		return nil
	}
	target := local
	if remoteChanged {
		target = lat.c
	}
	if k.kind == storage.ControlKey {
		target = mergeKey(target, local, lat.c)
	}
	if k.kind == storage.ControlSession && !target.Deleted && time.UnixMilli(target.Session.ExpiresAt).Before(time.Now()) {
		// An expired session is nobody's business: each host purges its own.
		c.base[k] = synced{rev: lat.rev, sum: localSum}
		return nil
	}
	sum, rev := digest(target), lat.rev
	if sum != digest(lat.c) {
		if rev, err = c.write(ctx, k, target, lat); err != nil {
			return err
		}
		c.note(k, remote{rev: rev, c: target})
	}
	if sum != localSum {
		_, err := c.db.ApplyControl(ctx, target, func(cur storage.ControlChange) bool { return digest(cur) == localSum })
		if err != nil {
			return err
		}
		switch {
		case localChanged && k.kind == storage.ControlKey:
			c.log.Info("a change of a key made here met one made elsewhere: merged (a revocation stays, the latest use is kept)", "id", k.id)
		case localChanged:
			c.log.Info("a change made here met a newer one made elsewhere: the fleet's value is kept", "kind", k.kind, "id", k.id)
		}
	}
	c.base[k] = synced{rev: rev, sum: sum}
	return nil
}

// write puts target in its bucket, at lat's revision: Create when the
// bucket has no value, Update (or Delete) at that revision otherwise. On
// a conflict it reads the bucket again (errAgain).
func (c *Control) write(ctx context.Context, k recKey, target storage.ControlChange, lat remote) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	b, key := c.buckets[k.kind], kvKey(k)
	if !fleet.ValidKey(key) {
		return 0, fmt.Errorf("%s %q cannot be a bucket key", k.kind, k.id)
	}
	var rev uint64
	var err error
	switch {
	case target.Deleted && lat.c.Deleted:
		return lat.rev, nil
	case target.Deleted:
		err = b.Delete(ctx, key, lat.rev)
		rev = lat.rev // the marker's revision comes with the watch
	default:
		data, merr := json.Marshal(target.Record())
		if merr != nil {
			return 0, merr
		}
		if lat.c.Deleted {
			var ttl time.Duration
			if k.kind == storage.ControlSession {
				ttl = max(time.Until(time.UnixMilli(target.Session.ExpiresAt)), time.Second)
			}
			rev, err = b.Create(ctx, key, data, ttl)
		} else {
			rev, err = b.Update(ctx, key, data, lat.rev)
		}
	}
	if errors.Is(err, fleet.ErrConflict) || errors.Is(err, fleet.ErrExists) {
		// A Get may lag; the watch brings the newer value in any case.
		if e, gerr := b.Get(ctx, key); gerr == nil && e.Revision > lat.rev {
			if ch, derr := storage.DecodeControl(k.kind, e.Value); derr == nil {
				c.note(k, remote{rev: e.Revision, c: ch})
			}
		}
		return 0, fmt.Errorf("%w: %v", errAgain, err)
	}
	return rev, err
}

// mergeKey is target, revoked if either side revoked the key, and last
// used when either side last saw it used.
func mergeKey(target, local, kv storage.ControlChange) storage.ControlChange {
	if target.Deleted {
		return target
	}
	k := *target.Key
	for _, o := range []storage.ControlChange{local, kv} {
		if o.Deleted || o.Key == nil {
			continue
		}
		if k.RevokedAt == 0 && o.Key.RevokedAt != 0 {
			k.RevokedAt = o.Key.RevokedAt
		}
		k.LastUsedAt = max(k.LastUsedAt, o.Key.LastUsedAt)
	}
	target.Key = &k
	return target
}

// Stop stops replicating: local changes still queued are written first,
// until ctx ends. Call it before the node closes. It may be called more
// than once.
func (c *Control) Stop(ctx context.Context) {
	c.stopOnce.Do(func() { c.stop(ctx) })
}

func (c *Control) stop(ctx context.Context) {
	c.db.OnControlChange(nil)
	c.cancel()
	<-c.done
	c.stopWatchers()
	// What was queued and not yet written: local changes made while
	// stopping (the jobs' last writes).
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, e := range c.take() {
			if e.remote != nil {
				c.note(e.key, *e.remote)
			}
			if ctx.Err() != nil {
				return
			}
			if err := c.sync(ctx, e.key); err != nil && !errors.Is(err, errAgain) {
				c.log.Warn("a change made here did not reach the fleet before the stop", "kind", e.key.kind, "id", e.key.id, "err", err)
			}
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (c *Control) stopWatchers() {
	c.mu.Lock()
	ws := c.watchers
	c.watchers = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// identity names the fleet's shared state: its keys bucket, as created.
// A host records it once its records are shared (storage.SetFleetJoined).
func (c *Control) identity(ctx context.Context) (string, error) {
	name := c.buckets[storage.ControlKey].Name()
	s, err := c.node.JetStream().Stream(ctx, "KV_"+name)
	if err != nil {
		return "", fmt.Errorf("fleet: the stream of bucket %s: %w", name, err)
	}
	return name + "@" + s.CachedInfo().Created.UTC().Format(time.RFC3339Nano), nil
}

// join decides, from the buckets' current values (queued by the watches)
// and this host's records, whether to seed, reconcile or refuse, then
// syncs every record once.
func (c *Control) join(ctx context.Context) error {
	q := c.take()
	for _, e := range q {
		if e.remote != nil {
			c.note(e.key, *e.remote)
		}
	}
	id, err := c.identity(ctx)
	if err != nil {
		return err
	}
	joined, err := c.db.FleetJoined(ctx)
	if err != nil {
		return err
	}
	locals, err := c.db.ControlRecords(ctx)
	if err != nil {
		return err
	}
	live := 0
	for _, r := range c.latest {
		if !r.c.Deleted {
			live++
		}
	}
	keys := map[recKey]bool{}
	for k := range c.latest {
		keys[k] = true
	}
	switch {
	case live == 0:
		if len(locals) > 0 {
			c.log.Info("seeding the fleet's buckets with this host's records", "records", len(locals))
		}
	case joined == id:
		c.log.Info("reconciling with the fleet (its buckets win)", "records", len(locals), "fleet_records", live)
	default:
		var foreign []storage.ControlChange
		var sessions []string
		for _, l := range locals {
			if r, ok := c.latest[recKey{l.Kind, l.ID}]; ok && !r.c.Deleted {
				continue
			}
			switch {
			case l.Kind == storage.ControlSession:
				sessions = append(sessions, l.ID)
			case l.Kind == storage.ControlKey && l.Key.RevokedAt != 0:
				// Revoked: grants nothing, and shared it keeps its ID taken.
			default:
				foreign = append(foreign, l)
			}
		}
		if len(foreign) > 0 {
			return c.refusal(ctx, foreign, live)
		}
		if len(sessions) > 0 {
			// This host's console sign-ins are not the fleet's: they end.
			if _, err := c.db.RevokeSessions(ctx, sessions...); err != nil {
				return err
			}
			c.log.Info("joining the fleet ended this host's console sessions", "sessions", len(sessions))
		}
		c.log.Info("joining the fleet", "fleet_records", live)
		if locals, err = c.db.ControlRecords(ctx); err != nil {
			return err
		}
	}
	for _, l := range locals {
		keys[recKey{l.Kind, l.ID}] = true
	}
	// Local changes that came in meanwhile are synced with the rest.
	for _, e := range c.take() {
		keys[e.key] = true
	}
	for k := range keys {
		for attempt := 0; ; attempt++ {
			err := c.sync(ctx, k)
			if err == nil {
				break
			}
			if !errors.Is(err, errAgain) || attempt == 5 {
				return fmt.Errorf("fleet: sharing %s %s with the fleet: %w", k.kind, k.id, err)
			}
		}
	}
	return c.db.SetFleetJoined(ctx, id)
}

// refusal explains why this host cannot join: it has records the fleet
// does not have, and it never shared them with this fleet.
func (c *Control) refusal(ctx context.Context, foreign []storage.ControlChange, live int) error {
	count := map[storage.ControlKind]int{}
	for _, f := range foreign {
		count[f.Kind]++
	}
	var have []string
	for _, kind := range storage.ControlKinds {
		if n := count[kind]; n > 0 {
			name := map[storage.ControlKind]string{
				storage.ControlKey: "API key", storage.ControlWebhook: "webhook", storage.ControlSandbox: "sandbox owner",
			}[kind]
			if n > 1 {
				name += "s"
			}
			have = append(have, fmt.Sprintf("%d %s", n, name))
		}
	}
	nodes := "its other nodes"
	if dir, err := c.node.Directory(fleet.DirectoryOptions{}); err == nil {
		if entries, err := dir.Lines(ctx); err == nil {
			var names []string
			for _, e := range entries {
				if e.Node != c.node.Name() && !slices.Contains(names, e.Node) {
					names = append(names, e.Node)
				}
			}
			if len(names) > 0 {
				nodes = "nodes " + strings.Join(names, ", ")
			}
		}
	}
	records := "records"
	if live == 1 {
		records = "record"
	}
	return fmt.Errorf("fleet: node %s cannot join: it has data of its own (%s) that the fleet does not have, and it never joined this fleet, "+
		"which already holds %d %s (from %s). A host joins a fleet empty: two hosts' data are never merged silently. "+
		"To keep this host's data, make it the first node of a new fleet instead; to join this fleet, start this node with an empty "+
		"data folder ([storage] dir), or first revoke its API keys and delete its webhooks without [fleet]",
		c.node.Name(), strings.Join(have, ", "), live, records, nodes)
}
