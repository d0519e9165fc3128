package messages

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// The first start imports what chat.db holds as history, without events:
// messages sent and received (screened ones marked), none not sent yet,
// none taken back, no tapbacks. Then new rows are news, and a restart
// resumes from the cursor without importing again.
func TestWatchImportsHistoryOnFirstStart(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	now := time.Now()
	dm := r.db.DirectChat("imessage", alice)
	junk := r.db.DirectChat("imessage", stranger)
	r.db.SetFilter(junk, 2, false, false)
	_, hello := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "old hello", Date: now.Add(-72 * time.Hour), Read: now.Add(-71 * time.Hour)})
	_, reply := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "old reply", IsSent: true, Date: now.Add(-71 * time.Hour)})
	_, later := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "send me later", Scheduled: true, Date: now.Add(time.Hour)})
	_, oops := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "oops", Date: now.Add(-70 * time.Hour)})
	r.db.Unsend(oops, now.Add(-70*time.Hour))
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: reply, ReactionType: 2000, Date: now.Add(-70 * time.Hour)})
	_, spam := r.db.Insert(chatdbtest.Msg{Chat: junk, From: stranger, Text: "you won", Date: now.Add(-time.Hour)})
	last := r.maxRowID()

	r.start()
	st := r.sink.state()
	if got, want := guidsOf(st.history), []string{hello, reply, spam}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if len(st.offered) != 0 || len(st.reactions) != 0 || st.imported != 1 {
		t.Fatalf("first start: %d live, %d tapbacks, imported %d; want history only", len(st.offered), len(st.reactions), st.imported)
	}
	h0, h1, h2 := st.history[0], st.history[1], st.history[2]
	if h0.Sender != alice || h0.IsFromMe || h0.Text == nil || *h0.Text != "old hello" || h0.ReadByLineAt.IsZero() || h0.Screened ||
		h0.Chat.GUID != dm.GUID || !slices.Equal(h0.Chat.Participants, []string{alice}) || h0.Line != rigLine {
		t.Errorf("contact's history message: %+v", h0)
	}
	if h1.Sender != rigLine || !h1.IsFromMe || h1.Screened {
		t.Errorf("the line's history message: %+v", h1)
	}
	if !h2.Screened || h2.Chat.Filter != "junk" {
		t.Errorf("junk history message: %+v", h2)
	}
	if got := r.cursor.saved(); got != last {
		t.Errorf("cursor saved at %d after the import, want %d", got, last)
	}

	// The Send Later row becomes a message once Messages sends it: news,
	// as it was first read moments ago.
	r.db.MarkSent(later)
	if in := r.sink.waitLive(t, later); !in.IsFromMe || in.Sender != rigLine || in.Text == nil || *in.Text != "send me later" {
		t.Errorf("sent later: %+v", in)
	}
	row, guid := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "new"})
	if in := r.sink.waitLive(t, guid); !in.MayBeTwin || in.ReadByLineAt != (time.Time{}) {
		t.Errorf("live message: %+v", in)
	}
	waitUntil(t, func() bool { return r.cursor.saved() >= row })
	r.stop()

	// A restart resumes after the cursor: no import, nothing again.
	before := r.sink.state()
	runBridge(t, openBridge(t, r.cfg), r.sink)
	_, next := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "after the restart"})
	r.sink.waitLive(t, next)
	if st := r.sink.state(); st.imported != 1 || len(st.history) != len(before.history) || len(st.offered) != len(before.offered)+1 {
		t.Fatalf("after a restart: imported %d, history %q, offered %q", st.imported, guidsOf(st.history), guidsOf(st.offered))
	}
}

