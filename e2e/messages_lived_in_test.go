package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// livedInMac is a Mac's line whose daemon keeps its log, with a receiver of
// every event and one of the reference SDK's four.
type livedInMac struct {
	*messagesApp
	td        *testDaemon
	key       string
	all, four *receiver
	ev        *eventLog
	logs      *testkit.LogBuffer
}

// newLivedInMac starts a daemon on a Mac whose first contact (alice) has
// written once, after the history import.
func newLivedInMac(t *testing.T, lineExtra string, before func(app *messagesApp)) *livedInMac {
	t.Helper()
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	m := &livedInMac{messagesApp: app, all: newReceiver(t, nil), four: newReceiver(t, nil)}
	if before != nil {
		before(app)
	}
	m.td = newTestDaemon(t, app.config(freeTCPPort(t))+lineExtra+"\n"+webhookConfig(t, m.all, ""))
	log, logs := keptLog()
	m.logs = logs
	d, err := daemon.Start(context.Background(), m.td.config(), log)
	if err != nil {
		t.Fatal(err)
	}
	m.td.d, m.td.base = d, daemontest.URL(d)
	t.Cleanup(func() {
		m.td.stop()
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	m.key = m.td.key()
	m.td.register(m.key, macLine, m.all, "message.received", "message.sent", "message.edited", "message.unsent", "message.delivered",
		"receipt.read", "chat.updated", "reaction.added", "reaction.removed")
	m.td.register(m.key, macLine, m.four, "message.received", "message.sent", "reaction.added", "reaction.removed")
	m.ev = newEventLog(t, m.all)
	return m
}

// health is the Mac line's health in GET /v1/lines.
func (m *livedInMac) health() map[string]any {
	m.td.t.Helper()
	for _, l := range m.td.call("GET", "/v1/lines", m.key, nil).Data() {
		if l["handle"] == macLine {
			h, _ := l["health"].(map[string]any)
			return h
		}
	}
	m.td.t.Fatal("no Mac line in GET /v1/lines")
	return nil
}

// counted is one of the Mac line's counters in /metrics (the admin
// socket, which no rate limit slows).
func (m *livedInMac) counted(name string) float64 {
	m.td.t.Helper()
	return m.td.scrape()["blueline_messages_"+name+`_total{line="`+macLine+`"}`]
}

// chat is the Mac line's chat with contact (or a group's identifier).
func (m *livedInMac) chat(contact string) map[string]any {
	m.td.t.Helper()
	for _, c := range m.td.call("GET", "/v1/chats?from="+macLine+"&limit=100", m.key, nil).Data() {
		if c["identifier"] == contact {
			return c
		}
	}
	m.td.t.Fatalf("no chat with %s", contact)
	return nil
}

// live inserts a contact's message and waits for its event: everything
// read before it has been handled by then.
func (m *livedInMac) live(chat chatdbtest.ChatRef, from, text string) string {
	m.td.t.Helper()
	_, guid := m.db.Insert(chatdbtest.Msg{Chat: chat, From: from, Text: text})
	m.ev.next("message.received", guidIs(guid))
	return guid
}

// allMessages pages through a chat's messages, most recent first.
func (m *livedInMac) allMessages(to string) []map[string]any {
	m.td.t.Helper()
	var out []map[string]any
	path := "/v1/messages?from=" + macLine + "&to=" + to + "&limit=100"
	cursor := ""
	for {
		r := m.td.call("GET", path+cursor, m.key, nil)
		if r.Status != 200 {
			m.td.t.Fatalf("list messages: %d %s", r.Status, r.Raw)
		}
		out = append(out, r.Data()...)
		if r.Body["has_more"] != true {
			return out
		}
		cursor = "&cursor=" + r.Body["next_cursor"].(string)
	}
}

// Messages in iCloud writes old messages again under new ROWIDs and GUIDs;
// a Mac offline for hours catches up in a burst; the owner types on the
// iPhone: only what is news raises events, and nothing is stored twice.
func TestMessagesLiveOrHistory(t *testing.T) {
	const alice, bob, carol, dave, erin = "+15551230001", "+15551230002", "+15551230003", "+15551230004", "+15551230005"
	var dm, bobDM chatdbtest.ChatRef
	m := newLivedInMac(t, "", func(app *messagesApp) {
		dm = app.db.DirectChat("imessage", alice)
		bobDM = app.db.DirectChat("imessage", bob)
		app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "from last year", Date: time.Now().Add(-300 * 24 * time.Hour),
			Read: time.Now().Add(-300 * 24 * time.Hour)})
	})
	m.live(dm, alice, "hi there")
	before := len(m.allMessages(alice))

	// A flood: 2,000 rows dated 24 to 48 hours ago, contacts' rows read
	// long ago, the owner's sent, with fresh GUIDs and ROWIDs in no date
	// order, some in a chat never seen.
	carolDM := m.db.DirectChat("imessage", carol)
	chats := []struct {
		chat    chatdbtest.ChatRef
		contact string
	}{{dm, alice}, {bobDM, bob}, {carolDM, carol}}
	rng := rand.New(rand.NewPCG(1, 2))
	flooded := map[string]int{}
	const flood = 2000
	m.db.Batch(func() {
		for i := range flood {
			c := chats[i%len(chats)]
			date := time.Now().Add(-24*time.Hour - time.Duration(rng.Int64N(int64(24*time.Hour))))
			msg := chatdbtest.Msg{Chat: c.chat, Text: fmt.Sprintf("replayed %d", i), Date: date}
			if i%2 == 0 {
				msg.From, msg.Read = c.contact, date.Add(time.Minute)
			} else {
				msg.IsSent = true
			}
			m.db.Insert(msg)
			flooded[c.contact]++
		}
	})
	sentinel := m.live(bobDM, bob, "after the flood")
	testkit.Eventually(t, 10*time.Second, func() bool { return m.counted("history_rows") == flood })

	alices := m.allMessages(alice)
	if len(alices) != before+flooded[alice] {
		t.Fatalf("%d messages with alice, want %d", len(alices), before+flooded[alice])
	}
	if !slices.IsSortedFunc(alices, func(a, b map[string]any) int { return int(b["sent_at"].(float64) - a["sent_at"].(float64)) }) {
		t.Error("the flood is not stored in date order")
	}
	if n := len(m.allMessages(carol)); n != flooded[carol] {
		t.Errorf("%d messages with carol, want %d", n, flooded[carol])
	}
	if got := m.ev.counts(); got["message.received"] != 2 || got["message.sent"] != 0 {
		t.Fatalf("events after the flood: %v, want the two live messages' alone", got)
	}
	if n := strings.Count(m.logs.String(), "old messages written again"); n != 1 {
		t.Errorf("%d flood log lines, want 1:\n%s", n, m.logs)
	}
	if !strings.Contains(m.logs.String(), "rows=2000") {
		t.Errorf("the flood's log line does not say how many rows:\n%s", m.logs)
	}

	// A twin of a stored message under a new GUID: the same chat, sender,
	// direction and text, dated a second later.
	stored := m.td.messageByGUID(m.key, bob, sentinel)
	at := time.UnixMilli(int64(stored["sent_at"].(float64)))
	m.db.Insert(chatdbtest.Msg{Chat: bobDM, From: bob, Text: "after the flood", Date: at.Add(time.Second)})
	m.live(bobDM, bob, "after the twin")
	testkit.Eventually(t, 10*time.Second, func() bool { return m.counted("twins_suppressed") == 1 })
	n := 0
	for _, msg := range m.allMessages(bob) {
		if msg["text"] == "after the flood" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the twin was stored: %d messages \"after the flood\"", n)
	}

	// The Mac was offline for two hours: 20 unread rows from contacts,
	// dated up to two hours ago, come in a burst. Each is news, in order.
	daveDM, erinDM := m.db.DirectChat("imessage", dave), m.db.DirectChat("imessage", erin)
	var caughtUp []string
	m.db.Batch(func() {
		for i := range 20 {
			chat, from := daveDM, dave
			if i%2 == 1 {
				chat, from = erinDM, erin
			}
			_, guid := m.db.Insert(chatdbtest.Msg{Chat: chat, From: from, Text: fmt.Sprintf("while you were away %d", i),
				Date: time.Now().Add(-2*time.Hour + time.Duration(i)*6*time.Minute)})
			caughtUp = append(caughtUp, guid)
		}
	})
	for i, g := range caughtUp {
		// Read more than ten minutes after it was sent: catch-up; the
		// last one, six minutes old, is live.
		want := map[bool]string{true: "catch_up", false: "live"}[i < 19]
		if d := m.ev.next("message.received", guidIs(g)); d["arrival"] != want || d["filter"] != nil || d["sender_verified"] != true {
			t.Errorf("row %d, read %d minutes late: arrival %v, filter %v, sender_verified %v; want %s, null, true",
				i, 120-6*i, d["arrival"], d["filter"], d["sender_verified"], want)
		}
	}
	for _, contact := range []string{dave, erin} {
		var order []string
		for _, r := range m.all.Requests() {
			if r.Event() == "message.received" && r.Data()["sender"] == contact {
				order = append(order, r.Data()["guid"].(string))
			}
		}
		var want []string
		for i, g := range caughtUp {
			if (i%2 == 1) == (contact == erin) {
				want = append(want, g)
			}
		}
		if !slices.Equal(order, want) {
			t.Errorf("events of %s in the order %v, want %v", contact, order, want)
		}
	}

	// The owner types on the iPhone while the daemon runs: message.sent.
	_, typed := m.db.Insert(chatdbtest.Msg{Chat: dm, Text: "typed on the iPhone", IsSent: true})
	m.ev.next("message.sent", guidIs(typed))

	// The four-event receiver had the news only.
	testkit.Eventually(t, 10*time.Second, func() bool {
		c := (&eventLog{rc: m.four}).counts()
		return c["message.received"] == 23 && c["message.sent"] == 1
	})
	if c := (&eventLog{rc: m.four}).counts(); len(c) != 2 {
		t.Errorf("the four-event receiver had %v", c)
	}

	// The counters: the lines' health, /readyz and /metrics.
	h := m.health()
	if h["history_rows"] != float64(flood) || h["twins_suppressed"] != float64(1) || h["screened_rows"] != float64(0) ||
		h["chat_db_replaced_at"] != nil {
		t.Errorf("health %v", h)
	}
	ready := m.td.call("GET", "/readyz", "", nil)
	if !strings.Contains(string(ready.Raw), "2000 rows taken as history, 1 twins suppressed") {
		t.Errorf("readyz: %s", ready.Raw)
	}
	series := m.td.scrape()
	if v := series[`blueline_messages_history_rows_total{line="`+macLine+`"}`]; v != flood {
		t.Errorf("history rows metric %v", v)
	}
	if v := series[`blueline_messages_twins_suppressed_total{line="`+macLine+`"}`]; v != 1 {
		t.Errorf("twins metric %v", v)
	}
}

