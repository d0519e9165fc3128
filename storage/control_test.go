package storage_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/blueline-app/blueline/storage"
)

// feed records what OnControlChange reports.
type feed struct {
	mu  sync.Mutex
	got []storage.ControlChange
}

func (f *feed) observe(c storage.ControlChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, c)
}

// take returns what was fed since the last take, as "kind id" or "kind id
// deleted".
func (f *feed) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.got {
		s := string(c.Kind) + " " + c.ID
		if c.Deleted {
			s += " deleted"
		} else if c.Record() == nil {
			s += " without a record"
		}
		out = append(out, s)
	}
	f.got = nil
	return out
}

func testKey(secret string) storage.Key {
	sum := sha256.Sum256([]byte(secret))
	return storage.Key{ID: storage.NewID("key_"), Label: secret, Scopes: []string{"messages:read"}, Hash: sum[:], CreatedAt: 1}
}

// Every committed change of a control record is fed once the observer is
// set, and nothing before.
func TestControlFeed(t *testing.T) {
	db, line := openSandboxDB(t)
	k := testKey("a")
	if err := db.CreateKey(ctx, k); err != nil { // no observer: nothing is fed
		t.Fatal(err)
	}
	var f feed
	db.OnControlChange(f.observe)

	k2 := testKey("b")
	if err := db.CreateKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if err := db.TouchKey(ctx, k2.ID, 60_000); err != nil {
		t.Fatal(err)
	}
	if err := db.TouchKey(ctx, k2.ID, 60_000); err != nil { // no change: nothing fed
		t.Fatal(err)
	}
	if err := db.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{"key " + k2.ID, "key " + k2.ID, "key " + k.ID}
	if got := f.take(); !slices.Equal(got, want) {
		t.Fatalf("keys fed %q, want %q", got, want)
	}

	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: "https://example.com", Events: []string{"message.received"}, Secret: "s", IsActive: true}
	if err := db.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	want = []string{"webhook " + w.ID, "webhook " + w.ID + " deleted"}
	if got := f.take(); !slices.Equal(got, want) {
		t.Fatalf("webhooks fed %q, want %q", got, want)
	}

	st, _, err := db.StartSandbox(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.StartSandbox(ctx, "ann"); err != nil { // started already: nothing fed
		t.Fatal(err)
	}
	body := "my code " + st.ActivationCode
	if _, err := db.RecordInbound(ctx, storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "SMS;-;+15551110001", Identifier: "+15551110001", Service: "sms"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: "+15551110001", Text: &body, SentAt: 1},
	}); err != nil {
		t.Fatal(err)
	}
	want = []string{"sandbox ann", "sandbox ann"}
	if got := f.take(); !slices.Equal(got, want) {
		t.Fatalf("sandbox fed %q, want %q", got, want)
	}
	if c, err := db.ControlRecord(ctx, storage.ControlSandbox, "ann"); err != nil || !c.Sandbox.Activated || c.Sandbox.PairedHandle != "+15551110001" {
		t.Fatalf("ann's sandbox: %+v %v", c.Sandbox, err)
	}

	s := storage.Session{ID: storage.NewID("ses_"), Owner: "ann", ExpiresAt: 2000}
	if err := db.CreateSession(ctx, bytes.Repeat([]byte{7}, 32), s); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RevokeSessions(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	want = []string{"session " + s.ID, "session " + s.ID + " deleted"}
	if got := f.take(); !slices.Equal(got, want) {
		t.Fatalf("sessions fed %q, want %q", got, want)
	}

	db.OnControlChange(nil)
	if err := db.CreateKey(ctx, testKey("c")); err != nil {
		t.Fatal(err)
	}
	if got := f.take(); len(got) != 0 {
		t.Fatalf("fed %q after the observer was removed", got)
	}
}

// A webhook disabled for failing is fed; an attempt that changes nothing
// of the webhook is not.
func TestControlFeedWebhookState(t *testing.T) {
	db, line := openDB(t)
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: "https://example.com", Events: []string{"message.received"}, Secret: "s", IsActive: true}
	if err := db.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	var f feed
	db.OnControlChange(f.observe)
	attempt := func(fail bool) {
		t.Helper()
		inbound(t, db, line, "+15551110001", 1)
		due, _, err := db.DueDeliveries(ctx, w.ID, 1<<62, 10, func(string) bool { return false })
		if err != nil || len(due) == 0 {
			t.Fatalf("due: %v %v", due, err)
		}
		res := storage.AttemptResult{Delivery: due[0], Attempt: storage.Attempt{At: 1}}
		if fail {
			res.Attempt.Error = "refused"
		}
		if _, err := db.RecordAttempts(ctx, 0, res); err != nil {
			t.Fatal(err)
		}
	}
	attempt(false)
	if got := f.take(); len(got) != 0 {
		t.Fatalf("a success of a healthy webhook fed %q", got)
	}
	attempt(true) // disableAfter 0: disabled at once
	if got := f.take(); !slices.Equal(got, []string{"webhook " + w.ID}) {
		t.Fatalf("a disabled webhook fed %q", got)
	}
	if c, _ := db.ControlRecord(ctx, storage.ControlWebhook, w.ID); c.Webhook.IsActive {
		t.Fatal("the webhook is still active")
	}
}