// A new row is news when it is recent, or a contact's unread row of the
// last day (the Mac caught up); any other is history, as iCloud writes old
// rows again.
func TestWatchLiveOrHistory(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	now := time.Now()
	type row struct {
		name string
		msg  chatdbtest.Msg
		live bool
	}
	rows := []row{
		{"a contact's message just now", chatdbtest.Msg{From: alice, Text: "now"}, true},
		{"a contact's unread message of 12 h ago", chatdbtest.Msg{From: alice, Text: "unread 12h", Date: now.Add(-12 * time.Hour)}, true},
		{"a contact's read message of 12 h ago", chatdbtest.Msg{From: alice, Text: "read 12h", Date: now.Add(-12 * time.Hour),
			Read: now.Add(-11 * time.Hour)}, false},
		{"a contact's read message of 30 h ago", chatdbtest.Msg{From: alice, Text: "read 30h", Date: now.Add(-30 * time.Hour),
			Read: now.Add(-29 * time.Hour)}, false},
		{"a contact's unread message of 30 h ago", chatdbtest.Msg{From: alice, Text: "unread 30h", Date: now.Add(-30 * time.Hour)}, false},
		{"the line's message of 30 min ago", chatdbtest.Msg{Text: "mine 30m", IsSent: true, Date: now.Add(-30 * time.Minute)}, false},
		{"the line's message just now, from another device", chatdbtest.Msg{Text: "mine now", IsSent: true}, true},
	}
	guids := make([]string, len(rows))
	r.db.Batch(func() {
		for i, row := range rows {
			row.msg.Chat = dm
			_, guids[i] = r.db.Insert(row.msg)
		}
	})
	r.sentinel(dm, alice)
	st := r.sink.state()
	history := 0
	for i, row := range rows {
		in, live := findInbound(st.live, guids[i])
		old, hist := findInbound(st.history, guids[i])
		switch {
		case live && hist:
			t.Errorf("%s: both news and history", row.name)
		case row.live && !live:
			t.Errorf("%s: not news", row.name)
		case !row.live && !hist:
			t.Errorf("%s: not history", row.name)
		case live && !in.MayBeTwin, hist && !old.MayBeTwin:
			t.Errorf("%s: not offered as a possible twin", row.name)
		}
		if hist {
			history++
		}
	}
	if in, _ := findInbound(st.live, guids[6]); in.Sender != rigLine || !in.IsFromMe {
		t.Errorf("the line's message from another device: %+v", in)
	}
	// News read late is catch-up; news read as it comes is live.
	for i, catchUp := range map[int]bool{0: false, 1: true, 6: false} {
		if in, _ := findInbound(st.live, guids[i]); in.CatchUp != catchUp {
			t.Errorf("%s: CatchUp %v, want %v", rows[i].name, in.CatchUp, catchUp)
		}
	}
	waitUntil(t, func() bool { return r.b.Health().HistoryRows == int64(history) })
	if !strings.Contains(r.logs.String(), "old messages written again to chat.db") {
		t.Errorf("the flood was not logged:\n%s", r.logs)
	}
}

// A message the sink takes as the twin of a stored one is counted, not
// stored, whether it came as news or as history.
func TestWatchTwins(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	r.sink.mu.Lock()
	r.sink.twins["LIVE-TWIN"], r.sink.twins["OLD-TWIN"] = true, true
	r.sink.mu.Unlock()
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, GUID: "LIVE-TWIN", Text: "again"})
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, GUID: "OLD-TWIN", Text: "old again", Date: time.Now().Add(-48 * time.Hour),
		Read: time.Now().Add(-47 * time.Hour)})
	r.sentinel(dm, alice)
	st := r.sink.state()
	if in, ok := findInbound(st.offered, "LIVE-TWIN"); !ok || !in.MayBeTwin {
		t.Fatalf("the twin was not offered as one: %+v", in)
	}
	if _, ok := findInbound(st.live, "LIVE-TWIN"); ok {
		t.Error("a twin was stored")
	}
	waitUntil(t, func() bool { h := r.b.Health(); return h.Twins == 2 })
	r.sentinel(dm, alice) // a scan later, each still counted once
	if h := r.b.Health(); h.Twins != 2 || h.HistoryRows != 0 {
		t.Errorf("twins counted as history rows: %+v", h)
	}
}

