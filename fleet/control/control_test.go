package control_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/fleet/control"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// Hosts in these tests are databases sharing one real node (a fleet of
// one, its embedded NATS on loopback): each host's Control watches and
// writes the same buckets, as every node of a fleet does.

var ctx = context.Background()

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startNode(t *testing.T) *fleet.Node {
	t.Helper()
	n, err := fleet.Start(ctx, fleet.Options{Node: "mac-a", Secret: "a-test-secret-of-the-fleet-0123", Listen: "127.0.0.1:0",
		StoreDir: t.TempDir(), Logger: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func openDB(t *testing.T) *storage.DB {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim"}}); err != nil {
		t.Fatal(err)
	}
	return db
}

func start(t *testing.T, n *fleet.Node, db *storage.DB) *control.Control {
	t.Helper()
	c, err := control.Start(ctx, n, db, control.Options{Logger: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(ctx) })
	return c
}

func newKey(t *testing.T, db *storage.DB, secret string) storage.Key {
	t.Helper()
	sum := sha256.Sum256([]byte(secret))
	k := storage.Key{ID: storage.NewID("key_"), Label: secret, Scopes: []string{"messages:read"}, Hash: sum[:], CreatedAt: 1}
	if err := db.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	return k
}

func record(t *testing.T, db *storage.DB, kind storage.ControlKind, id string) storage.ControlChange {
	t.Helper()
	c, err := db.ControlRecord(ctx, kind, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func bucketKey(t *testing.T, n *fleet.Node, id string) (fleet.Entry[storage.Key], error) {
	t.Helper()
	b, err := fleet.Open[storage.Key](n, fleet.BucketKeys)
	if err != nil {
		t.Fatal(err)
	}
	return b.Get(ctx, id)
}

// A record made on one host reaches the other; a change there comes back.
func TestReplicates(t *testing.T) {
	n := startNode(t)
	a, b := openDB(t), openDB(t)
	start(t, n, a)
	start(t, n, b)

	k := newKey(t, a, "one")
	testkit.Eventually(t, propagation, func() bool {
		got, err := b.KeyByHash(ctx, k.Hash)
		return err == nil && got.ID == k.ID
	})
	// What the bucket holds is the hash, never a secret.
	e, err := bucketKey(t, n, k.ID)
	if err != nil || string(e.Value.Hash) != string(k.Hash) {
		t.Fatalf("the bucket's key: %+v %v", e.Value, err)
	}
	if err := b.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, propagation, func() bool {
		_, err := a.KeyByHash(ctx, k.Hash)
		return err != nil
	})

	lines := a.Lines()
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{lines[0].ID}, URL: "https://example.com/a", Events: []string{"message.received"},
		Secret: "whsec_x", IsActive: true, CreatedAt: 1}
	if err := a.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, propagation, func() bool {
		c := record(t, b, storage.ControlWebhook, w.ID)
		return !c.Deleted && c.Webhook.Secret == "whsec_x"
	})
	if err := b.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, propagation, func() bool { return record(t, a, storage.ControlWebhook, w.ID).Deleted })

	if _, _, err := b.StartSandbox(ctx, "owner with spaces@example.com"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, propagation, func() bool {
		_, ok, _ := a.Sandbox(ctx, "owner with spaces@example.com")
		return ok
	})
}

// A revocation is never undone by a write made at the same time
// elsewhere, and the last use is the latest of both.
func TestKeysMerge(t *testing.T) {
	n := startNode(t)
	a := openDB(t)
	start(t, n, a)
	k := newKey(t, a, "merge")
	var e fleet.Entry[storage.Key]
	testkit.Eventually(t, propagation, func() bool {
		var err error
		e, err = bucketKey(t, n, k.ID)
		return err == nil
	})
	// Another node saw the key used; this one revokes it.
	b, err := fleet.Open[storage.Key](n, fleet.BucketKeys)
	if err != nil {
		t.Fatal(err)
	}
	used := e.Value
	used.LastUsedAt = 777_000
	if _, err := b.Update(ctx, k.ID, used, e.Revision); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Second, func() bool {
		e, err := bucketKey(t, n, k.ID)
		local := record(t, a, storage.ControlKey, k.ID).Key
		return err == nil && e.Value.RevokedAt != 0 && e.Value.LastUsedAt == 777_000 &&
			local.RevokedAt == e.Value.RevokedAt && local.LastUsedAt == 777_000
	})
}

