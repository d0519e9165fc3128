package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/bridge/messages/typedstream"
	"github.com/blueline-app/blueline/client/api"
)

// BenchmarkMessagesICloudFlood is Messages in iCloud writing 10,000 old
// rows again, under new ROWIDs and GUIDs, into the chat.db of a running
// daemon whose line holds a long history:
//
//	go test -run '^$' -bench BenchmarkMessagesICloudFlood -benchtime 1x -timeout 30m ./e2e
//
// Before the daemon first starts, chat.db gets 100,000 message rows: those
// of writeBigChatDB (440 chats used unevenly, both directions, 3% tapbacks,
// 2% replies, 2% attachments, a third in attributedBody only) and a long
// tail of 2,000 one-to-one chats of a few messages each (writeChatTail).
// The daemon imports them as history; then two webhooks are registered,
// one for every event and one for the reference service's four, and a live
// message checks that both are delivered.
//
// Timed, each iteration: one transaction writes the flood (planFlood),
// then a contact's live message (the sentinel) is written; the daemon has
// settled when the sentinel's message.received has reached both receivers
// and the line's health counts every flood row as history or as a twin.
// It reports, per flood:
//
//	write-s         the flood's transaction, as Messages commits it
//	settle-s        from that commit until settled
//	rows/s          flood rows per second of settle-s
//	flood-events    webhook deliveries other than the sentinel's: must be 0
//	twins           flood rows the line counted as twins (of those planned)
//	cpu-s           CPU time from the commit until settled
//	heap-peak-MiB   live heap at its peak after the commit, over the heap in use before the flood
//	heap-after-MiB  heap in use after the flood (after a GC), over before
//	rss-peak-MiB    RSS at its peak after the commit, over the RSS at the commit
//
// The daemon runs in the benchmark's process, beside the fixture's SQLite
// writer and the receivers: CPU and memory are the process's, measured as
// BenchmarkMessagesFirstStart measures them. -benchtime 1x is the intended
// use: the setup takes most of the run (Go runs a benchmark once with
// b.N = 1 before a -benchtime of Nx, so that N > 1 builds it twice). Each
// further iteration is a new flood (new GUIDs, twins of other messages, new
// chats), the figures averaged over them (the peaks: their maximum).
//
// Environment, for quick runs:
//
//	BLUELINE_BENCH_FLOOD_HISTORY=20000  message rows before the flood (100,000)
//	BLUELINE_BENCH_FLOOD=2000           rows of each flood (10,000)
func BenchmarkMessagesICloudFlood(b *testing.B) {
	historyRows := benchEnvInt(b, "BLUELINE_BENCH_FLOOD_HISTORY", 100_000)
	floodRows := benchEnvInt(b, "BLUELINE_BENCH_FLOOD", 10_000)

	mac := newFakeMac(b)
	start := time.Now()
	tail := writeChatTail(mac.db, min(2000, historyRows/50))
	chatdbtest.WriteLongUsed(mac.db, historyRows-tail)
	hist := readFloodHistory(b, mac.db.Path())
	want := historyMessages(b, mac.db.Path())
	b.Logf("chat.db: %d message rows (%d in the long tail), %d chats, %d twin sources; built in %s",
		historyRows, tail, len(hist.chats), len(hist.sources), time.Since(start).Round(time.Millisecond))

	all, four := newHookClock(b), newHookClock(b)
	if !all.srv.Certificate().Equal(four.srv.Certificate()) {
		b.Fatal("the two receivers' certificates differ: one ca_file cannot trust both")
	}
	ld := newLoggedDaemon(b, macLineTOML(b, mac.db.Path())+all.webhookTOML(b))
	ld.start()
	key := ld.key()
	done := ld.waitLog(30*time.Minute, "imported the Messages history", 1)
	if !strings.Contains(done, fmt.Sprintf("messages=%d ", want)) {
		b.Fatalf("imported %q, want %d messages", done, want)
	}
	b.Logf("%s", done)
	for _, hook := range []struct {
		hc     *hookClock
		events []string
	}{
		{all, api.WebhookEvents},
		{four, api.StandardEvents},
	} {
		if r := ld.call("POST", "/v1/webhooks", key, map[string]any{"from": macLine, "url": hook.hc.srv.URL + "/h",
			"events": hook.events}); r.Status != 201 {
			b.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Raw)
		}
	}
	fl := &floodRun{b: b, ld: ld, key: key, all: all, four: four}
	defer fl.diagnose()

	// One live message first, unmeasured: the first scan after the import
	// and the first HTTPS connections.
	_, warm := mac.db.Insert(chatdbtest.Msg{Chat: hist.sentinel.ref, From: hist.sentinel.members[0], Text: "warm-up"})
	fl.waitSentinel(warm, 0)
	fl.drain()
	if n, m := all.count(), four.count(); n != 1 || m != 1 {
		b.Fatalf("%d and %d deliveries after the import and one live message, want 1 and 1", n, m)
	}

	var write, settle, cpu time.Duration
	var events, twins, planned, history int
	var heapPeakMiB, heapAfterMiB, rssPeakMiB float64
	b.ResetTimer()
	for k := range b.N {
		b.StopTimer()
		plan := planFlood(hist, k, floodRows)
		h0 := fl.health()
		n0, m0 := all.count(), four.count()
		before := memNow()
		b.StartTimer()

		t0 := time.Now()
		plan.write(mac.db)
		committed := time.Now()
		cpu0 := cpuTime(b)
		resetPeakRSS()
		rss0, _, _, _ := procStatus()
		peak := heapPeak()
		_, sentinel := mac.db.Insert(chatdbtest.Msg{Chat: hist.sentinel.ref, From: hist.sentinel.members[0],
			Text: "after the flood " + strconv.Itoa(k)})
		fl.waitSentinel(sentinel, h0.history+h0.twins+int64(len(plan.rows)))
		took := time.Since(committed)
		used := cpuTime(b) - cpu0
		b.StopTimer()

		heapTop := peak()
		_, hwm, _, _ := procStatus()
		after := memNow()
		write, settle, cpu = write+committed.Sub(t0), settle+took, cpu+used
		heapPeakMiB = max(heapPeakMiB, growth(heapTop, before.heapInuse))
		heapAfterMiB += growth(after.heapInuse, before.heapInuse)
		if rss0 != 0 {
			rssPeakMiB = max(rssPeakMiB, growth(hwm, rss0))
		}

		fl.drain()
		h := fl.health()
		got := all.count() - n0 - 1 + four.count() - m0 - 1
		events += got
		twins += int(h.twins - h0.twins)
		history += int(h.history - h0.history)
		planned += plan.twins
		b.Logf("flood %d: %d rows written in %s, settled %s later (%d taken as history, %d twins of %d planned, %d screened); "+
			"%s CPU; heap %.1f MiB before, peak %.1f, after %.1f; RSS %.1f MiB at the commit, peak %.1f; %d webhook deliveries besides the sentinel's",
			k, len(plan.rows), committed.Sub(t0).Round(time.Millisecond), took.Round(time.Millisecond), h.history-h0.history,
			h.twins-h0.twins, plan.twins, h.screened-h0.screened, used.Round(time.Millisecond),
			mib(before.heapInuse), mib(heapTop), mib(after.heapInuse), mib(rss0), mib(hwm), got)
		if got != 0 {
			b.Fatalf("the flood raised %d webhook deliveries: %s", got, strings.Join(fl.newKeys(), ", "))
		}
		if sum := h.history + h.twins - h0.history - h0.twins; sum != int64(len(plan.rows)) {
			b.Errorf("history_rows + twins_suppressed grew by %d, want %d", sum, len(plan.rows))
		}
		if h.twins-h0.twins != int64(plan.twins) {
			b.Errorf("%d twins suppressed, %d written", h.twins-h0.twins, plan.twins)
		}
	}
	b.StopTimer()
	if lines := ld.logLines("old messages written again"); len(lines) > 0 {
		b.Logf("%d flood log lines, the last: %s", len(lines), lines[len(lines)-1])
	}
	n := float64(b.N)
	b.ReportMetric(write.Seconds()/n, "write-s")
	b.ReportMetric(settle.Seconds()/n, "settle-s")
	b.ReportMetric(float64(floodRows)*n/settle.Seconds(), "rows/s")
	b.ReportMetric(float64(events), "flood-events")
	b.ReportMetric(float64(history)/n, "history-rows")
	b.ReportMetric(float64(twins)/n, "twins")
	b.ReportMetric(cpu.Seconds()/n, "cpu-s")
	b.ReportMetric(heapPeakMiB, "heap-peak-MiB")
	b.ReportMetric(heapAfterMiB/n, "heap-after-MiB")
	if rssPeakMiB != 0 {
		b.ReportMetric(rssPeakMiB, "rss-peak-MiB")
	}
	b.ReportMetric(0, "ns/op")
}