// What Messages files away (junk, spam, blocked; unknown senders when the
// line holds them) is stored as screened history, without events.
func TestWatchScreened(t *testing.T) {
	t.Parallel()
	for _, hold := range []bool{false, true} {
		t.Run(map[bool]string{false: "unknown senders delivered", true: "unknown senders held"}[hold], func(t *testing.T) {
			t.Parallel()
			r := newRig(t, func(c *Config) { c.HoldUnknownSenders = hold })
			dm := r.db.DirectChat("imessage", alice)
			junk := r.db.DirectChat("imessage", "+15559870001")
			r.db.SetFilter(junk, 2, false, false)
			blocked := r.db.DirectChat("imessage", "+15559870002")
			r.db.SetFilter(blocked, 0, true, false)
			unknown := r.db.DirectChat("imessage", "+15559870003")
			r.db.SetFilter(unknown, 1, false, false)
			review := r.db.DirectChat("imessage", "+15559870004")
			r.db.SetFilter(review, 0, false, true)
			r.start()

			_, known := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hi"})
			r.sink.waitLive(t, known)
			_, junkMsg := r.db.Insert(chatdbtest.Msg{Chat: junk, From: "+15559870001", Text: "win"})
			_, spamMsg := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "cheap pills", Spam: true})
			_, blockedMsg := r.db.Insert(chatdbtest.Msg{Chat: blocked, From: "+15559870002", Text: "let me in"})
			_, unknownMsg := r.db.Insert(chatdbtest.Msg{Chat: unknown, From: "+15559870003", Text: "new number"})
			_, reviewMsg := r.db.Insert(chatdbtest.Msg{Chat: review, From: "+15559870004", Text: "please review"})
			// A tapback in the junk chat raises nothing.
			r.db.Insert(chatdbtest.Msg{Chat: junk, From: "+15559870001", ReactionTo: junkMsg, ReactionType: 2001})
			r.sentinel(dm, alice)

			st := r.sink.state()
			for _, g := range []string{junkMsg, spamMsg, blockedMsg} {
				if in, ok := findInbound(st.history, g); !ok || !in.Screened {
					t.Errorf("filed-away message %s: history %v, %+v", g, ok, in)
				}
			}
			for _, g := range []string{unknownMsg, reviewMsg} {
				in, live := findInbound(st.live, g)
				old, hist := findInbound(st.history, g)
				if hold && (!hist || !old.Screened || live) || !hold && (!live || in.Screened || hist) {
					t.Errorf("unknown sender's %s: live %v %+v, history %v %+v", g, live, in, hist, old)
				}
			}
			if in, _ := findInbound(st.live, unknownMsg); !hold && in.Chat.Filter != "unknown_sender" {
				t.Errorf("unknown sender's chat filed under %q", in.Chat.Filter)
			}
			if len(st.reactions) != 0 {
				t.Errorf("tapbacks in a junk chat reported: %+v", st.reactions)
			}
			screened := int64(3 + 1) // junk, spam, blocked, the tapback
			if hold {
				screened += 2
			}
			waitUntil(t, func() bool { return r.b.Health().Screened == screened })

			// Changes to a screened row raise nothing; to another, an
			// update.
			r.db.Batch(func() {
				r.db.MarkRead(junkMsg, time.Now())
				r.db.MarkRead(known, time.Now())
			})
			r.sink.waitUpdate(t, known, func(u bridge.MessageUpdate) bool { return !u.ReadByLineAt.IsZero() })
			for _, u := range r.sink.state().updates {
				if u.GUID == junkMsg {
					t.Errorf("update of a screened row: %+v", u)
				}
			}
		})
	}
}

// Tapbacks and group changes reach the sink as what they are.
func TestWatchTapbacksAndGroupChanges(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	group := r.db.GroupChat("imessage", "Crew", alice, bob)
	r.start()
	now := time.Now()
	_, target := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "climbing?"})
	r.sink.waitLive(t, target)

	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: target, ReactionType: 2000})
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: target, ReactionType: 3000})
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: target, ReactionType: 2006, Emoji: "🎉"})
	r.db.Insert(chatdbtest.Msg{Chat: dm, ReactionTo: target, ReactionType: 2005, IsSent: true})
	// On a message the sink has no record of: dropped, not retried.
	unknownRow, _ := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: "NOT-RECORDED", ReactionType: 2001})
	// An old tapback written again: history, no event.
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: target, ReactionType: 2003, Date: now.Add(-48 * time.Hour)})

	added := r.db.AddMember(group, alice, carol)
	removed := r.db.RemoveMember(group, "", carol)
	renamed := r.db.Rename(group, bob, "Crag crew")
	photo := r.db.SetGroupPhoto(group, alice)
	_, noPhoto := r.db.Insert(chatdbtest.Msg{Chat: group, From: bob, ItemType: 3, GroupAction: 2})
	left := r.db.Leave(group, bob)
	// Group changes outside a group, or naming no member, change nothing.
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ItemType: 2, GroupTitle: "not a group"})
	r.db.Insert(chatdbtest.Msg{Chat: group, From: alice, ItemType: 1, GroupAction: 0})
	sentinelRow, _ := r.sentinel(dm, alice)

	st := r.sink.state()
	type tapback struct {
		typ, emoji, sender string
		added, fromMe      bool
	}
	var got []tapback
	for _, x := range st.reactions {
		if x.TargetGUID != target || x.Chat.GUID != dm.GUID || x.Line != rigLine || x.SentAt.IsZero() {
			t.Errorf("tapback %+v", x)
		}
		got = append(got, tapback{x.Type, x.Emoji, x.Sender, x.Added, x.IsFromMe})
	}
	want := []tapback{{"love", "", alice, true, false}, {"love", "", alice, false, false}, {"emoji", "🎉", alice, true, false},
		{"question", "", rigLine, true, true}}
	if !slices.Equal(got, want) {
		t.Errorf("tapbacks\n got %+v\nwant %+v", got, want)
	}
	type change struct {
		guid, action, participant, name, by string
		fromMe                              bool
	}
	var changes []change
	for _, u := range st.chatUpdates {
		if u.Chat.GUID != group.GUID || !u.Chat.IsGroup || u.At.IsZero() {
			t.Errorf("group change %+v", u)
		}
		changes = append(changes, change{u.GUID, u.Action, u.Participant, u.Name, u.By, u.IsFromMe})
	}
	wantChanges := []change{
		{added, bridge.ChatParticipantAdded, carol, "", alice, false},
		{removed, bridge.ChatParticipantRemoved, carol, "", rigLine, true},
		{renamed, bridge.ChatRenamed, "", "Crag crew", bob, false},
		{photo, bridge.ChatPhotoChanged, "", "", alice, false},
		{noPhoto, bridge.ChatPhotoRemoved, "", "", bob, false},
		{left, bridge.ChatParticipantLeft, bob, "", bob, false},
	}
	if !slices.Equal(changes, wantChanges) {
		t.Errorf("group changes\n got %+v\nwant %+v", changes, wantChanges)
	}
	// A dropped tapback holds nothing back.
	waitUntil(t, func() bool { return r.cursor.saved() >= sentinelRow && sentinelRow > unknownRow })
}