// A host that changed a record the bucket changed too (here: while it
// was stopped) keeps the bucket's value.
func TestReconcileBucketWins(t *testing.T) {
	n := startNode(t)
	a := openDB(t)
	c := start(t, n, a)
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{a.Lines()[0].ID}, URL: "https://example.com/a", Events: []string{"message.received"},
		Secret: "one", IsActive: true, CreatedAt: 1}
	if err := a.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	hooks, err := fleet.Open[storage.Webhook](n, fleet.BucketWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	var e fleet.Entry[storage.Webhook]
	testkit.Eventually(t, propagation, func() bool {
		e, err = hooks.Get(ctx, w.ID)
		return err == nil
	})
	// Stopped, the host misses the bucket's change, and makes its own.
	c.Stop(ctx)
	elsewhere := e.Value
	elsewhere.URL = "https://example.com/elsewhere"
	if _, err := hooks.Update(ctx, w.ID, elsewhere, e.Revision); err != nil {
		t.Fatal(err)
	}
	here := w
	here.URL = "https://example.com/here"
	if _, err := a.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlWebhook, ID: w.ID, Webhook: &here}, nil); err != nil {
		t.Fatal(err)
	}
	// Started again, it reconciles: the bucket wins.
	start(t, n, a)
	if got := record(t, a, storage.ControlWebhook, w.ID).Webhook.URL; got != elsewhere.URL {
		t.Fatalf("after reconciling, the webhook's URL is %s, want the bucket's %s", got, elsewhere.URL)
	}
}

// A fleet with empty buckets is seeded by the first host; a host with
// keys of its own that never joined is refused; an empty one joins; a
// host that joined reconciles when it starts again, pushing what the
// buckets never had and dropping what they deleted.
func TestJoin(t *testing.T) {
	n := startNode(t)
	first := openDB(t)
	k := newKey(t, first, "first")
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{first.Lines()[0].ID}, URL: "https://example.com/a", Events: []string{"message.received"},
		Secret: "s", IsActive: true, CreatedAt: 1}
	if err := first.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	c := start(t, n, first)
	if _, err := bucketKey(t, n, k.ID); err != nil {
		t.Fatalf("the first host's key was not seeded: %v", err)
	}

	other := openDB(t)
	newKey(t, other, "mine")
	_, err := control.Start(ctx, n, other, control.Options{Logger: testLog()})
	if err == nil {
		t.Fatal("a host with a key of its own joined")
	}
	for _, want := range []string{"1 API key", "never joined", "2 records"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	empty := openDB(t)
	start(t, n, empty)
	if got, err := empty.KeyByHash(ctx, k.Hash); err != nil || got.ID != k.ID {
		t.Fatalf("the host that joined lacks the fleet's key: %v", err)
	}

	// The first host stops; meanwhile the webhook is deleted elsewhere, and
	// a key is made here that the fleet never heard of.
	c.Stop(ctx)
	hooks, err := fleet.Open[json.RawMessage](n, fleet.BucketWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	if err := hooks.Delete(ctx, w.ID, 0); err != nil {
		t.Fatal(err)
	}
	late := newKey(t, first, "late")
	start(t, n, first)
	if !record(t, first, storage.ControlWebhook, w.ID).Deleted {
		t.Error("the webhook deleted while the host was away is still here")
	}
	if _, err := bucketKey(t, n, late.ID); err != nil {
		t.Errorf("the key made while away was not shared: %v", err)
	}
	testkit.Eventually(t, propagation, func() bool {
		_, err := empty.KeyByHash(ctx, late.Hash)
		return err == nil
	})
}

// Hosts that change the same records at the same time end up with the
// same records as the bucket: revoked keys revoked everywhere, last uses
// the latest of all.
func TestConcurrentChangesConverge(t *testing.T) {
	n := startNode(t)
	a, b := openDB(t), openDB(t)
	start(t, n, a)
	start(t, n, b)
	var keys []storage.Key
	for i := range 10 {
		keys = append(keys, newKey(t, a, "k"+string(rune('a'+i))))
	}
	testkit.Eventually(t, 2*time.Second, func() bool {
		for _, k := range keys {
			if _, err := b.KeyByHash(ctx, k.Hash); err != nil {
				return false
			}
		}
		return true
	})
	done := make(chan struct{})
	for h, db := range []*storage.DB{a, b} {
		go func() {
			defer func() { done <- struct{}{} }()
			for round := range 20 {
				for i, k := range keys {
					db.TouchKey(ctx, k.ID, int64(1000*(round+1)+h))
					if i%3 == h && round == 10 {
						db.RevokeKey(ctx, k.ID)
					}
				}
			}
		}()
	}
	<-done
	<-done
	testkit.Eventually(t, 5*time.Second, func() bool {
		for i, k := range keys {
			ka, kb := record(t, a, storage.ControlKey, k.ID), record(t, b, storage.ControlKey, k.ID)
			e, err := bucketKey(t, n, k.ID)
			if err != nil || !ka.Equal(kb) {
				return false
			}
			kv := storage.ControlChange{Kind: storage.ControlKey, ID: k.ID, Key: &e.Value}
			if !kv.Equal(ka) || (i%3 < 2) != (ka.Key.RevokedAt != 0) {
				return false
			}
		}
		return true
	})
}

// propagation bounds a control record's way to every node in these tests:
// far above the second the fleet takes (BenchmarkFleet measures it), so
// that a loaded machine does not fail them.
const propagation = 10 * time.Second