// Messages' own filters: junk, blocked, spam and the SMS filter's folders
// are stored without events and do not open the contact-first rule;
// unknown senders are delivered (or held, per line); a chat taken out of
// junk delivers from then on.
func TestMessagesFilters(t *testing.T) {
	const alice, otp, spammer, promo, stranger = "+15551230001", "56249", "+15551239999", "53849", "+15551237777"
	m := newLivedInMac(t, "", nil)
	dm := m.db.DirectChat("imessage", alice)
	m.live(dm, alice, "hi there")

	junk := m.db.DirectChat("sms", spammer)
	m.db.SetFilter(junk, 2, false, false)
	codes := m.db.DirectChat("sms", otp)
	m.db.SetFilter(codes, 36, false, false) // Transactions › Finance
	promos := m.db.DirectChat("sms", promo)
	m.db.SetFilter(promos, 3, false, false)
	unknown := m.db.DirectChat("imessage", stranger)
	m.db.SetFilter(unknown, 1, false, false)
	_, spamRow := m.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "WIN A PRIZE", Spam: true})
	m.db.Insert(chatdbtest.Msg{Chat: junk, From: spammer, Text: "Your parcel is held, pay here"})
	m.db.Insert(chatdbtest.Msg{Chat: codes, From: otp, Text: "Your code is 123456"})
	m.db.Insert(chatdbtest.Msg{Chat: promos, From: promo, Text: "50% off today"})
	strangers := m.live(unknown, stranger, "Hello, I found your shop online")
	testkit.Eventually(t, 10*time.Second, func() bool { return m.counted("screened_rows") == 4 })
	if c := m.ev.counts(); c["message.received"] != 2 {
		t.Fatalf("events %v: the filtered rows raised some", c)
	}

	chat := m.chat
	for contact, want := range map[string]any{spammer: "junk", otp: "transaction", promo: "promotion", stranger: "unknown_sender", alice: nil} {
		if c := chat(contact); c["filter"] != want {
			t.Errorf("chat with %s: filter %v, want %v", contact, c["filter"], want)
		}
	}
	if msgs := m.allMessages(otp); len(msgs) != 1 || msgs[0]["text"] != "Your code is 123456" {
		t.Errorf("the filtered chat's message is not stored: %v", msgs)
	}
	if msg := m.td.messageByGUID(m.key, alice, spamRow); msg["text"] != "WIN A PRIZE" {
		t.Errorf("the spam row is not stored: %v", msg)
	}
	// The line may answer the unknown sender, not the filtered ones.
	for _, contact := range []string{spammer, otp, promo} {
		r := m.td.call("POST", "/v1/messages", m.key, map[string]any{"from": macLine, "to": contact, "text": "hello?"})
		if r.Status != 403 || r.Body["error"].(map[string]any)["code"] != "contact_has_not_messaged" {
			t.Errorf("send to %s in a filtered chat: %d %s", contact, r.Status, r.Raw)
		}
	}
	if r := m.td.call("POST", "/v1/messages", m.key, map[string]any{"from": macLine, "to": stranger, "text": "Welcome!"}); r.Status != 201 {
		t.Errorf("send to an unknown sender: %d %s", r.Status, r.Raw)
	}

	// The owner marks the junk chat "not junk": its next message is news.
	m.db.SetFilter(junk, 0, false, false)
	wrong := m.live(junk, spammer, "Sorry, wrong number earlier")
	if c := chat(spammer); c["filter"] != nil || c["has_received_inbound"] != true {
		t.Errorf("chat out of junk: %v", c)
	}
	// Each event says its chat's filter, and an SMS sender is not verified.
	for guid, want := range map[string]struct {
		filter   any
		verified bool
	}{strangers: {"unknown_sender", true}, wrong: {nil, false}} {
		for _, r := range m.all.Requests() {
			if d := r.Data(); r.Event() == "message.received" && d["guid"] == guid && (d["filter"] != want.filter || d["sender_verified"] != want.verified) {
				t.Errorf("the event of %q: filter %v, sender_verified %v; want %v, %v", d["text"], d["filter"], d["sender_verified"], want.filter, want.verified)
			}
		}
	}
	h := m.health()
	if h["screened_rows"] != float64(4) {
		t.Errorf("health %v", h)
	}
}