// What Messages records on a row later reaches the sink as an update:
// edits, unsends, delivery, reading, a late failure.
func TestWatchChanges(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	group := r.db.GroupChat("imessage", "", alice, bob)
	sms := r.db.DirectChat("sms", bob)
	r.start()
	_, in := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "see you at 5"})
	_, mine := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "ok", IsSent: true})
	_, mine2 := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "wrong chat", IsSent: true})
	_, inGroup := r.db.Insert(chatdbtest.Msg{Chat: group, Text: "hi all", IsSent: true})
	_, smsMine := r.db.Insert(chatdbtest.Msg{Chat: sms, Text: "by sms", IsSent: true})
	for _, g := range []string{in, mine, mine2, inGroup} {
		if got := r.sink.waitLive(t, g); !got.DeliveredAt.IsZero() {
			t.Errorf("%s reported delivered: %+v", g, got)
		}
	}
	// An SMS is marked delivered without a date: it was when seen so.
	if got := r.sink.waitLive(t, smsMine); got.DeliveredAt.IsZero() || got.Service != "sms" {
		t.Errorf("SMS of the line: %+v", got)
	}

	edited := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	r.db.Edit(in, "see you at 6", edited)
	u := r.sink.waitUpdate(t, in, func(u bridge.MessageUpdate) bool { return !u.EditedAt.IsZero() })
	if u.Text == nil || *u.Text != "see you at 6" || !u.EditedAt.Equal(edited) || u.Line != rigLine {
		t.Errorf("edit: %+v", u)
	}
	read := time.Now().Truncate(time.Millisecond)
	r.db.MarkRead(in, read)
	r.sink.waitUpdate(t, in, func(u bridge.MessageUpdate) bool { return u.ReadByLineAt.Equal(read) })

	delivered := time.Now().Truncate(time.Millisecond)
	r.db.MarkDelivered(mine, delivered)
	r.sink.waitUpdate(t, mine, func(u bridge.MessageUpdate) bool { return u.DeliveredAt.Equal(delivered) })
	r.db.MarkRead(mine, delivered.Add(time.Second))
	r.sink.waitUpdate(t, mine, func(u bridge.MessageUpdate) bool { return u.ReadAt.Equal(delivered.Add(time.Second)) })
	// In a group, a read date names no reader.
	r.db.MarkRead(inGroup, delivered)
	r.db.MarkDelivered(inGroup, delivered)
	if u := r.sink.waitUpdate(t, inGroup, func(u bridge.MessageUpdate) bool { return !u.DeliveredAt.IsZero() }); !u.ReadAt.IsZero() {
		t.Errorf("group message read by %v", u.ReadAt)
	}

	unsent := time.Now().Truncate(time.Millisecond)
	r.db.Unsend(mine2, unsent)
	r.sink.waitUpdate(t, mine2, func(u bridge.MessageUpdate) bool { return u.UnsentAt.Equal(unsent) })

	r.db.MarkError(mine, 22)
	waitUntil(t, func() bool { return len(r.sink.state().failures) > 0 })
	if f := r.sink.state().failures[0]; f.GUID != mine || !strings.Contains(f.Reason, "error 22") || !strings.Contains(f.Reason, "Not Delivered") {
		t.Errorf("late failure: %+v", f)
	}
}