// ApplyControl writes a record as given, without feeding it, with the
// side effects of a local write.
func TestApplyControl(t *testing.T) {
	db, line := openSandboxDB(t)
	var f feed
	db.OnControlChange(f.observe)

	// A key from the fleet authenticates; revoked, it does not, and its
	// streams are woken.
	k := testKey("remote")
	kc := storage.ControlChange{Kind: storage.ControlKey, ID: k.ID, Key: &k}
	if applied, err := db.ApplyControl(ctx, kc, nil); err != nil || !applied {
		t.Fatalf("apply key: %v %v", applied, err)
	}
	if applied, err := db.ApplyControl(ctx, kc, nil); err != nil || applied {
		t.Fatalf("apply the same key again: %v %v, want nothing written", applied, err)
	}
	if got, err := db.KeyByHash(ctx, k.Hash); err != nil || got.ID != k.ID {
		t.Fatalf("the applied key: %+v %v", got, err)
	}
	revoked := db.Revoked()
	rk := k
	rk.RevokedAt = 5
	if _, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlKey, ID: k.ID, Key: &rk}, nil); err != nil {
		t.Fatal(err)
	}
	if !storage.Fired(revoked) {
		t.Fatal("a key revoked from the fleet did not wake the streams")
	}
	if _, err := db.KeyByHash(ctx, k.Hash); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the revoked key authenticates: %v", err)
	}

	// A guard that refuses leaves the record alone.
	k2 := testKey("guarded")
	if applied, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlKey, ID: k2.ID, Key: &k2},
		func(cur storage.ControlChange) bool { return !cur.Deleted }); err != nil || applied {
		t.Fatalf("a refused apply: %v %v", applied, err)
	}
	if c, _ := db.ControlRecord(ctx, storage.ControlKey, k2.ID); !c.Deleted {
		t.Fatal("a refused apply wrote the key")
	}

	// A webhook from the fleet wakes the dispatcher and is listed by its
	// line; deleted, it is gone from both.
	<-drain(db.WebhooksReady())
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: "https://example.com", Events: []string{"message.received"}, Secret: "s", IsActive: true}
	if _, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlWebhook, ID: w.ID, Webhook: &w}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-db.WebhooksReady():
	default:
		t.Fatal("a webhook from the fleet did not wake the dispatcher")
	}
	if hooks, err := db.Webhooks(ctx, line.ID); err != nil || len(hooks) != 1 || hooks[0].Secret != "s" {
		t.Fatalf("the line's webhooks: %+v %v", hooks, err)
	}
	if _, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlWebhook, ID: w.ID, Deleted: true}, nil); err != nil {
		t.Fatal(err)
	}
	if hooks, err := db.Webhooks(ctx, line.ID); err != nil || len(hooks) != 0 {
		t.Fatalf("the line's webhooks after the deletion: %+v %v", hooks, err)
	}

	// A sandbox activated elsewhere pairs its phone here too.
	st := storage.SandboxState{Owner: "ann", ActivationCode: "BL-X", Activated: true, PairedHandle: "+15551110001", ActivatedAt: 3, CreatedAt: 2}
	if _, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlSandbox, ID: "ann", Sandbox: &st}, nil); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := db.Sandbox(ctx, "ann"); err != nil || !ok || got != st {
		t.Fatalf("ann's sandbox: %+v %v %v", got, ok, err)
	}
	if owner, _ := db.SandboxOwner(ctx, "+15551110001"); owner != "ann" {
		t.Fatalf("the paired phone's owner: %q", owner)
	}

	// A session from the fleet lets its cookie in; ended, it does not,
	// and its streams are woken.
	hash := bytes.Repeat([]byte{9}, 32)
	s := storage.SessionRecord{Session: storage.Session{ID: storage.NewID("ses_"), Owner: "ann", ExpiresAt: 5000}, Hash: hash}
	if _, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlSession, ID: s.ID, Session: &s}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := db.SessionByHash(ctx, hash, 1000); err != nil || got.ID != s.ID {
		t.Fatalf("the applied session: %+v %v", got, err)
	}
	revoked = db.Revoked()
	if _, err := db.ApplyControl(ctx, storage.ControlChange{Kind: storage.ControlSession, ID: s.ID, Deleted: true}, nil); err != nil {
		t.Fatal(err)
	}
	if !storage.Fired(revoked) {
		t.Fatal("a session ended from the fleet did not wake the streams")
	}
	if _, err := db.SessionByHash(ctx, hash, 1000); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the ended session: %v", err)
	}

	if got := f.take(); len(got) != 0 {
		t.Fatalf("ApplyControl fed %q", got)
	}

	// Every record, by kind.
	all, err := db.ControlRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []storage.ControlKind
	for _, c := range all {
		kinds = append(kinds, c.Kind)
	}
	if want := []storage.ControlKind{storage.ControlKey, storage.ControlSandbox}; !slices.Equal(kinds, want) {
		t.Fatalf("records of kinds %v, want %v", kinds, want)
	}
	// Round trip through a fleet's JSON.
	for _, c := range all {
		data, err := jsonOf(c.Record())
		if err != nil {
			t.Fatal(err)
		}
		back, err := storage.DecodeControl(c.Kind, data)
		if err != nil || !back.Equal(c) {
			t.Fatalf("%s %s decoded as %+v: %v", c.Kind, c.ID, back, err)
		}
	}
}

// The fleet a host joined is remembered.
func TestFleetJoinedMarker(t *testing.T) {
	db, _ := openDB(t)
	if id, err := db.FleetJoined(ctx); err != nil || id != "" {
		t.Fatalf("a new database joined %q: %v", id, err)
	}
	if err := db.SetFleetJoined(ctx, "bl_keys@1"); err != nil {
		t.Fatal(err)
	}
	if id, err := db.FleetJoined(ctx); err != nil || id != "bl_keys@1" {
		t.Fatalf("joined %q: %v", id, err)
	}
}

// drain empties a signal channel, then returns a closed channel.
func drain(ch <-chan struct{}) <-chan struct{} {
	select {
	case <-ch:
	default:
	}
	done := make(chan struct{})
	close(done)
	return done
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