// With unknown_senders = "hold", an unknown sender's messages are stored
// without events, and the line may not write to them first.
func TestMessagesHoldUnknownSenders(t *testing.T) {
	const alice, stranger, reviewed = "+15551230001", "+15551237777", "+15551236666"
	m := newLivedInMac(t, `unknown_senders = "hold"`, nil)
	dm := m.db.DirectChat("imessage", alice)
	unknown := m.db.DirectChat("imessage", stranger)
	m.db.SetFilter(unknown, 1, false, false)
	pending := m.db.DirectChat("imessage", reviewed)
	m.db.SetFilter(pending, 0, false, true)
	m.db.Insert(chatdbtest.Msg{Chat: unknown, From: stranger, Text: "Hello?"})
	m.db.Insert(chatdbtest.Msg{Chat: pending, From: reviewed, Text: "Is this the shop?"})
	m.live(dm, alice, "hi there")
	testkit.Eventually(t, 10*time.Second, func() bool { return m.counted("screened_rows") == 2 })
	if c := m.ev.counts(); c["message.received"] != 1 {
		t.Fatalf("events %v", c)
	}
	r := m.td.call("POST", "/v1/messages", m.key, map[string]any{"from": macLine, "to": stranger, "text": "hello?"})
	if r.Status != 403 {
		t.Errorf("send to a held unknown sender: %d %s", r.Status, r.Raw)
	}
	// The owner accepts the sender in Messages: delivered from then on.
	m.db.SetFilter(unknown, 0, false, false)
	m.live(unknown, stranger, "Still there?")
	if r := m.td.call("POST", "/v1/messages", m.key, map[string]any{"from": macLine, "to": stranger, "text": "Yes!"}); r.Status != 201 {
		t.Errorf("send after the sender was accepted: %d %s", r.Status, r.Raw)
	}
}