// Rows that become messages late are reported then: a file the row
// flagged before writing it, a transfer that finishes, a file that lands
// on the disk, a voice memo's transcription. The saved cursor stays below
// a row that waits.
func TestWatchRowsThatBecomeRealLate(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	files := t.TempDir()
	r.start()

	// Flagged as carrying files before any is written: not a message yet.
	_, pending := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, FilesPending: true})
	r.sentinel(dm, alice)
	if _, ok := findInbound(r.sink.state().offered, pending); ok {
		t.Fatal("a row without body or files was reported")
	}
	photo := writeFile(t, files, "photo.jpg", "jpeg")
	r.db.AddAttachment(pending, chatdbtest.FileSpec{Path: photo, MimeType: "image/jpeg", TransferName: "photo.jpg", TotalBytes: 4})
	if in := r.sink.waitLive(t, pending); len(in.Attachments) != 1 || in.Attachments[0].Path != photo ||
		in.Attachments[0].Filename != "photo.jpg" || in.Attachments[0].MimeType != "image/jpeg" {
		t.Fatalf("files written late: %+v", in.Attachments)
	}

	// A transfer not finished: the row waits, and the cursor below it.
	transferRow, transfer := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "look",
		Attachments: []chatdbtest.FileSpec{{TransferName: "cat.png", MimeType: "image/png"}}})
	sentinelRow, _ := r.sentinel(dm, alice)
	if _, ok := findInbound(r.sink.state().offered, transfer); ok {
		t.Fatal("a message whose transfer has not finished was reported")
	}
	waitUntil(t, func() bool { return r.cursor.saved() == transferRow-1 })
	cat := writeFile(t, files, "cat.png", "png")
	r.db.FinishTransfer(transfer, cat)
	if in := r.sink.waitLive(t, transfer); len(in.Attachments) != 1 || in.Attachments[0].Path != cat {
		t.Fatalf("finished transfer: %+v", in.Attachments)
	}
	waitUntil(t, func() bool { return r.cursor.saved() >= sentinelRow })

	// Flagged as carrying files, with its text: waits for them.
	_, withText := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "see attached", FilesPending: true})
	r.sentinel(dm, alice)
	if _, ok := findInbound(r.sink.state().offered, withText); ok {
		t.Fatal("a message whose files are not written yet was reported")
	}
	doc := writeFile(t, files, "doc.pdf", "pdf")
	r.db.AddAttachment(withText, chatdbtest.FileSpec{Path: doc, TransferName: "doc.pdf", MimeType: "application/pdf"})
	if in := r.sink.waitLive(t, withText); len(in.Attachments) != 1 || in.Attachments[0].Path != doc || *in.Text != "see attached" {
		t.Fatalf("files written after the text: %+v", in)
	}

	// A waiting row deleted meanwhile holds the cursor back no more.
	_, gone := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "never mind",
		Attachments: []chatdbtest.FileSpec{{TransferName: "big.mov"}}})
	goneSentinel, _ := r.sentinel(dm, alice)
	r.db.DeleteMessage(gone)
	waitUntil(t, func() bool { return r.cursor.saved() >= goneSentinel })

	// A send of the owner's not sent yet (an iPhone offline): reported
	// once Messages sends it.
	_, unsent := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "when back online"})
	r.sentinel(dm, alice)
	if _, ok := findInbound(r.sink.state().offered, unsent); ok {
		t.Fatal("a message not sent yet was reported")
	}
	r.db.MarkSent(unsent)
	if in := r.sink.waitLive(t, unsent); !in.IsFromMe || *in.Text != "when back online" {
		t.Fatalf("sent late: %+v", in)
	}

	// A file not on the disk yet (iCloud): reported without it, and
	// given once it lands.
	late := filepath.Join(files, "late.heic")
	_, lateMsg := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "from iCloud",
		Attachments: []chatdbtest.FileSpec{{Path: late, TransferName: "late.heic"}}})
	if in := r.sink.waitLive(t, lateMsg); len(in.Attachments) != 1 || in.Attachments[0].Path != "" ||
		in.Attachments[0].MimeType != "image/heic" {
		t.Fatalf("missing file: %+v", in.Attachments)
	}
	writeFile(t, files, "late.heic", "heic")
	r.sink.waitUpdate(t, lateMsg, func(u bridge.MessageUpdate) bool { return len(u.Attachments) == 1 && u.Attachments[0].Path == late })

	// A voice memo is reported at once, and again with its transcription.
	memo := writeFile(t, files, "Audio Message.caf", "caf")
	_, memoMsg := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, IsAudioMessage: true,
		Attachments: []chatdbtest.FileSpec{{Path: memo, TransferName: "Audio Message.caf", MimeType: "audio/x-caf"}}})
	if in := r.sink.waitLive(t, memoMsg); !in.IsAudioMessage || len(in.Attachments) != 1 || in.Attachments[0].Transcription != nil {
		t.Fatalf("voice memo: %+v", in)
	}
	r.db.SetText(memoMsg, "on my way")
	waitUntil(t, func() bool { return countInbound(r.sink.state().live, memoMsg) == 2 })
	if in, _ := findInbound(r.sink.state().live, memoMsg); in.Attachments[0].Transcription == nil || *in.Attachments[0].Transcription != "on my way" {
		t.Fatalf("voice memo with its transcription: %+v", in.Attachments)
	}
}

