package storage_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

const quiet = 20 * 60 * 1000 // ms

// openAgentDB is a database whose line has a takeover window, and the
// one-to-one chat a contact opened on it.
func openAgentDB(t *testing.T, dir string) (*storage.DB, storage.Line, storage.Chat) {
	t.Helper()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim", TakeoverQuiet: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.ChatByIdentifier(ctx, lines[0].ID, "+15551110001")
	if errors.Is(err, storage.ErrNotFound) {
		c = inbound(t, db, lines[0], "+15551110001", 10).Chat
	} else if err != nil {
		t.Fatal(err)
	}
	return db, lines[0], c
}

// ownerSends records a message the owner sent from another device at at.
func ownerSends(t *testing.T, db *storage.DB, line storage.Line, c storage.Chat, at int64) storage.Message {
	t.Helper()
	return ownerSendsLate(t, db, line, c, at, at)
}

// ownerSendsLate records a message the owner sent at sent, recorded at
// synced.
func ownerSendsLate(t *testing.T, db *storage.DB, line storage.Line, c storage.Chat, sent, synced int64) storage.Message {
	t.Helper()
	text := "I'll answer this one"
	res, err := db.RecordInbound(ctx, storage.Inbound{Chat: c, Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"),
		Sender: line.Handle, IsFromMe: true, Text: &text, SentAt: sent, SyncedAt: synced}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Message
}

// agentSend enqueues a message of agent key keyID to chat c at now.
func agentSend(db *storage.DB, line storage.Line, c storage.Chat, keyID string, now int64) error {
	text := "agent reply"
	_, _, err := db.Enqueue(ctx, storage.EnqueueRequest{
		Item:  storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, ChatID: c.ID, Text: &text, MaxAttempts: 1},
		Agent: &storage.AgentCheck{KeyID: keyID, ChatID: c.ID, Now: now},
	})
	return err
}

// An owner's message from another device takes the chat over for the
// line's quiet window, restarted by each new one; resuming ends it at once;
// each change is a chat.handoff event for the webhooks that asked.
func TestOwnerTakeover(t *testing.T) {
	db, line, c := openAgentDB(t, t.TempDir())
	hook := createWebhook(t, db, line, api.EventChatHandoff)
	if err := agentSend(db, line, c, "key_a", 100); err != nil {
		t.Fatalf("agent send before any takeover: %v", err)
	}
	t0 := time.Now().UnixMilli()
	ownerSends(t, db, line, c, t0)
	err := agentSend(db, line, c, "key_a", t0+quiet-1)
	if e, ok := errors.AsType[*storage.ErrHumanActive](err); !ok || e.Until != t0+quiet {
		t.Fatalf("agent send inside the window: %v; want ErrHumanActive until %d", err, t0+quiet)
	}
	// A new owner message restarts the window.
	ownerSends(t, db, line, c, t0+1000)
	if err := agentSend(db, line, c, "key_a", t0+quiet+1); err == nil {
		t.Fatal("agent send after the first window but inside the restarted one was accepted")
	}
	if err := agentSend(db, line, c, "key_a", t0+1000+quiet); err != nil {
		t.Fatalf("agent send after the window: %v", err)
	}
	d := due(t, db, hook)
	if len(d) != 2 || d[0].Handoff == nil || d[0].Handoff.State != storage.HandoffHumanActive || d[1].Handoff.Until != t0+1000+quiet {
		t.Fatalf("handoff deliveries %+v", d)
	}

	// Resumed before the window ends: agents may write at once.
	ownerSends(t, db, line, c, t0+2000)
	was, err := db.ResumeAgents(ctx, c.ID, t0+3000)
	if err != nil || !was {
		t.Fatalf("resume: %v, %v", was, err)
	}
	if err := agentSend(db, line, c, "key_a", t0+3001); err != nil {
		t.Fatalf("agent send after resume: %v", err)
	}
	if d := due(t, db, hook); len(d) != 4 || d[3].Handoff.State != storage.HandoffAgentResumed {
		t.Fatalf("after resume, deliveries %+v", d)
	}
	if was, err := db.ResumeAgents(ctx, c.ID, t0+4000); err != nil || was {
		t.Fatalf("resume again: %v, %v; want nothing to resume", was, err)
	}
}

// A line with no quiet window, and a message from the contact, take
// nothing over.
func TestTakeoverNeedsOwnerAndWindow(t *testing.T) {
	db, line, c := openAgentDB(t, t.TempDir())
	now := time.Now().UnixMilli()
	inbound(t, db, line, "+15551110001", now)
	if err := agentSend(db, line, c, "key_a", now+1); err != nil {
		t.Fatalf("after the contact wrote: %v", err)
	}
	// Recorded after its window had passed (caught up late): nothing.
	ownerSendsLate(t, db, line, c, now-quiet-1, now)
	if err := agentSend(db, line, c, "key_a", now+1); err != nil {
		t.Fatalf("after a late owner message: %v", err)
	}
	// An older message recorded after a newer one does not shorten the
	// newer one's window.
	ownerSends(t, db, line, c, now)
	ownerSendsLate(t, db, line, c, now-60_000, now+1)
	if err := agentSend(db, line, c, "key_a", now+quiet-1); err == nil {
		t.Fatal("an older owner message shortened the window")
	}
	off, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000002", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	oc := inbound(t, db, off[0], "+15551110002", 10).Chat
	ownerSends(t, db, off[0], oc, now)
	if err := agentSend(db, off[0], oc, "key_a", now+1); err != nil {
		t.Fatalf("owner wrote on a line without takeover_quiet: %v", err)
	}
}