// A Time Machine restore, a copy from another Mac or Messages rebuilding
// chat.db put another file at its path, with other ROWIDs: the bridge
// notices, reads the new file from its start without events for what it
// stored already, and a contact's next message arrives.
func TestMessagesChatDBReplaced(t *testing.T) {
	const alice, bob = "+15551230001", "+15551230002"
	m := newLivedInMac(t, "", nil)
	dm := m.db.DirectChat("imessage", alice)
	var known []string
	for i := range 5 {
		known = append(known, m.live(dm, alice, fmt.Sprintf("before the restore %d", i)))
	}
	// The new file: the same messages under other ROWIDs (fewer rows
	// than the cursor), an old one the old file never had, one twin of
	// a stored message under a new GUID, and one that arrived just now.
	stored := m.td.messageByGUID(m.key, alice, known[0])
	at := time.UnixMilli(int64(stored["sent_at"].(float64)))
	var fresh string
	m.db.Replace(func(nf *chatdbtest.Fixture) {
		c := nf.DirectChat("imessage", alice)
		nf.Insert(chatdbtest.Msg{Chat: c, From: alice, Text: "restored from last month", Date: time.Now().Add(-30 * 24 * time.Hour),
			Read: time.Now().Add(-30 * 24 * time.Hour)})
		nf.Insert(chatdbtest.Msg{Chat: c, From: alice, Text: "before the restore 0", Date: at, Read: at})
		for i, g := range known[1:] {
			msg := m.td.messageByGUID(m.key, alice, g)
			nf.Insert(chatdbtest.Msg{Chat: c, GUID: g, From: alice, Text: fmt.Sprintf("before the restore %d", i+1),
				Date: time.UnixMilli(int64(msg["sent_at"].(float64)))})
		}
		_, fresh = nf.Insert(chatdbtest.Msg{Chat: c, From: alice, Text: "while the Mac was restoring"})
	})
	m.ev.next("message.received", guidIs(fresh))
	m.live(m.db.DirectChat("imessage", bob), bob, "hello after the restore")
	if c := m.ev.counts(); c["message.received"] != 7 {
		t.Errorf("events %v: want the 5 before, the one written during the restore and the one after", c)
	}
	msgs := m.allMessages(alice)
	if len(msgs) != 7 {
		t.Errorf("%d messages with alice, want 7 (5, one restored from last month, one new)", len(msgs))
	}
	h := m.health()
	if h["chat_db_replaced_at"] == nil || h["twins_suppressed"] != float64(1) {
		t.Errorf("health %v", h)
	}
	if !strings.Contains(h["summary"].(string), "chat.db replaced at ") {
		t.Errorf("summary %q", h["summary"])
	}
	if !strings.Contains(m.logs.String(), "chat.db was replaced") {
		t.Errorf("no log line says chat.db was replaced:\n%s", m.logs)
	}
}