// A transfer that never finishes is reported without its file once
// TransferWait has passed.
func TestWatchTransferWaitEnds(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TransferWait = 100 * time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	_, guid := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "stuck",
		Attachments: []chatdbtest.FileSpec{{TransferName: "stuck.mov", MimeType: "video/quicktime"}}})
	if in := r.sink.waitLive(t, guid); len(in.Attachments) != 1 || in.Attachments[0].Path != "" || in.Attachments[0].Filename != "stuck.mov" {
		t.Fatalf("reported without its file: %+v", in.Attachments)
	}
}

// Another chat.db put at the path is read from its start: what it holds
// is history, and only what is new raises events.
func TestWatchReplacedChatDB(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	for range 5 {
		r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "before"})
	}
	before, _ := r.sentinel(dm, alice)

	var restored, fresh string
	r.db.Replace(func(nf *chatdbtest.Fixture) {
		c := nf.DirectChat("imessage", alice)
		_, restored = nf.Insert(chatdbtest.Msg{Chat: c, From: alice, Text: "restored", Date: time.Now().Add(-48 * time.Hour),
			Read: time.Now().Add(-47 * time.Hour)})
		_, fresh = nf.Insert(chatdbtest.Msg{Chat: c, From: alice, Text: "written since"})
	})
	if in := r.sink.waitHistory(t, restored); !in.MayBeTwin {
		t.Errorf("restored history: %+v", in)
	}
	r.sink.waitLive(t, fresh)
	if !slices.Contains(r.cursor.allSaves(), 0) {
		t.Errorf("cursor saves %v: never reset to 0", r.cursor.allSaves())
	}
	if r.b.Health().ReplacedAt.IsZero() {
		t.Error("health does not tell the replacement")
	}
	// The fixture writes to the new file: read on from it.
	dm2 := r.db.DirectChat("imessage", alice)
	row, _ := r.sentinel(dm2, alice)
	if row >= before {
		t.Fatalf("the new file's rows go on from %d, want below the old %d (the test is wrong)", row, before)
	}
	if !strings.Contains(r.logs.String(), "chat.db was replaced") {
		t.Errorf("the replacement was not logged:\n%s", r.logs)
	}
}

// A row the sink failed to store is tried again, and the saved cursor
// stays below it until then; a restart meanwhile reads it again.
func TestWatchRetriesFailedStores(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	r.sink.mu.Lock()
	r.sink.failLive["FAILS-ONCE"] = 1
	r.sink.failHistory = 1
	r.sink.mu.Unlock()
	var liveRow int64
	r.db.Batch(func() {
		liveRow, _ = r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, GUID: "FAILS-ONCE", Text: "first try fails"})
		r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, GUID: "OLD-FAILS-ONCE", Text: "old", Date: time.Now().Add(-48 * time.Hour),
			Read: time.Now().Add(-47 * time.Hour)})
	})
	r.sink.waitLive(t, "FAILS-ONCE")
	r.sink.waitHistory(t, "OLD-FAILS-ONCE")
	st := r.sink.state()
	if st.failedCalls != 2 || countInbound(st.live, "FAILS-ONCE") != 1 || countInbound(st.history, "OLD-FAILS-ONCE") != 1 {
		t.Fatalf("%d failed calls, stored %d and %d times", st.failedCalls, countInbound(st.live, "FAILS-ONCE"),
			countInbound(st.history, "OLD-FAILS-ONCE"))
	}
	if at := st.cursorAt["FAILS-ONCE"]; at >= liveRow {
		t.Errorf("the saved cursor was at %d while row %d was still to store", at, liveRow)
	}
	waitUntil(t, func() bool { return r.cursor.saved() >= liveRow })
	if !strings.Contains(r.logs.String(), "record a row of chat.db; trying again") {
		t.Errorf("the failure was not logged:\n%s", r.logs)
	}
}

func TestWatchRestartReadsWhatFailed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	r.sink.mu.Lock()
	r.sink.failLive["ALWAYS-FAILS"] = 1 << 30
	r.sink.mu.Unlock()
	row, _ := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, GUID: "ALWAYS-FAILS", Text: "store me"})
	r.sentinel(dm, alice)
	waitUntil(t, func() bool { return r.cursor.saved() == row-1 })
	r.stop()

	r.sink.mu.Lock()
	delete(r.sink.failLive, "ALWAYS-FAILS")
	r.sink.mu.Unlock()
	runBridge(t, openBridge(t, r.cfg), r.sink)
	r.sink.waitLive(t, "ALWAYS-FAILS")
}