// A lease holds the chat for its key: renewed by it, refused to another
// agent unless overridden, released by its holder; it survives a restart
// and ends on its own.
func TestChatLease(t *testing.T) {
	dir := t.TempDir()
	db, line, c := openAgentDB(t, dir)
	hook := createWebhook(t, db, line, api.EventChatLeased, api.EventChatReleased)
	lease := func(key string, expires int64) storage.Lease {
		return storage.Lease{ChatID: c.ID, LineID: line.ID, KeyID: key, KeyLabel: "label of " + key, ExpiresAt: expires}
	}
	l, err := db.AcquireLease(ctx, lease("key_a", 1000), false, 100)
	if err != nil || l.CreatedAt != 100 {
		t.Fatalf("acquire: %+v, %v", l, err)
	}
	if l, err = db.AcquireLease(ctx, lease("key_a", 2000), false, 500); err != nil || l.CreatedAt != 100 || l.ExpiresAt != 2000 {
		t.Fatalf("renew: %+v, %v", l, err)
	}
	_, err = db.AcquireLease(ctx, lease("key_b", 3000), false, 600)
	if e, ok := errors.AsType[*storage.ErrChatLeased](err); !ok || e.Lease.KeyLabel != "label of key_a" {
		t.Fatalf("another agent's lease: %v", err)
	}
	if err := agentSend(db, line, c, "key_b", 700); err == nil {
		t.Fatal("another agent key's send to a leased chat was accepted")
	}
	if err := agentSend(db, line, c, "key_a", 700); err != nil {
		t.Fatalf("the holder's send: %v", err)
	}
	if _, err := db.ReleaseLease(ctx, c.ID, "key_b", false, 800); err == nil {
		t.Fatal("another agent released the lease")
	}

	// The lease survives a restart.
	db.Close()
	db, _, _ = openAgentDB(t, dir)
	if l, err := db.LeaseOf(ctx, c.ID, 900); err != nil || l.KeyID != "key_a" {
		t.Fatalf("after a restart: %+v, %v", l, err)
	}
	if err := agentSend(db, line, c, "key_b", 900); err == nil {
		t.Fatal("after a restart, another agent key's send was accepted")
	}
	// Expired: another agent may send, and take the lease.
	if err := agentSend(db, line, c, "key_b", 2000); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := db.LeaseOf(ctx, c.ID, 2000); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired lease: %v", err)
	}
	// Overridden (a key that is not an agent's), then released by its holder.
	if _, err := db.AcquireLease(ctx, lease("key_b", 5000), false, 2100); err != nil {
		t.Fatalf("lease after expiry: %v", err)
	}
	if _, err := db.AcquireLease(ctx, lease("key_owner", 6000), true, 2200); err != nil {
		t.Fatalf("override: %v", err)
	}
	if _, err := db.ReleaseLease(ctx, c.ID, "key_owner", false, 2300); err != nil {
		t.Fatalf("release by holder: %v", err)
	}
	if _, err := db.ReleaseLease(ctx, c.ID, "key_owner", false, 2400); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("release again: %v", err)
	}
	// Releasing one that ran out says so, and tells the webhooks it expired.
	if _, err := db.AcquireLease(ctx, lease("key_a", 3000), false, 2500); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseLease(ctx, c.ID, "key_a", false, 3000); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("release after expiry: %v", err)
	}
	var got []string
	for _, d := range due(t, db, hook) {
		got = append(got, d.Event+":"+d.Lease.KeyID+":"+d.Lease.Released)
	}
	want := []string{"chat.leased:key_a:", "chat.leased:key_a:", "chat.released:key_a:expired", "chat.leased:key_b:",
		"chat.released:key_b:released", "chat.leased:key_owner:", "chat.released:key_owner:released", "chat.leased:key_a:", "chat.released:key_a:expired"}
	if len(got) != len(want) {
		t.Fatalf("events %q; want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %q; want %q", got, want)
		}
	}
}

// ExpireAgentHolds ends what ran out, with its events, and nothing else.
func TestExpireAgentHolds(t *testing.T) {
	db, line, c := openAgentDB(t, filepath.Join(t.TempDir(), "db"))
	hook := createWebhook(t, db, line, api.EventChatHandoff, api.EventChatReleased)
	t0 := time.Now().UnixMilli()
	ownerSends(t, db, line, c, t0)
	if _, err := db.AcquireLease(ctx, storage.Lease{ChatID: c.ID, LineID: line.ID, KeyID: "key_a", ExpiresAt: t0 + 1000}, false, t0); err != nil {
		t.Fatal(err)
	}
	if n, err := db.ExpireAgentHolds(ctx, t0+999); err != nil || n != 0 {
		t.Fatalf("before anything ran out: %d, %v", n, err)
	}
	if n, err := db.ExpireAgentHolds(ctx, t0+quiet); err != nil || n != 2 {
		t.Fatalf("after both ran out: %d, %v", n, err)
	}
	d := due(t, db, hook)
	if len(d) != 3 || d[1].Handoff == nil || d[1].Handoff.State != storage.HandoffAgentResumed || d[2].Lease == nil || d[2].Lease.Released != storage.LeaseExpired {
		t.Fatalf("deliveries %+v", d)
	}
	if _, err := db.HandoffOf(ctx, c.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("handoff after expiry: %v", err)
	}
}
