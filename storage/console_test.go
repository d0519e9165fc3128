package storage_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

func TestLoginLinks(t *testing.T) {
	db, _ := openDB(t)
	hash := bytes.Repeat([]byte{1}, 32)
	if err := db.CreateLoginLink(ctx, hash, "ann", 1000); err != nil {
		t.Fatal(err)
	}
	if owner, err := db.UseLoginLink(ctx, hash, 999); err != nil || owner != "ann" {
		t.Fatalf("use before expiry: %q %v", owner, err)
	}
	if _, err := db.UseLoginLink(ctx, hash, 999); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("use twice: %v, want not found", err)
	}
	late := bytes.Repeat([]byte{2}, 32)
	if err := db.CreateLoginLink(ctx, late, "", 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UseLoginLink(ctx, late, 1000); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("use at expiry: %v, want not found", err)
	}
}

func TestSessions(t *testing.T) {
	db, _ := openDB(t)
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	sa := storage.Session{ID: storage.NewID("ses_"), Owner: "ann", CSRF: "x", ExpiresAt: 2000}
	sb := storage.Session{ID: storage.NewID("ses_"), ExpiresAt: 1000}
	for hash, s := range map[*[]byte]storage.Session{&a: sa, &b: sb} {
		if err := db.CreateSession(ctx, *hash, s); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := db.SessionByHash(ctx, a, 1500); err != nil || s.ID != sa.ID || s.Owner != "ann" {
		t.Fatalf("session a: %+v %v", s, err)
	}
	if _, err := db.SessionByHash(ctx, b, 1500); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired session b: %v, want not found", err)
	}
	if list, err := db.Sessions(ctx, 1500); err != nil || len(list) != 1 || list[0].ID != sa.ID {
		t.Fatalf("sessions at 1500: %+v %v", list, err)
	}
	if n, err := db.PurgeConsole(ctx, 1500); err != nil || n != 1 {
		t.Fatalf("purge: %d %v, want b gone", n, err)
	}
	if n, err := db.RevokeSessions(ctx, sa.ID); err != nil || n != 1 {
		t.Fatalf("revoke a: %d %v", n, err)
	}
	if _, err := db.SessionByHash(ctx, a, 1500); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("revoked session a: %v", err)
	}
}