// Typing comes from the helper: one-to-one chats only, named as Blueline
// names them.
func TestWatchTyping(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.db.ChatWithGUID("any;-;"+bob, "SMS", bob)
	r.start()
	peer := dialPeer(t, r.b.helper)
	peer.send(helperPing)
	waitConnected(t, r.b.helper, true)
	peer.send(map[string]any{"event": "started-typing", "guid": dm.GUID})
	peer.send(map[string]any{"event": "started-typing", "guid": "iMessage;+;chat123456789"}) // a group: who?
	peer.send(map[string]any{"event": "new-message", "guid": dm.GUID})
	peer.send(map[string]any{"event": "stopped-typing", "guid": "any;-;" + bob})
	waitUntil(t, func() bool { return len(r.sink.state().typing) >= 2 })
	st := r.sink.state()
	if len(st.typing) != 2 {
		t.Fatalf("typing %+v", st.typing)
	}
	if a := st.typing[0]; !a.On || a.Sender != alice || a.Chat.GUID != dm.GUID || a.Line != rigLine || a.At.IsZero() {
		t.Errorf("started typing: %+v", a)
	}
	if b := st.typing[1]; b.On || b.Sender != bob || b.Chat.GUID != "SMS;-;"+bob {
		t.Errorf("stopped typing: %+v", b)
	}
}

// A row the line sent from another alias than its handle is told once in
// the health and the log.
func TestWatchSendingAlias(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	_, g := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "from my e-mail", IsSent: true, CallerID: "me@example.com"})
	r.sink.waitLive(t, g)
	if h := r.b.Health(); h.SendingAlias != "me@example.com" || !strings.Contains(h.String(), "another alias") {
		t.Errorf("health %+v", h)
	}
	_, g = r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "from the handle", IsSent: true, CallerID: "tel:" + rigLine})
	r.sink.waitLive(t, g)
	if h := r.b.Health(); h.SendingAlias != "" {
		t.Errorf("health after sending from the handle: %+v", h)
	}
	if n := strings.Count(r.logs.String(), "Messages sends from another address"); n != 1 {
		t.Errorf("alias logged %d times", n)
	}
}

// Without PollOnly, a change to the Messages folder wakes the watcher:
// no poll is due for an hour.
func TestWatchFolderNotices(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.PollOnly, c.Poll = false, time.Hour })
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	_, g := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "wake up"})
	r.sink.waitLive(t, g)
}

// Run fails when it cannot start; a chat.db that cannot be read later
// shows in the health.
func TestWatchErrors(t *testing.T) {
	t.Parallel()
	t.Run("cursor", func(t *testing.T) {
		r := newRig(t)
		r.cursor.loadErr = errors.New("storage closed")
		if err := r.b.Run(t.Context(), r.sink); !errors.Is(err, r.cursor.loadErr) {
			t.Fatalf("Run: %v", err)
		}
	})
	t.Run("chat.db gone", func(t *testing.T) {
		r := newRig(t)
		r.start()
		if h := r.b.Health(); h.ChatDB != "readable" {
			t.Fatalf("health %+v", h)
		}
		moved := r.db.Path() + ".moved"
		if err := os.Rename(r.db.Path(), moved); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, func() bool { return r.b.Health().ChatDB != "readable" })
		if err := os.Rename(moved, r.db.Path()); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, func() bool { return r.b.Health().ChatDB == "readable" })
		r.stop()
		if err := os.Remove(r.db.Path()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := r.b.Run(ctx, r.sink); err == nil || !strings.Contains(err.Error(), "chat.db") {
			t.Fatalf("Run without chat.db: %v", err)
		}
	})
}

// A change to a message the sink has no record of yet (a send of the
// line's the outbox records after Send returns) is offered again until
// it has.
func TestWatchChangeOfAMessageRecordedLate(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	var guid string
	r.mac.answer(func(int, scriptCall) error { guid = sendRow(r.db, dm, "ours"); return nil })
	if _, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "ours")); err != nil {
		t.Fatal(err)
	}
	delivered := time.Now().Truncate(time.Millisecond)
	r.db.MarkDelivered(guid, delivered)
	waitUntil(t, func() bool { return r.sink.refusedUpdates(guid) > 0 })
	r.sink.know(guid)
	r.sink.waitUpdate(t, guid, func(u bridge.MessageUpdate) bool { return u.DeliveredAt.Equal(delivered) })
	if _, ok := findInbound(r.sink.state().offered, guid); ok {
		t.Error("our send was reported as a message")
	}
}