// floodRun is the running daemon of BenchmarkMessagesICloudFlood and its
// two receivers.
type floodRun struct {
	b         *testing.B
	ld        *loggedDaemon
	key       string
	all, four *hookClock
	seen      map[string]bool // deliveries (event ‖ " " ‖ guid) before the flood
}

// lineCounts is what the Messages line's health counts.
type lineCounts struct{ history, twins, screened int64 }

// health reads the Messages line's counts in GET /v1/lines.
func (fl *floodRun) health() lineCounts {
	fl.b.Helper()
	r := fl.ld.call("GET", "/v1/lines", fl.key, nil)
	if r.Status != 200 {
		fl.b.Fatalf("GET /v1/lines: %d %s", r.Status, r.Raw)
	}
	for _, l := range r.Data() {
		if l["handle"] != macLine {
			continue
		}
		h, ok := l["health"].(map[string]any)
		if !ok {
			fl.b.Fatalf("the Messages line has no health: %v", l)
		}
		n := func(name string) int64 { v, _ := h[name].(float64); return int64(v) }
		return lineCounts{history: n("history_rows"), twins: n("twins_suppressed"), screened: n("screened_rows")}
	}
	fl.b.Fatal("no Messages line in GET /v1/lines")
	return lineCounts{}
}

// waitSentinel waits until the message.received of guid has reached both
// receivers and the line counts at least counted rows as history or twins.
func (fl *floodRun) waitSentinel(guid string, counted int64) {
	fl.b.Helper()
	waitCount(fl.b, 10*time.Minute, func() bool {
		_, ok1 := fl.all.arrived(api.EventMessageReceived, guid)
		_, ok2 := fl.four.arrived(api.EventMessageReceived, guid)
		if !ok1 || !ok2 {
			return false
		}
		h := fl.health()
		return h.history+h.twins >= counted
	})
}