// Rows that become real late: a Send Later message recorded when Messages
// sends it, an owner's row from another device sent late (even across a
// restart), a message whose attachment row comes after it.
func TestMessagesRowsThatBecomeRealLate(t *testing.T) {
	const alice = "+15551230001"
	m := newLivedInMac(t, `transfer_wait = "1s"`, nil)
	dm := m.db.DirectChat("imessage", alice)
	m.live(dm, alice, "hi there")

	_, later := m.db.Insert(chatdbtest.Msg{Chat: dm, Text: "happy birthday!", Scheduled: true, Date: time.Now().Add(3 * time.Hour)})
	_, offline := m.db.Insert(chatdbtest.Msg{Chat: dm, Text: "typed in the tunnel"})
	_, filesLate := m.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, FilesPending: true})
	m.live(dm, alice, "sentinel one")
	for _, msg := range m.allMessages(alice) {
		if g := msg["guid"]; g == later || g == offline || g == filesLate {
			t.Errorf("a row not yet a message was recorded: %v", msg)
		}
	}

	// The daemon restarts meanwhile: what it saw of those rows is gone.
	m.td.stop()
	d, err := daemon.Start(context.Background(), m.td.config(), daemontest.Log())
	if err != nil {
		t.Fatal(err)
	}
	m.td.d, m.td.base = d, daemontest.URL(d)
	m.live(dm, alice, "sentinel two")

	m.db.MarkSent(offline)
	m.ev.next("message.sent", guidIs(offline))
	m.db.AddAttachment(filesLate, chatdbtest.FileSpec{Path: "~/Library/Messages/Attachments/late.jpeg", MimeType: "image/jpeg",
		TransferName: "late.jpeg", TotalBytes: 10})
	got := m.ev.next("message.received", guidIs(filesLate))
	if atts, _ := got["attachments"].([]any); len(atts) != 1 {
		t.Errorf("late attachment: %v", got)
	}
	m.db.Exec("UPDATE message SET date = ? WHERE guid = ?", chatdbtest.AppleNanos(time.Now()), later)
	m.db.MarkSent(later)
	sent := m.ev.next("message.sent", guidIs(later))
	if sent["text"] != "happy birthday!" || sent["is_from_me"] != true {
		t.Errorf("the Send Later message: %v", sent)
	}
	if c := m.ev.counts(); c["message.sent"] != 2 {
		t.Errorf("events %v", c)
	}
}

