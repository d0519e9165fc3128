package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

const macLine = "+15550000009" // the line on the (simulated) Mac's Messages

// fakeMac is the edge we cannot run here: the Messages app. Its database is
// a real SQLite file with Messages' schema, written as Messages writes it;
// its osascript is a stand-in program that records each script and its argv
// and exits 0, and the test then does what Messages would do in chat.db.
type fakeMac struct {
	t     testing.TB
	home  string
	db    *chatdbtest.Fixture
	spool string // where the stand-in osascript leaves its requests
	osa   string // the stand-in's path

	mu   sync.Mutex
	seen map[string]bool
	// pingEvery turns the line's watchdog on at this interval; off when
	// "", so that the runs a test counts are its own.
	pingEvery string
}

// osascriptStandIn records the script (stdin) and argv (NUL-separated) of a
// run, then renames the record into place, so the test never reads half a
// request.
const osascriptStandIn = `#!/bin/sh
req=$(mktemp "$BLUELINE_OSA_SPOOL/req.XXXXXX")
cat > "$req.script"
for a in "$@"; do printf '%s\0' "$a"; done > "$req.args"
mv "$req" "$req.ready"
`

func newFakeMac(t testing.TB) *fakeMac {
	home := t.TempDir()
	t.Setenv("HOME", home) // chat.db's "~/…" attachment paths expand here
	m := &fakeMac{t: t, home: home, spool: t.TempDir(), seen: map[string]bool{}}
	msgDir := filepath.Join(home, "Library", "Messages")
	if err := os.MkdirAll(msgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	m.db = chatdbtest.New(t, msgDir)
	m.osa = filepath.Join(t.TempDir(), "osascript")
	writeFile(t, m.osa, osascriptStandIn)
	if err := os.Chmod(m.osa, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BLUELINE_OSA_SPOOL", m.spool)
	return m
}

// config is the [[lines]] table of the Mac's line.
func (m *fakeMac) config(helperPort int) string {
	watchdog := "watchdog = false\n"
	if m.pingEvery != "" {
		watchdog = fmt.Sprintf("ping_every = %q\n", m.pingEvery)
	}
	return fmt.Sprintf("\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nosascript = %q\nhelper_port = %d\n",
		macLine, m.db.Path(), m.osa, helperPort) + watchdog
}

type osaRun struct {
	script string
	args   []string
}

// nextRun waits for the next osascript run.
func (m *fakeMac) nextRun() osaRun {
	m.t.Helper()
	var run osaRun
	testkit.Eventually(m.t, 10*time.Second, func() bool {
		entries, _ := os.ReadDir(m.spool)
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".ready")
			m.mu.Lock()
			fresh := ok && !m.seen[name]
			if fresh {
				m.seen[name] = true
			}
			m.mu.Unlock()
			if !fresh {
				continue
			}
			base := filepath.Join(m.spool, name)
			script, err1 := os.ReadFile(base + ".script")
			args, err2 := os.ReadFile(base + ".args")
			if err1 != nil || err2 != nil {
				m.t.Fatalf("read osascript request: %v %v", err1, err2)
			}
			run = osaRun{script: string(script), args: strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00")}
			return true
		}
		return false
	})
	return run
}

// fakeHelper is the private-API helper inside Messages: it connects to the
// daemon, and answers each request with a new GUID.
type fakeHelper struct {
	conn   net.Conn
	frames chan map[string]any
}

func connectHelper(t *testing.T, port int) *fakeHelper { return connectHelperWith(t, port, nil) }

// connectHelperWith connects a fake helper whose answer to a request frame
// is answer's fields (JSON, without the braces: `"identifier":"…"`), or
// the default when answer returns "".
func connectHelperWith(t *testing.T, port int, answer func(frame map[string]any) string) *fakeHelper {
	return connectHelperDeclaring(t, port, nil, answer)
}

// connectHelperDeclaring connects a fake helper that declares features
// beyond the stock helper's in its greeting (none: as the stock BlueBubbles
// helper, which declares nothing).
func connectHelperDeclaring(t *testing.T, port int, features []string, answer func(frame map[string]any) string) *fakeHelper {
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := &fakeHelper{conn: conn, frames: make(chan map[string]any, 16)}
	greeting := map[string]any{"event": "ping", "message": "Helper Connected!"}
	if features != nil {
		greeting["capabilities"] = features
	}
	g, _ := json.Marshal(greeting)
	fmt.Fprint(conn, string(g)+"\r\n")
	go func() {
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			var f map[string]any
			if json.Unmarshal(sc.Bytes(), &f) != nil {
				continue
			}
			h.frames <- f
			if id, ok := f["transactionId"].(string); ok {
				fields := ""
				if answer != nil {
					fields = answer(f)
				}
				if fields == "" {
					fields = fmt.Sprintf(`"identifier":"HELPER-%s"`, id)
				}
				fmt.Fprintf(conn, `{"transactionId":%q,%s}`+"\r\n", id, fields)
			}
		}
		close(h.frames)
	}()
	return h
}