// Rows that are no messages to record: a send of the owner's that failed
// where it was made, a row filed under no chat.
func TestWatchSkipsWhatIsNoMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	_, failed := r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "failed", Error: 4})
	_, nowhere := r.db.Insert(chatdbtest.Msg{From: alice, Text: "under no chat"})
	var takenBack, inPart string
	r.db.Batch(func() {
		_, takenBack = r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "oops"})
		r.db.Unsend(takenBack, time.Now())
		// Taken back in part before it was read: no edit.
		_, inPart = r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "and the photo",
			Attachments: []chatdbtest.FileSpec{{Path: "/nowhere/p.jpg", TransferName: "p.jpg"}}})
		r.db.UnsendParts(inPart, []int{1}, time.Now()) // the text
	})
	r.sentinel(dm, alice)
	st := r.sink.state()
	for _, g := range []string{failed, nowhere, takenBack} {
		if _, ok := findInbound(append(st.offered, st.history...), g); ok {
			t.Errorf("row %s recorded", g)
		}
	}
	if in, ok := findInbound(st.live, inPart); !ok || !in.EditedAt.IsZero() || len(in.Attachments) != 1 || in.Text != nil {
		t.Errorf("message taken back in part: %+v", in)
	}
}

// A Messages database rebuilt in place, its ROWIDs handed out anew below
// the cursor, is read from its start; deleting the newest rows is not
// that.
func TestWatchRowsEndBelowTheCursor(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	for range 3 {
		r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "before"})
	}
	_, last := r.sentinel(dm, alice)
	r.db.DeleteMessage(last)
	r.sentinel(dm, alice)
	if !r.b.Health().ReplacedAt.IsZero() {
		t.Fatal("deleting the newest row taken for a new database")
	}
	var rebuilt string
	r.db.Batch(func() {
		r.db.Exec("DELETE FROM chat_message_join")
		r.db.Exec("DELETE FROM message")
		r.db.Exec("UPDATE sqlite_sequence SET seq = 0 WHERE name = 'message'")
		_, rebuilt = r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "after the rebuild"})
	})
	r.sink.waitLive(t, rebuilt)
	// The change scanner may hand the new row over before the next read
	// finds the file rebuilt: wait for that read.
	testkit.Eventually(t, 10*time.Second, func() bool { return !r.b.Health().ReplacedAt.IsZero() })
	if !strings.Contains(r.logs.String(), "below the") {
		t.Errorf("the rebuild was not noticed: %+v\n%s", r.b.Health(), r.logs)
	}
}

// An update the sink fails to store is offered again.
func TestWatchRetriesFailedUpdates(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	_, g := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hi"})
	r.sink.waitLive(t, g)
	r.sink.mu.Lock()
	r.sink.failUpdate[g] = 2
	r.sink.mu.Unlock()
	read := time.Now().Truncate(time.Millisecond)
	r.db.MarkRead(g, read)
	r.sink.waitUpdate(t, g, func(u bridge.MessageUpdate) bool { return u.ReadByLineAt.Equal(read) })
	if n := r.sink.state().failedCalls; n != 2 {
		t.Errorf("%d failed calls, want 2", n)
	}
	if !strings.Contains(r.logs.String(), "record a change from chat.db") {
		t.Errorf("log:\n%s", r.logs)
	}
}

// A first start whose import fails stops with the error, saving nothing:
// the next start imports again.
func TestWatchHistoryImportFails(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	_, g := r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "old", Date: time.Now().Add(-time.Hour)})
	r.sink.failHistory = 1
	if err := r.b.Run(t.Context(), r.sink); !errors.Is(err, errDiskFull) {
		t.Fatalf("Run: %v", err)
	}
	if got := r.cursor.saved(); got != -1 {
		t.Fatalf("cursor saved at %d after a failed import", got)
	}
	r.start()
	if st := r.sink.state(); st.imported != 1 || !slices.Equal(guidsOf(st.history), []string{g}) {
		t.Fatalf("second start: imported %d, history %q", st.imported, guidsOf(st.history))
	}
}

// BUG: the first start's history import stores a row filed under no chat,
// which the live path skips ("there is no conversation to put it in"):
// the sink is handed a message whose chat has no GUID and no identifier
// (readHistory lacks reportable's check), and storage then makes a chat
// with an empty GUID for it.
func TestWatchHistorySkipsRowsUnderNoChat(t *testing.T) {
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	_, nowhere := r.db.Insert(chatdbtest.Msg{From: alice, Text: "under no chat", Date: time.Now().Add(-48 * time.Hour)})
	r.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "in a chat", Date: time.Now().Add(-48 * time.Hour)})
	r.start()
	st := r.sink.state()
	if in, ok := findInbound(st.history, nowhere); ok {
		t.Fatalf("history holds a row under no chat: chat %+v", in.Chat)
	}
	if len(st.history) != 1 {
		t.Fatalf("history %q, want the row in a chat", guidsOf(st.history))
	}
}