// Smaller rows: the owner reading on another device (the line's receipt,
// unread counts), a read date on a group row (no receipt), an SMS marked
// delivered without a date (delivered).
func TestMessagesReadsAndDelivery(t *testing.T) {
	const alice, bob, carol = "+15551230001", "+15551230002", "+15551230003"
	m := newLivedInMac(t, fastSends, nil)
	dm := m.db.DirectChat("imessage", alice)
	var guids []string
	for i := range 3 {
		guids = append(guids, m.live(dm, alice, fmt.Sprintf("unread %d", i)))
	}
	chat := m.chat
	if c := chat(alice); c["unread_count"] != float64(3) {
		t.Fatalf("chat %v, want 3 unread", c)
	}
	// The owner reads them on the iPhone.
	readAt := time.Now()
	m.db.MarkRead(guids[2], readAt)
	testkit.Eventually(t, 10*time.Second, func() bool { return chat(alice)["unread_count"] == float64(0) })
	receipts := m.td.listAll(m.key, "/v1/receipts?from="+macLine+"&to="+alice)
	if len(receipts) != 1 || receipts[0]["handle"] != macLine || receipts[0]["last_read_at"] != millis(readAt) {
		t.Errorf("receipts %v, want the line's own", receipts)
	}
	m.live(dm, alice, "one more")
	if c := chat(alice); c["unread_count"] != float64(1) {
		t.Errorf("chat %v, want 1 unread", c)
	}

	// A read date on the owner's row in a group names no reader.
	group := m.db.GroupChat("imessage", "Climbing", alice, carol)
	m.live(group, carol, "who's in?")
	_, ours := m.db.Insert(chatdbtest.Msg{Chat: group, Text: "me!", IsSent: true})
	m.ev.next("message.sent", guidIs(ours))
	m.db.MarkRead(ours, time.Now())
	m.live(dm, alice, "sentinel")
	// And an SMS of the line's, which Messages marks delivered with no
	// date, is delivered.
	sms := m.db.DirectChat("sms", bob)
	m.live(sms, bob, "hi over SMS")
	var sent string
	m.setHandler(func(int, osaRun) answer {
		return answer{then: func() { sent = m.sendRow(sms, bob, "answer over SMS") }}
	})
	obx := m.td.send(m.key, map[string]any{"from": macLine, "to": bob, "text": "answer over SMS"})
	if item := m.td.waitOutbox(m.key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("item %v", item)
	}
	m.db.Exec("UPDATE message SET is_delivered = 1 WHERE guid = ?", sent)
	delivered := m.ev.next("message.delivered", guidIs(sent))
	if delivered["delivered_at"] == nil {
		t.Errorf("delivered %v", delivered)
	}
	for _, r := range m.all.Requests() {
		if r.Event() == "receipt.read" {
			t.Errorf("a receipt.read event: %s", r.Raw)
		}
	}
	if rs := m.td.listAll(m.key, "/v1/receipts?from="+macLine+"&to="+m.chat(group.Identifier)["id"].(string)); len(rs) != 0 {
		t.Errorf("group receipts %v", rs)
	}
}