func (h *fakeHelper) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case f, ok := <-h.frames:
		if !ok {
			t.Fatal("the daemon closed the helper's connection")
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame from the daemon")
	}
	return nil
}

func freeTCPPort(t testing.TB) int {
	port, _ := strconv.Atoi(strings.Split(freePort(t), ":")[1])
	return port
}

// messagesOf lists a chat's messages on the Mac's line, oldest first.
func (td *testDaemon) messagesOf(key, to string) []map[string]any {
	td.t.Helper()
	items := td.call("GET", "/v1/messages?from="+macLine+"&to="+to+"&limit=100", key, nil).Data()
	slices.Reverse(items)
	return items
}

func TestMessagesBridge(t *testing.T) {
	mac := newFakeMac(t)
	rc := newReceiver(t, nil)
	const alice, bob, carol = "+15551230001", "+15551230002", "+15551230003"
	dm := mac.db.DirectChat("imessage", alice)
	sms := mac.db.DirectChat("sms", bob)
	group := mac.db.GroupChat("imessage", "Climbing", alice, carol)

	// History: rows before the daemon first starts are imported, without
	// events.
	_, oldGUID := mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "from last year", Date: time.Now().Add(-24 * time.Hour)})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, Text: "my old answer", IsSent: true, Date: time.Now().Add(-23 * time.Hour)})

	helperPort := freeTCPPort(t)
	td := startTestDaemon(t, mac.config(helperPort)+webhookConfig(t, rc, ""))
	key := td.key()
	var hist []map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool { hist = td.messagesOf(key, alice); return len(hist) >= 2 })
	if len(hist) != 2 || hist[0]["text"] != "from last year" || hist[0]["guid"] != oldGUID || hist[1]["is_from_me"] != true {
		t.Fatalf("history: %v", hist)
	}
	td.register(key, macLine, rc, "message.received", "message.sent", "reaction.added", "reaction.removed")

	// New rows reach the API and the webhook.
	_, helloGUID := mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hello from the Mac"})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "typed on Ventura", Ventura: true})
	mac.db.Insert(chatdbtest.Msg{Chat: sms, From: bob, Text: "an SMS"})
	mac.db.Insert(chatdbtest.Msg{Chat: group, From: carol, Text: "group hello", ReplyTo: helloGUID})
	photo := filepath.Join(mac.home, "Library/Messages/Attachments/ab/01/IMG_1.jpeg")
	os.MkdirAll(filepath.Dir(photo), 0o700)
	writeFile(t, photo, "jpeg bytes")
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Attachments: []chatdbtest.FileSpec{{
		Path: "~/Library/Messages/Attachments/ab/01/IMG_1.jpeg", MimeType: "image/jpeg", TransferName: "IMG_1.jpeg", TotalBytes: 10}}})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, IsAudioMessage: true, Text: "call me later"})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: helloGUID, ReactionType: 2000})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: helloGUID, ReactionType: 3000})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, ItemType: 2}) // a system row: skipped
	// Sent from the owner's iPhone: reported once it is sent.
	_, elsewhere := mac.db.Insert(chatdbtest.Msg{Chat: dm, Text: "sent from my iPhone"})

	// Each chat's events come in order; different chats' may interleave.
	got := rc.waitRequests(8)
	var inDM, others []string
	for _, g := range got {
		if g.Err != nil {
			t.Fatalf("delivery does not verify: %v", g.Err)
		}
		ev := g.Event() + ":" + fmt.Sprint(g.Data()["text"])
		if g.Data()["chat_id"] == hist[0]["chat_id"] {
			inDM = append(inDM, ev)
		} else {
			others = append(others, ev)
		}
	}
	slices.Sort(others)
	wantDM := []string{"message.received:hello from the Mac", "message.received:typed on Ventura", "message.received:<nil>",
		"message.received:<nil>", "reaction.added:<nil>", "reaction.removed:<nil>"}
	if wantOthers := []string{"message.received:an SMS", "message.received:group hello"}; !slices.Equal(inDM, wantDM) || !slices.Equal(others, wantOthers) {
		t.Fatalf("events:\n%v\n%v\nwant\n%v\n%v", inDM, others, wantDM, wantOthers)
	}
	mac.db.MarkSent(elsewhere)
	if g := rc.waitRequests(9)[8]; g.Event() != "message.sent" || g.Data()["text"] != "sent from my iPhone" || g.Data()["is_from_me"] != true || g.Data()["outbox_id"] != nil {
		t.Errorf("message sent elsewhere: %s", g.Raw)
	}

	msgs := td.messagesOf(key, alice)
	byText := map[string]map[string]any{}
	for _, m := range msgs {
		byText[fmt.Sprint(m["text"])] = m
	}
	if m := byText["hello from the Mac"]; m["sender"] != alice || m["service"] != "imessage" || m["guid"] != helloGUID {
		t.Errorf("hello: %v", m)
	}
	var photoMsg, memo map[string]any
	for _, m := range msgs {
		if m["is_audio_message"] == true {
			memo = m
		} else if len(m["attachments"].([]any)) == 1 {
			photoMsg = m
		}
	}
	if photoMsg == nil || memo == nil {
		t.Fatalf("no photo or memo among %v", msgs)
	}
	att := photoMsg["attachments"].([]any)[0].(map[string]any)
	if resp, body := get(t, "GET", att["url"].(string)); resp.StatusCode != 200 || string(body) != "jpeg bytes" || att["filename"] != "IMG_1.jpeg" {
		t.Errorf("photo: %v, download %d %q", att, resp.StatusCode, body)
	}
	if a := memo["attachments"].([]any)[0].(map[string]any); a["transcription"] != "call me later" || memo["text"] != nil {
		t.Errorf("voice memo: %v", memo)
	}
	if m := td.call("GET", "/v1/messages?from="+macLine+"&to="+bob, key, nil).Data(); len(m) != 1 || m[0]["service"] != "sms" {
		t.Errorf("SMS chat: %v", m)
	}
	chats := td.call("GET", "/v1/chats?from="+macLine, key, nil).Data()
	var groupChat map[string]any
	for _, c := range chats {
		if c["is_group"] == true {
			groupChat = c
		}
	}
	if groupChat == nil || groupChat["name"] != "Climbing" || len(groupChat["participants"].([]any)) != 2 {
		t.Fatalf("group chat: %v", chats)
	}
	if g := td.call("GET", "/v1/messages?from="+macLine+"&to="+groupChat["id"].(string), key, nil).Data(); len(g) != 1 || g[0]["reply_to_guid"] != helloGUID {
		t.Errorf("group message: %v", g)
	}

	// Sending: the script gets the data only in argv, hostile or not; the
	// outcome comes from chat.db, not from osascript's exit status.
	hostile := "it's \"quoted\" \\ back\nslash\" & do shell script \"touch /tmp/pwned\" & \""
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": hostile})
	run := mac.nextRun()
	if len(run.args) != 4 || run.args[0] != "-" || run.args[1] != dm.GUID || run.args[2] != hostile ||
		!strings.Contains(run.script, "send messageText to chat id chatGUID") || strings.Contains(run.script, "pwned") {
		t.Fatalf("osascript run: %q %q", run.script, run.args)
	}
	if st := td.call("GET", "/v1/outbox?id="+obx["id"].(string), key, nil).Body["status"]; st != "claimed" {
		t.Errorf("before chat.db shows the send, the item is %v", st)
	}
	_, sentGUID := mac.db.Insert(chatdbtest.Msg{Chat: dm, Text: hostile}) // Messages writes the row, unsent…
	mac.db.MarkSent(sentGUID)                                             // …then sent
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("send: %v", item)
	}
	sent := rc.waitRequests(10)[9]
	if sent.Event() != "message.sent" || sent.Data()["guid"] != sentGUID || sent.Data()["outbox_id"] != obx["id"] {
		t.Errorf("message.sent: %s", sent.Raw)
	}

	// A send Messages fails.
	obx = td.send(key, map[string]any{"from": macLine, "to": bob, "text": "will fail"})
	if run := mac.nextRun(); run.args[1] != sms.GUID {
		t.Fatalf("SMS send: %q", run.args)
	}
	_, failGUID := mac.db.Insert(chatdbtest.Msg{Chat: sms, Text: "will fail"})
	mac.db.MarkError(failGUID, 22)
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "failed" || !strings.Contains(fmt.Sprint(item["error"]), "error 22") {
		t.Fatalf("failed send: %v", item)
	}
	// A picture goes out as a file staged under the attachments folder,
	// recognised in chat.db by its name.
	pic := td.mustUpload(key, []byte("png bytes"), "image/png", "chart.png")
	obx = td.send(key, map[string]any{"from": macLine, "to": alice, "attachments": []string{pic}})
	run = mac.nextRun()
	stagedPic := run.args[2]
	if content, _ := os.ReadFile(stagedPic); len(run.args) != 4 || run.args[1] != dm.GUID || string(content) != "png bytes" ||
		filepath.Base(stagedPic) != "chart.png" || !strings.HasPrefix(stagedPic, filepath.Join(mac.home, "Library/Messages/Attachments/blueline")) ||
		!strings.Contains(run.script, "as POSIX file") {
		t.Fatalf("file send: %q %q", run.script, run.args)
	}
	_, picGUID := mac.db.Insert(chatdbtest.Msg{Chat: dm, Attachments: []chatdbtest.FileSpec{{Path: stagedPic, MimeType: "image/png", TransferName: "chart.png", TotalBytes: 9}}})
	mac.db.MarkSent(picGUID)
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("file send: %v", item)
	}
	if _, err := os.Stat(stagedPic); !os.IsNotExist(err) {
		t.Errorf("the staged picture was not cleaned up: %v", err)
	}
	if g := rc.waitRequests(11)[10]; g.Event() != "message.sent" || g.Data()["guid"] != picGUID {
		t.Errorf("file message.sent: %s", g.Raw)
	}

	// Our own sends were never reported as sent from elsewhere: the next
	// delivery is a sentinel inserted after them.
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "sentinel"})
	if g := rc.waitRequests(12); len(g) != 12 || g[11].Data()["text"] != "sentinel" {
		t.Fatalf("after our sends: %s", g[len(g)-1].Raw)
	}

	// Advanced features follow the private-API helper.
	reaction := map[string]any{"from": macLine, "to": alice, "message_id": helloGUID, "type": "like"}
	if r := td.call("POST", "/v1/reactions", key, reaction); r.ErrCode() != "advanced_features_required" {
		t.Fatalf("reaction without the helper: %d %s", r.Status, r.Raw)
	}
	helper := connectHelper(t, helperPort)
	macAdvanced := func() bool {
		for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
			if l["handle"] == macLine {
				return l["advanced_features"] == true
			}
		}
		return false
	}
	testkit.Eventually(t, 5*time.Second, macAdvanced)

	r := td.call("POST", "/v1/reactions", key, reaction)
	if r.Status != 201 {
		t.Fatalf("reaction: %d %s", r.Status, r.Raw)
	}
	f := helper.next(t)
	data, _ := f["data"].(map[string]any)
	if f["action"] != "send-reaction" || data["chatGuid"] != dm.GUID || data["selectedMessageGuid"] != helloGUID || data["reactionType"] != "like" {
		t.Fatalf("reaction frame: %v", f)
	}
	if item := td.waitOutbox(key, r.Body["id"].(string)); item["status"] != "sent" {
		t.Fatalf("reaction: %v", item)
	}
	r = td.call("POST", "/v1/typing", key, map[string]any{"from": macLine, "to": alice})
	if f := helper.next(t); r.Status != 201 || f["action"] != "start-typing" || f["data"].(map[string]any)["chatGuid"] != dm.GUID {
		t.Fatalf("typing: %d, frame %v", r.Status, f)
	}
	r = td.call("POST", "/v1/receipts", key, map[string]any{"from": macLine, "to": alice})
	if f := helper.next(t); r.Status != 201 || f["action"] != "mark-chat-read" {
		t.Fatalf("receipt: %d, frame %v", r.Status, f)
	}

	// A voice memo goes through the helper as an audio-message balloon,
	// staged where sandboxed Messages may read it.
	audio := td.mustUpload(key, []byte("caf audio"), "audio/x-caf", "memo.caf")
	r = td.call("POST", "/v1/audio-messages", key, map[string]any{"from": macLine, "to": alice, "audio_message": audio})
	if r.Status != 201 {
		t.Fatalf("audio message: %d %s", r.Status, r.Raw)
	}
	f = helper.next(t)
	data, _ = f["data"].(map[string]any)
	path, _ := data["filePath"].(string)
	staged, _ := os.ReadFile(path)
	if f["action"] != "send-attachment" || data["isAudioMessage"] != float64(1) || string(staged) != "caf audio" ||
		!strings.HasPrefix(path, filepath.Join(mac.home, "Library/Messages/Attachments/blueline")) {
		t.Fatalf("audio frame: %v (staged %q)", f, staged)
	}
	memoGUID := "HELPER-" + f["transactionId"].(string)
	mac.db.Insert(chatdbtest.Msg{Chat: dm, GUID: memoGUID, IsAudioMessage: true, IsSent: true})
	if item := td.waitOutbox(key, r.Body["id"].(string)); item["status"] != "sent" {
		t.Fatalf("audio message: %v", item)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the staged file was not cleaned up: %v", err)
	}

	// A contact typing, as the helper reports it.
	fmt.Fprintf(helper.conn, `{"event":"started-typing","guid":%q}`+"\r\n", dm.GUID)
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, ind := range td.call("GET", "/v1/typing?from="+macLine+"&to="+alice, key, nil).Data() {
			if ind["handle"] == alice && ind["is_typing"] == true {
				return true
			}
		}
		return false
	})
	helper.conn.Close()
	testkit.Eventually(t, 5*time.Second, func() bool { return !macAdvanced() })

	// A restart neither replays old rows nor misses one written meanwhile.
	before := len(rc.Requests())
	td.stop()
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "while you were away"})
	td.start()
	got = rc.waitRequests(before + 1)
	if got[before].Data()["text"] != "while you were away" {
		t.Fatalf("after restart: %s", got[before].Raw)
	}
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "second sentinel"})
	if got = rc.waitRequests(before + 2); len(got) != before+2 || got[before+1].Data()["text"] != "second sentinel" {
		t.Fatalf("after restart, old rows came again: %d deliveries", len(got))
	}
}