// drain waits until the daemon has no webhook delivery left to make and
// the receivers have had every one it made, then notes them as seen.
func (fl *floodRun) drain() {
	fl.b.Helper()
	waitCount(fl.b, time.Minute, func() bool {
		s := fl.ld.scrape()
		pending, ok1 := s["blueline_webhook_deliveries_pending"]
		succeeded, ok2 := s[`blueline_webhook_attempts_total{outcome="success"}`]
		return ok1 && ok2 && pending == 0 && succeeded == float64(fl.all.count()+fl.four.count())
	})
	fl.seen = map[string]bool{}
	for _, k := range fl.newKeys() {
		fl.seen[k] = true
	}
}

// newKeys lists the deliveries (receiver: event guid) not seen before.
func (fl *floodRun) newKeys() []string {
	var out []string
	for name, hc := range map[string]*hookClock{"all": fl.all, "four": fl.four} {
		hc.mu.Lock()
		for k := range hc.at {
			if k = name + ": " + k; !fl.seen[k] {
				out = append(out, k)
			}
		}
		hc.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// diagnose, when the benchmark failed, says what the daemon had done and
// keeps its log in the system's temporary folder.
func (fl *floodRun) diagnose() {
	if !fl.b.Failed() {
		return
	}
	keys := fl.newKeys()
	fl.b.Logf("receivers: %d deliveries to every-event webhook, %d to the four-event one; new: %d %s",
		fl.all.count(), fl.four.count(), len(keys), strings.Join(keys[:min(len(keys), 10)], ", "))
	if r := fl.ld.call("GET", "/v1/lines", fl.key, nil); r.Status == 200 {
		for _, l := range r.Data() {
			if l["handle"] == macLine {
				fl.b.Logf("health: %v", l["health"])
			}
		}
	}
	lines := fl.ld.logLines("old messages written again")
	fl.b.Logf("%d flood log lines; %d twin log lines", len(lines), len(fl.ld.logLines("written again under a new GUID")))
	p := filepath.Join(os.TempDir(), "blueline-bench", "flood-"+time.Now().Format("20060102-150405")+".log")
	if os.MkdirAll(filepath.Dir(p), 0o700) == nil && os.WriteFile(p, []byte(fl.ld.log.String()), 0o600) == nil {
		fl.b.Logf("daemon log: %s", p)
	}
}

// floodChat is a chat of the history: its reference, its members'
// addresses, and how many rows it holds.
type floodChat struct {
	ref     chatdbtest.ChatRef
	members []string
	rows    int
}

// twinSource is a stored message a twin repeats: a text message of the
// history, without files.
type twinSource struct {
	chat   int // in floodHistory.chats
	from   string
	fromMe bool
	text   string
	date   time.Time
}

// floodHistory is what the flood is made from: the history's chats,
// weighted by their rows, and the messages it may repeat.
type floodHistory struct {
	chats    []floodChat
	cum      []float64 // cumulative rows, to pick a chat as the rows go
	sources  []twinSource
	sentinel floodChat // a one-to-one chat, for the live messages
}

// readFloodHistory reads the chats and the text messages of the chat.db at
// path, as the first start imports them.
func readFloodHistory(b *testing.B, path string) *floodHistory {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	h := &floodHistory{}
	index := map[int64]int{}
	rows, err := db.Query(`SELECT c.ROWID, c.guid, c.chat_identifier, c.service_name,
		(SELECT COUNT(*) FROM chat_message_join j WHERE j.chat_id = c.ROWID) FROM chat c ORDER BY c.ROWID`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var c floodChat
		if err := rows.Scan(&c.ref.RowID, &c.ref.GUID, &c.ref.Identifier, &c.ref.Service, &c.rows); err != nil {
			b.Fatal(err)
		}
		index[c.ref.RowID] = len(h.chats)
		h.chats = append(h.chats, c)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	rows, err = db.Query(`SELECT j.chat_id, h.id FROM chat_handle_join j JOIN handle h ON h.ROWID = j.handle_id ORDER BY j.chat_id, h.id`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var chat int64
		var addr string
		if err := rows.Scan(&chat, &addr); err != nil {
			b.Fatal(err)
		}
		c := &h.chats[index[chat]]
		c.members = append(c.members, addr)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, c := range h.chats {
		total += float64(c.rows)
		h.cum = append(h.cum, total)
		if h.sentinel.ref.RowID == 0 && strings.Contains(c.ref.GUID, ";-;") && len(c.members) == 1 {
			h.sentinel = c
		}
	}
	if h.sentinel.ref.RowID == 0 {
		b.Fatal("no one-to-one chat in the history")
	}
	rows, err = db.Query(`SELECT j.chat_id, COALESCE(h.id, ''), m.is_from_me, m.text, m.attributedBody, m.date
		FROM message m JOIN chat_message_join j ON j.message_id = m.ROWID LEFT JOIN handle h ON h.ROWID = m.handle_id
		WHERE m.associated_message_type = 0 AND m.item_type = 0 AND m.cache_has_attachments = 0
			AND (m.is_from_me = 0 OR m.is_sent = 1) ORDER BY m.ROWID`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var chat, date int64
		var s twinSource
		var text sql.NullString
		var body []byte
		if err := rows.Scan(&chat, &s.from, &s.fromMe, &text, &body, &date); err != nil {
			b.Fatal(err)
		}
		s.chat, s.text, s.date = index[chat], text.String, chatdbtest.AppleTime(date)
		if !text.Valid {
			if s.text, err = typedstream.Text(body); err != nil {
				b.Fatal(err)
			}
		}
		if s.fromMe {
			s.from = ""
		}
		if s.text != "" {
			h.sources = append(h.sources, s)
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(h.sources), func(i, j int) { h.sources[i], h.sources[j] = h.sources[j], h.sources[i] })
	return h
}

// writeChatTail adds the one-to-one chats a long-used Mac has besides its
// regulars: n chats of 1 to 4 messages each (one-off contacts, senders of
// codes), a fifth of them SMS, a tenth with an email address, dated over
// the two years before the last week, the contacts' rows read. It returns
// how many rows it wrote.
func writeChatTail(fx *chatdbtest.Fixture, n int) (rows int) {
	rng := rand.New(rand.NewPCG(20240602, uint64(n)))
	now := time.Now()
	fx.Batch(func() {
		for i := range n {
			addr, service := fmt.Sprintf("+1556%07d", 1000000+i*13), "imessage"
			switch {
			case i%10 == 7:
				addr = fmt.Sprintf("someone%d@example.net", i)
			case i%5 == 2:
				service = "sms"
			}
			chat := fx.DirectChat(service, addr)
			date := now.Add(-7*24*time.Hour - time.Duration(rng.Int64N(int64(723*24*time.Hour))))
			for j := range 1 + rng.IntN(4) {
				m := chatdbtest.Msg{Chat: chat, Text: floodText(rng, -1, i*4+j), Date: date, Ventura: rng.IntN(3) == 0}
				if rng.IntN(2) == 0 {
					m.IsSent = true
				} else {
					m.From, m.Read = addr, date.Add(time.Duration(1+rng.IntN(600))*time.Minute)
				}
				fx.Insert(m)
				rows++
				date = date.Add(time.Duration(1+rng.IntN(240)) * time.Minute)
			}
		}
	})
	return rows
}

// floodWords are the flood's and the tail's texts.
var floodWords = strings.Fields("ok sure thanks see you later tonight tomorrow at the station call me back when free " +
	"running late be there in ten minutes did you get my photo yes no maybe next week dinner lunch the kids game")

// floodText is a short text; with flood ≥ 0, one no other flood row or
// history message has (so that a row meant as history is never a twin).
func floodText(rng *rand.Rand, flood, i int) string {
	s := make([]string, 1+rng.IntN(12))
	for j := range s {
		s[j] = floodWords[rng.IntN(len(floodWords))]
	}
	if flood >= 0 {
		s = append(s, fmt.Sprintf("(%d.%d)", flood, i))
	}
	return strings.Join(s, " ")
}

// floodPlan is one flood: its rows in the order they are written, and the
// chats it creates.
type floodPlan struct {
	rows     []floodRow
	newChats []newFloodChat
	twins    int
}

type floodRow struct {
	msg     chatdbtest.Msg
	newChat int // index in floodPlan.newChats, -1 when msg.Chat is set
}

type newFloodChat struct {
	service string
	name    string
	members []string // one address: a one-to-one chat
}

// planFlood plans flood k of n rows, as Messages in iCloud writes them
// again: a fifth twins of stored text messages (the same chat, sender and
// text, dated within a second of them, the contacts' rows read); the rest
// dated 24 to 48 hours ago, 45% the owner's (sent), the contacts' read,
// 2% with a photo, a third in attributedBody only, 15% in chats the
// history does not have (n/50 one-to-one chats and n/1000 groups), the
// others in the history's chats by their share of its rows. All in no
// date order.
func planFlood(h *floodHistory, k, n int) *floodPlan {
	rng := rand.New(rand.NewPCG(uint64(k)+1, 20240603))
	p := &floodPlan{twins: n / 5}
	for i := range p.twins {
		s := h.sources[(k*p.twins+i)%len(h.sources)]
		m := chatdbtest.Msg{Chat: h.chats[s.chat].ref, From: s.from, IsSent: s.fromMe, Text: s.text, Ventura: rng.IntN(3) == 0,
			Date: s.date.Add(time.Duration(rng.IntN(1800)-900) * time.Millisecond)}
		if !s.fromMe {
			m.Read = s.date.Add(time.Duration(1+rng.IntN(600)) * time.Minute)
		}
		p.rows = append(p.rows, floodRow{msg: m, newChat: -1})
	}
	for i := range max(1, n/50) {
		c := newFloodChat{service: "imessage", members: []string{fmt.Sprintf("+1557%07d", k*10000+i)}}
		if i%7 == 3 {
			c.service = "sms"
		}
		p.newChats = append(p.newChats, c)
	}
	for i := range n / 1000 {
		members := []string{fmt.Sprintf("+1558%07d", k*10000+i)}
		for range 1 + rng.IntN(5) {
			members = append(members, h.chats[rng.IntN(len(h.chats))].members...)
		}
		slices.Sort(members)
		p.newChats = append(p.newChats, newFloodChat{service: "imessage", name: fmt.Sprintf("Trip %d.%d", k, i),
			members: slices.Compact(members)})
	}
	now := time.Now()
	for i := range n - p.twins {
		r := floodRow{newChat: -1}
		var members []string
		if i < len(p.newChats) || rng.IntN(100) < 15 {
			r.newChat = i % len(p.newChats)
			if i >= len(p.newChats) {
				r.newChat = rng.IntN(len(p.newChats))
			}
			members = p.newChats[r.newChat].members
		} else {
			j, _ := slices.BinarySearch(h.cum, rng.Float64()*h.cum[len(h.cum)-1])
			c := h.chats[min(j, len(h.chats)-1)]
			r.msg.Chat, members = c.ref, c.members
		}
		date := now.Add(-24*time.Hour - time.Duration(rng.Int64N(int64(24*time.Hour))))
		r.msg.Date, r.msg.Ventura = date, rng.IntN(3) == 0
		r.msg.Text = floodText(rng, k, i)
		if rng.IntN(100) < 45 || len(members) == 0 {
			r.msg.IsSent = true
		} else {
			r.msg.From = members[rng.IntN(len(members))]
			r.msg.Read = date.Add(time.Duration(1+rng.IntN(600)) * time.Minute)
		}
		if rng.IntN(100) < 2 {
			name := fmt.Sprintf("IMG_%04d.jpeg", rng.IntN(10000))
			r.msg.Attachments = []chatdbtest.FileSpec{{
				Path:     fmt.Sprintf("~/Library/Messages/Attachments/%02x/%02d/F%d.%d/%s", rng.IntN(256), rng.IntN(100), k, i, name),
				MimeType: "image/jpeg", TransferName: name, UTI: "public.jpeg", TotalBytes: int64(100000 + rng.IntN(3000000)),
			}}
		}
		p.rows = append(p.rows, r)
	}
	rng.Shuffle(len(p.rows), func(i, j int) { p.rows[i], p.rows[j] = p.rows[j], p.rows[i] })
	return p
}

// write writes the flood into fx in one transaction: its new chats, then
// its rows.
func (p *floodPlan) write(fx *chatdbtest.Fixture) {
	fx.Batch(func() {
		refs := make([]chatdbtest.ChatRef, len(p.newChats))
		for i, c := range p.newChats {
			if c.name == "" {
				refs[i] = fx.DirectChat(c.service, c.members[0])
			} else {
				refs[i] = fx.GroupChat(c.service, c.name, c.members...)
			}
		}
		for _, r := range p.rows {
			if r.newChat >= 0 {
				r.msg.Chat = refs[r.newChat]
			}
			fx.Insert(r.msg)
		}
	})
}