func TestConsolePassword(t *testing.T) {
	db, _ := openDB(t)
	if h, err := db.ConsolePassword(ctx); err != nil || h != nil {
		t.Fatalf("no password yet: %q %v", h, err)
	}
	if err := db.SetConsolePassword(ctx, []byte("hash")); err != nil {
		t.Fatal(err)
	}
	if h, err := db.ConsolePassword(ctx); err != nil || string(h) != "hash" {
		t.Fatalf("password: %q %v", h, err)
	}
	if err := db.SetConsolePassword(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if h, _ := db.ConsolePassword(ctx); h != nil {
		t.Fatalf("removed password: %q", h)
	}
}

// Every event is kept in commit order, webhooks or not; a reader waiting
// on EventsChanged is woken by the next one.
func TestEventLog(t *testing.T) {
	db, line := openDB(t)
	changed := db.EventsChanged()
	first := inbound(t, db, line, "+15551110001", 1)
	select {
	case <-changed:
	default:
		t.Fatal("EventsChanged was not closed by a commit with an event")
	}
	inbound(t, db, line, "+15551110002", 2)
	events, err := db.Events(ctx, 0, 10)
	if err != nil || len(events) != 2 || events[0].Seq != 1 || events[1].Seq != 2 {
		t.Fatalf("events: %+v %v", events, err)
	}
	if e := events[0]; e.Name != api.EventMessageReceived || e.ChatID != first.Chat.ID || e.Message == nil || e.Message.ID != first.Message.ID {
		t.Fatalf("first event: %+v", e)
	}
	if after, _ := db.Events(ctx, 1, 10); len(after) != 1 || after[0].Seq != 2 {
		t.Fatalf("events after 1: %+v", after)
	}
	if last, _ := db.LastEventSeq(ctx); last != 2 {
		t.Fatalf("last seq %d", last)
	}
	if n, err := db.PurgeEvents(ctx, events[1].At+1); err != nil || n != 2 {
		t.Fatalf("purge: %d %v", n, err)
	}
	// Numbers are never reused after a purge.
	inbound(t, db, line, "+15551110003", 3)
	if e, _ := db.Events(ctx, 0, 10); len(e) != 1 || e[0].Seq != 3 {
		t.Fatalf("after purge: %+v", e)
	}
}

func TestRecentOutbox(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	var ids []string
	for range 5 {
		text := "x"
		item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{
			ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, MaxAttempts: 3, ChatID: chat.ID, Text: &text}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, item.ID)
	}
	if claimed, _, err := db.ClaimDue(ctx, 1<<62, 1); err != nil || len(claimed) != 1 || claimed[0].ID != ids[0] {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	if _, err := db.MarkFailed(ctx, ids[0], "no"); err != nil {
		t.Fatal(err)
	}
	page, next, err := db.RecentOutbox(ctx, storage.OutboxFilter{}, "", 2, 100)
	if err != nil || len(page) != 2 || page[0].ID != ids[4] || page[1].ID != ids[3] || next != ids[3] {
		t.Fatalf("first page: %v next %q %v", page, next, err)
	}
	page, next, _ = db.RecentOutbox(ctx, storage.OutboxFilter{}, next, 10, 100)
	if len(page) != 3 || page[0].ID != ids[2] || next != "" {
		t.Fatalf("second page: %d items, next %q", len(page), next)
	}
	failed, _, _ := db.RecentOutbox(ctx, storage.OutboxFilter{Status: storage.StatusFailed, LineID: line.ID}, "", 10, 100)
	if len(failed) != 1 || failed[0].ID != ids[0] {
		t.Fatalf("failed: %+v", failed)
	}
	// A scan limit ends a page early, with a place to go on from.
	page, next, _ = db.RecentOutbox(ctx, storage.OutboxFilter{Status: storage.StatusFailed}, "", 10, 2)
	if len(page) != 0 || next != ids[3] {
		t.Fatalf("scan-limited page: %d items, next %q, want none and %q", len(page), next, ids[3])
	}
}

func TestEventsBefore(t *testing.T) {
	db, line := openDB(t)
	if seq, err := db.EventsBefore(ctx, 1); err != nil || seq != 0 {
		t.Fatalf("no events: %d %v", seq, err)
	}
	for i := range 7 {
		// A millisecond apart, so that each event has a time of its own.
		for start := time.Now().UnixMilli(); time.Now().UnixMilli() == start; {
		}
		inbound(t, db, line, "+1555111000"+string(rune('0'+i)), int64(i))
	}
	events, _ := db.Events(ctx, 0, 10)
	if events[0].ID == "" || !storage.ValidID(events[0].ID, "evt_") || events[0].ID == events[1].ID {
		t.Fatalf("event IDs %q %q", events[0].ID, events[1].ID)
	}
	for i, e := range events {
		if i > 0 && events[i-1].At >= e.At {
			t.Fatalf("events %d and %d share a time", i, i+1)
		}
		if seq, err := db.EventsBefore(ctx, e.At); err != nil || seq != e.Seq-1 {
			t.Errorf("before event %d (at %d): %d %v", e.Seq, e.At, seq, err)
		}
	}
	last := events[len(events)-1]
	if seq, _ := db.EventsBefore(ctx, last.At+1); seq != last.Seq {
		t.Errorf("after the last: %d, want %d", seq, last.Seq)
	}
	if seq, _ := db.EventsBefore(ctx, 0); seq != 0 {
		t.Errorf("before the first: %d, want 0", seq)
	}
}
